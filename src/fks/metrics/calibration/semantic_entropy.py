r"""Semantic entropy (``calibration_and_uncertainty.zh.md``, "Semantic uncertainty").

**Sampling** (:func:`sample_answers`, ``fks calibrate sample RUN --model-path P``): ``k``
answers per query from the exact fks prompt (:func:`fks.generate.prompts.build_prompt` /
``encode_prompt``), LEFT-padded batches, pure temperature sampling at a FROZEN temperature
(default 1.0; no top-k/top-p, no repetition penalty), at most ``max_new_tokens`` tokens, stop at
EOS. Randomness: prompt ``i`` (its position in the run's full sample list) owns a
``torch.Generator`` seeded with ``seed + i``; each step draws its ``k`` tokens with one
``torch.multinomial`` call on that generator, so a prompt's samples do not depend on the batch
it is in, nor on resuming. Rows go to ``RUN/samples.jsonl`` (one per query: ``samples``,
``temperature``, ``k``, ``seed``, ...), appended durably; a rerun skips the queries done and
refuses another ``k``/temperature/seed (the protocol is frozen per file).

**Clustering.** Each sample's span (:func:`fks.judge.answer_span`, first segment) goes through
the alias judge's reference-blind step one (:func:`fks.judge.assign_alias`) against the
relation slot's lexicon (every known entity, all aliases) with the question's own entity as
``mentions``. Two samples are equivalent iff they get the same cluster id; a fixed key per
answer makes this an equivalence (bidirectional, transitive) by construction. Limitation: the
scorer's abstain/ambiguous hints are not applied to samples (an abstention phrase becomes a
string cluster of its own).

**Estimators of** ``P(c|x)`` (:func:`cluster_probabilities`), natural log:

* the text's estimator (``logprob``): ``P(c|x) = sum_{y in c} P(y|x)`` over the *distinct*
  sampled strings ``y`` of cluster ``c``, with ``P(y|x)`` the sample's own probability under
  the model (``sample_logprobs``, recorded by the sampler), normalised over the observed
  clusters (the samples cover only part of the answer space);
* the count estimator (``count``): ``n_c / k``, each sample weighing ``1/k``.

Semantic entropy ``H = -sum_c P(c|x) log P(c|x)`` under each; Miller-Madow
``H_MM = H_count + (m - 1)/(2k)`` (``m`` observed clusters) beside the count estimator.

**Confidence of the greedy answer.** The greedy answer (``generations.jsonl``) is clustered the
same way, into ``c*``; the confidence is ``P(c*|x)``, the probability of the greedy answer's
cluster (0 when no sample falls in it): two sources, each with its own curve,
``semantic_cluster_probability`` (the ``logprob`` estimator; invalid ``no_sample_logprobs`` for
files without log-probs) and ``semantic_cluster_share`` (the ``count`` estimator). The entropy
is reported as a description of the samples, not as a probability. Low entropy is not
correctness: a model can repeat the same wrong answer.

A samples file drawn from another model than the run's generations is exit 2.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fks.errors import FksInputError
from fks.generate.manifest import update_run_manifest
from fks.io import JsonlAppender, iter_jsonl, sha256_file
from fks.metrics.calibration.verbalized import spread_slice
from fks.runlock import locks_run_dir

__all__ = [
    "SAMPLES_NAME",
    "SE_SOURCES",
    "cluster_probabilities",
    "entropy_of",
    "SE_PER_QUERY_NAME",
    "SampleRecord",
    "SemanticEntropyData",
    "cluster_assignment_entropy",
    "cluster_samples",
    "load_semantic_entropy",
    "sample_answers",
    "sample_run",
    "semantic_entropy",
    "semantic_entropy_summary",
]

log = logging.getLogger(__name__)

SAMPLES_NAME = "samples.jsonl"
SE_PER_QUERY_NAME = "semantic_entropy_per_query.jsonl"
SE_SOURCES: dict[str, str] = {
    "semantic_cluster_probability": (
        "P(c*|x): probability of the greedy answer's semantic cluster, P(c|x) = sum over the "
        "distinct sampled answers y in c of P(y|x) (their own log-probabilities), normalised "
        "over the observed clusters (RUN/samples.jsonl, `fks calibrate sample`)"),
    "semantic_cluster_share": (
        "P(c*|x) by the count estimator: share of the k samples in the greedy answer's "
        "semantic cluster"),
}
SAMPLING_VERSION = "fks-sampling-v1"
DEFAULT_K = 5
DEFAULT_TEMPERATURE = 1.0


# ============================================================================ estimators
def cluster_assignment_entropy(cluster_ids: Sequence[str]) -> dict[str, Any]:
    r"""Discrete entropy of ``k`` cluster assignments: plug-in and Miller-Madow (nats).

    ``H = -sum_c (n_c/k) log(n_c/k)``; ``H_MM = H + (m - 1)/(2k)`` with ``m`` observed clusters.
    Invariant to relabelling and order of the assignments.

    Returns:
        ``{"k", "n_clusters", "plug_in", "miller_madow"}``.

    Raises:
        ValueError: no assignment.
    """
    k = len(cluster_ids)
    if k == 0:
        raise ValueError("at least one cluster assignment is needed")
    counts = sorted(Counter(cluster_ids).values())  # sorted: order-free summation
    h = -sum((n / k) * math.log(n / k) for n in counts)
    h = max(h, 0.0)  # -0.0 and rounding
    m = len(counts)
    return {"k": k, "n_clusters": m, "plug_in": h, "miller_madow": h + (m - 1) / (2 * k)}


def semantic_entropy(cluster_ids: Sequence[str]) -> float:
    r"""Semantic entropy ``H_sem = -sum_c P(c|x) log P(c|x)`` of ``k`` sampled answers (nats).

    ``P(c|x)`` is estimated by the share of samples in cluster ``c`` (each sample drawn from the
    model weighs ``1/k``), so this is the plug-in value of :func:`cluster_assignment_entropy`:
    0 when every sample is in one cluster, ``log k`` when all are distinct.
    """
    return float(cluster_assignment_entropy(cluster_ids)["plug_in"])


def cluster_probabilities(cluster_ids: Sequence[str], logprobs: Sequence[float] | None = None,
                          samples: Sequence[str] | None = None) -> dict[str, float]:
    r"""``P(c|x)`` per observed cluster (module docstring), summing to 1.

    Without ``logprobs``: the count estimator ``n_c / k``. With them (and the ``samples``
    strings, to count each distinct string once): ``P(c) = sum_{distinct y in c} exp(lp_y)``
    normalised over the clusters, computed with a log-sum-exp.

    >>> cluster_probabilities(["a", "a", "b"])
    {'a': 0.6666666666666666, 'b': 0.3333333333333333}
    >>> p = cluster_probabilities(["a", "a", "b"], [math.log(.5), math.log(.5), math.log(.25)],
    ...                           ["x", "x", "y"])
    >>> round(p["a"], 6), round(p["b"], 6)
    (0.666667, 0.333333)
    """
    k = len(cluster_ids)
    if k == 0:
        raise ValueError("at least one cluster assignment is needed")
    if logprobs is None:
        counts = Counter(cluster_ids)
        return {c: counts[c] / k for c in sorted(counts)}
    if len(logprobs) != k or samples is None or len(samples) != k:
        raise ValueError("logprobs and samples must be aligned with the cluster ids")
    seen: dict[str, tuple[str, float]] = {}
    for c, y, lp in zip(cluster_ids, samples, logprobs, strict=True):
        seen.setdefault(y, (c, float(lp)))
    by_cluster: dict[str, list[float]] = defaultdict(list)
    for c, lp in seen.values():
        by_cluster[c].append(lp)
    top = max(lp for c, lp in seen.values())
    mass = {c: sum(math.exp(lp - top) for lp in lps) for c, lps in by_cluster.items()}
    total = sum(mass.values())
    return {c: mass[c] / total for c in sorted(mass)}


def entropy_of(probs: dict[str, float]) -> float:
    """``-sum_c P(c) log P(c)`` (nats), order-free, >= 0."""
    h = -sum(p * math.log(p) for p in sorted(probs.values()) if p > 0)
    return max(h, 0.0)


# ============================================================================ sampling
def _seeded_generator(seed: int, device: Any) -> Any:
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def _sample_batch(model: Any, tokenizer: Any, prompts: Sequence[str], seeds: Sequence[int], *,
                  k: int, temperature: float, max_new_tokens: int, max_prompt_len: int,
                  eos_ids: Sequence[int]) -> tuple[list[list[str]], list[list[float]]]:
    """Sample ``k`` continuations of each prompt in one left-padded batch (KV cache).

    Returns ``(texts, logprobs)``, each ``[prompt][sample]``: ``logprobs`` is the sample's
    log-probability under the model itself, ``sum_t log softmax(raw logits_t)[token_t]`` over
    the tokens before EOS (temperature 1, whatever the sampling temperature; the same
    convention as a generation's ``answer_logprobs``).
    """
    import torch

    from fks.generate.prompts import encode_prompt

    device = next(model.parameters()).device
    encoded = [encode_prompt(tokenizer, p, max_prompt_len)[0] for p in prompts]
    rows = [ids for ids in encoded for _ in range(k)]  # prompt-major: rows i*k .. i*k+k-1
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, seq in enumerate(rows):
        ids[i, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        mask[i, width - len(seq):] = 1
    ids, mask = ids.to(device), mask.to(device)
    gens = [_seeded_generator(s, device) for s in seeds]
    eos = torch.tensor(list(eos_ids), device=device)
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    lp_sum = torch.zeros(len(rows), dtype=torch.float64, device=device)
    out = torch.full((len(rows), max_new_tokens), pad, dtype=torch.long, device=device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    cur, past = ids, None
    # transformers >= 5.x calls the KV cache `cache` (`past_key_values` before)
    cache_arg = ("cache" if "cache" in inspect.signature(model.forward).parameters
                 else "past_key_values")
    with torch.inference_mode():
        for step in range(max_new_tokens):
            res = model(input_ids=cur, attention_mask=mask, position_ids=pos,
                        **{cache_arg: past}, use_cache=True)
            past = getattr(res, cache_arg)
            logits = res.logits[:, -1, :].float()
            probs = torch.softmax(logits / temperature, dim=-1)
            tok = torch.cat([torch.multinomial(probs[i * k:(i + 1) * k], 1, generator=g)
                             for i, g in enumerate(gens)]).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, pad), tok)
            own = torch.log_softmax(logits, dim=-1).gather(-1, tok[:, None]).squeeze(-1)
            counted = ~done & ~torch.isin(tok, eos)
            lp_sum += torch.where(counted, own.double(), torch.zeros_like(lp_sum))
            out[:, step] = tok
            done |= torch.isin(tok, eos)
            if bool(done.all()):
                break
            cur = tok[:, None]
            pos = pos[:, -1:] + 1
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
    eos_set = set(int(e) for e in eos_ids)
    texts = []
    for row in out.cpu().tolist():
        stop = next((j for j, t in enumerate(row) if t in eos_set), len(row))
        texts.append(tokenizer.decode(row[:stop], skip_special_tokens=True))
    lps = [float(x) for x in lp_sum.cpu().tolist()]
    return ([texts[i * k:(i + 1) * k] for i in range(len(prompts))],
            [lps[i * k:(i + 1) * k] for i in range(len(prompts))])


def _check_protocol(k: int, temperature: float, batch_size: int) -> None:
    """Raise :class:`FksInputError` for ``k < 1``, a temperature not > 0, ``batch_size < 1``."""
    if k < 1 or isinstance(k, bool):
        raise FksInputError(f"must be >= 1; found {k!r}", field="k")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise FksInputError(f"must be a finite number > 0; found {temperature!r}",
                            field="temperature")
    if batch_size < 1:
        raise FksInputError(f"must be >= 1; found {batch_size!r}", field="batch_size")


def sample_answers(model: Any, tokenizer: Any, prompts: Sequence[str], *, k: int = DEFAULT_K,
                   temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int, seed: int,
                   offset: int = 0, batch_size: int = 8, max_prompt_len: int = 192,
                   eos_ids: Sequence[int] | None = None) -> list[list[str]]:
    """``k`` temperature samples per prompt (module docstring); ``result[i]`` has ``k`` texts.

    Args:
        model: a causal LM (e.g. ``HFBackend.model``), in eval mode.
        tokenizer: its tokenizer (``HFBackend.tokenizer``).
        prompts: exact prompt strings (:func:`fks.generate.prompts.build_prompt`).
        k: samples per prompt (>= 1).
        temperature: frozen sampling temperature (> 0); logits are divided by it.
        max_new_tokens: at most this many new tokens per sample.
        seed: base seed; prompt ``i`` uses ``seed + offset + i``.
        offset: position of ``prompts[0]`` in the full list (resumable runs).
        batch_size: prompts per forward batch (results do not depend on it).
        max_prompt_len: the protocol's prompt cap (``encode_prompt``).
        eos_ids: stop tokens (default: the tokenizer's EOS).
    """
    _check_protocol(k, temperature, batch_size)
    eos = list(eos_ids) if eos_ids else [tokenizer.eos_token_id]
    out: list[list[str]] = []
    for start in range(0, len(prompts), batch_size):
        part = prompts[start:start + batch_size]
        seeds = [seed + offset + start + i for i in range(len(part))]
        out += _sample_batch(model, tokenizer, part, seeds, k=k, temperature=temperature,
                             max_new_tokens=max_new_tokens, max_prompt_len=max_prompt_len,
                             eos_ids=eos)[0]
    return out


class SampleRecord(BaseModel):
    """One row of ``RUN/samples.jsonl``."""

    model_config = ConfigDict(extra="allow")

    model: str
    query_id: str
    fact_id: str
    relation: str
    condition_family: str
    language: str
    samples: list[str]
    #: each sample's log-probability under the model (None in files from before they were kept)
    sample_logprobs: list[float] | None = None
    temperature: float = Field(gt=0)
    k: int = Field(ge=1)
    seed: int
    max_new_tokens: int = Field(ge=1)
    prompt_version: str


def _sample_queries(bench: Any, run_dir: Path, limit: int | None) -> list[Any]:
    """List the queries to sample.

    Main-forward queries (each query's own boolean); the generated ones only when
    ``RUN/generations.jsonl`` exists. Order: whole facts in ``sha256(SAMPLING_VERSION + ":" +
    fact_id)`` order, a fact's queries in benchmark order; ``limit`` keeps the first ``limit``
    queries of that order, so a slice spreads over relations and facts instead of being the
    head of the file (and a fact is cut at most once, at the end).
    """
    qs = [q for q in bench.queries if q.use_for_main_forward]
    gen_path = run_dir / "generations.jsonl"
    if gen_path.is_file():
        done = {row.get("query_id") for _, row in iter_jsonl(gen_path)}
        qs = [q for q in qs if q.query_id in done]
    return spread_slice(qs, limit, salt=SAMPLING_VERSION)


def _existing(path: Path, protocol: dict[str, Any]) -> set[str]:
    """Query ids already sampled; the file's protocol must equal ``protocol``."""
    done: set[str] = set()
    if not path.is_file():
        return done
    for line, rec in iter_jsonl(path, SampleRecord):
        for name, want in protocol.items():
            if getattr(rec, name) != want:
                raise FksInputError(f"{path.name} was sampled with {name}={getattr(rec, name)!r}"
                                    f", not {want!r} (the protocol is frozen per file; use "
                                    "another run directory)", path=path, line=line, field=name)
        done.add(rec.query_id)
    return done


def _run_model_name(run_dir: Path) -> str | None:
    """Return the run's model name (its generations' ``model``, else the manifest's), or None."""
    gen_path = run_dir / "generations.jsonl"
    if gen_path.is_file():
        for _, row in iter_jsonl(gen_path):
            if isinstance(row, dict) and row.get("model"):
                return str(row["model"])
    from fks.generate.manifest import read_run_manifest

    return (read_run_manifest(run_dir).get("model") or {}).get("name")


@locks_run_dir("run_dir")
def sample_run(run_dir: str | Path, backend: Any, *, benchmark: Any, k: int = DEFAULT_K,
               temperature: float = DEFAULT_TEMPERATURE, seed: int, max_new_tokens: int,
               max_prompt_len: int, limit: int | None = None, batch_size: int = 8
               ) -> dict[str, Any]:
    """``fks calibrate sample``: append ``k`` samples per main-forward query to samples.jsonl.

    ``backend`` is an :class:`fks.generate.backends.hf.HFBackend` (its model, tokenizer and
    EOS ids are used; its greedy ``generate`` is not). Resumable: queries already in the file
    are skipped; a query's samples depend only on ``seed`` and its position in the list. The
    manifest gains ``stages.calibrate_sample`` (protocol, counts, sampling model, sha256).
    """
    from fks.generate.prompts import PROMPT_VERSION, build_prompt
    from fks.log import progress_bar

    run_dir = Path(run_dir)
    path = run_dir / SAMPLES_NAME
    protocol = {"k": k, "temperature": float(temperature), "seed": seed,
                "max_new_tokens": max_new_tokens}
    queries = _sample_queries(benchmark, run_dir, limit)
    done = _existing(path, protocol)
    todo = [(i, q) for i, q in enumerate(queries) if q.query_id not in done]
    model_name = _run_model_name(run_dir) or str(getattr(backend, "model_path", "model"))
    _check_protocol(k, temperature, batch_size)
    with JsonlAppender(path) as out, progress_bar() as bar:
        task = bar.add_task("sampling", total=len(todo))
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            texts, lps = _sample_batch(  # a query's seed is seed + its position in `queries`
                backend.model, backend.tokenizer, [build_prompt(q) for _, q in chunk],
                [seed + i for i, _ in chunk], k=k, temperature=temperature,
                max_new_tokens=max_new_tokens, max_prompt_len=max_prompt_len,
                eos_ids=backend.eos_ids)
            out.write_batch([{
                "model": model_name, "query_id": q.query_id, "fact_id": q.fact_id,
                "relation": q.relation, "condition_family": q.condition_family,
                "language": q.language, "samples": s, "sample_logprobs": lp, **protocol,
                "prompt_version": PROMPT_VERSION, "sampling_version": SAMPLING_VERSION,
            } for (_, q), s, lp in zip(chunk, texts, lps, strict=True)])
            bar.update(task, advance=len(chunk))
    info = {"file": str(path), "n_queries": len(queries), "n_sampled": len(todo),
            "n_skipped": len(queries) - len(todo), **protocol, "limit": limit,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}
    describe = getattr(backend, "describe", None)
    update_run_manifest(run_dir, stage="calibrate_sample", stage_info={
        **info, "prompt_version": PROMPT_VERSION, "sampling_version": SAMPLING_VERSION,
        "backend": describe() if callable(describe) else {"model_path": model_name},
        "sha256": sha256_file(path)})
    from fks.provenance import record_files

    record_files(run_dir, "calibrate_sample", {}, [path])
    return info


# ============================================================================ calibrate side
def cluster_samples(samples: Sequence[str], query: Any, fact: Any,
                    lexicons: dict[tuple[str, str], Any]) -> list[str]:
    """Cluster id of each sample: the alias judge's reference-blind step one (module doc)."""
    from fks.judge import AnswerItem, answer_span, assign_alias

    slot = query.target_slot
    asked = fact.subject if slot == "object" else fact.object
    mentions = tuple(dict.fromkeys([asked.canonical, *asked.aliases]))
    lexicon = lexicons[(fact.relation.relation_id, slot)]
    return [assign_alias(AnswerItem(
        query_id=query.query_id, condition_family=query.condition_family,
        language=query.language, raw_response=s, span=answer_span(s, None), hint=None),
        lexicon, mentions).cluster_id for s in samples]


@dataclass
class SemanticEntropyData:
    """Per-query semantic entropy read from ``RUN/samples.jsonl`` (see the module docstring)."""

    rows: dict[str, dict[str, Any]]
    protocol: dict[str, Any]
    path: Path

    def confidences(self, query_id: str) -> dict[str, tuple[float | None, str | None]]:
        """``{source: (P(c*|x), None) or (None, reason)}`` for one query (both sources)."""
        row = self.rows.get(query_id)
        if row is None:
            return {src: (None, "not_sampled") for src in SE_SOURCES}
        if row["greedy_cluster"] is None:
            return {src: (None, "no_greedy_answer") for src in SE_SOURCES}
        share = (row["p_count"].get(row["greedy_cluster"], 0.0), None)
        prob = ((None, "no_sample_logprobs") if row["p_logprob"] is None
                else (row["p_logprob"].get(row["greedy_cluster"], 0.0), None))
        return {"semantic_cluster_probability": prob, "semantic_cluster_share": share}


def load_semantic_entropy(run_dir: Path, bench: Any, model: str | None = None,
                          greedy: dict[str, str] | None = None,
                          model_aliases: Sequence[str] = (),
                          prompt_version: str | None = None,
                          prompt_source: str | Path | None = None,
                          ) -> SemanticEntropyData | None:
    """Read and cluster ``RUN/samples.jsonl``; None when the file does not exist.

    Args:
        run_dir: the run directory.
        bench: the benchmark (the lexicons to cluster against).
        model: the run's model; a row sampled from another model (neither ``model`` nor one
            of ``model_aliases``, e.g. the manifest's model path) is exit 2.
        greedy: ``{query_id: raw_response}`` of the greedy generations (the ``c*`` answers).
        model_aliases: other names of the run's model.
        prompt_version: the run's prompt version (issue 28): a row sampled with another
            prompt is exit 2 naming the samples file and ``prompt_source``.
        prompt_source: the file the run's version comes from (``RUN/evaluation_manifest.json``,
            or the generations), named in the message.

    Raises:
        FksInputError: no benchmark to cluster against, a query unknown to it or with another
            fact, a duplicate query, ``len(samples) != k`` (or of the log-probs), rows of mixed
            protocols, another model, or another prompt version.
    """
    from fks.judge import build_lexicons

    path = Path(run_dir) / SAMPLES_NAME
    if not path.is_file():
        return None
    if bench is None:
        raise FksInputError("clustering the samples needs the benchmark (pass --benchmark)",
                            path=path, field="benchmark")
    queries = {q.query_id: q for q in bench.queries}
    lexicons = build_lexicons(bench)
    greedy = greedy or {}
    known = {m for m in (model, *model_aliases) if m}
    rows: dict[str, dict[str, Any]] = {}
    protocol: dict[str, Any] | None = None
    for line, rec in iter_jsonl(path, SampleRecord):
        q = queries.get(rec.query_id)
        if q is None or q.fact_id != rec.fact_id:
            raise FksInputError(f"{rec.query_id} is not a query of fact {rec.fact_id} in the "
                                "benchmark", path=path, line=line, field="query_id")
        if known and rec.model not in known:
            raise FksInputError(f"sampled from {rec.model!r}, but the run's generations are "
                                f"from {model!r}: semantic entropy must come from the same "
                                "model", path=path, line=line, field="model")
        if prompt_version is not None and rec.prompt_version != prompt_version:
            raise FksInputError(
                f"sampled with prompt version {rec.prompt_version!r}, but the run's is "
                f"{prompt_version!r} ({prompt_source}): the samples must answer the same "
                "prompts as the greedy generations (resample with `fks calibrate sample`)",
                path=path, line=line, field="prompt_version")
        if rec.query_id in rows:
            raise FksInputError(f"{rec.query_id} is sampled twice", path=path, line=line,
                                field="query_id")
        if len(rec.samples) != rec.k:
            raise FksInputError(f"{len(rec.samples)} samples for k={rec.k}", path=path,
                                line=line, field="samples")
        lps = rec.sample_logprobs
        if lps is not None and (len(lps) != rec.k or not all(
                math.isfinite(v) and v <= 1e-4 for v in lps)):
            raise FksInputError(f"needs {rec.k} finite log-probabilities <= 0", path=path,
                                line=line, field="sample_logprobs")
        this = {"k": rec.k, "temperature": rec.temperature, "seed": rec.seed,
                "max_new_tokens": rec.max_new_tokens, "model": rec.model}
        if protocol is None:
            protocol = this
        elif this != protocol:
            bad = next(n for n in this if this[n] != protocol[n])
            raise FksInputError(f"mixed sampling protocols: {this[bad]!r} != {protocol[bad]!r}",
                                path=path, line=line, field=bad)
        fact = bench.facts_by_id[q.fact_id]
        clusters = cluster_samples(rec.samples, q, fact, lexicons)
        est = cluster_assignment_entropy(clusters)
        p_count = cluster_probabilities(clusters)
        p_lp = (None if lps is None else
                cluster_probabilities(clusters, [min(v, 0.0) for v in lps], rec.samples))
        raw = greedy.get(rec.query_id)
        star = cluster_samples([raw], q, fact, lexicons)[0] if raw else None
        rows[rec.query_id] = {
            "query_id": rec.query_id, "fact_id": rec.fact_id, "relation": rec.relation,
            "condition_family": rec.condition_family, "language": rec.language, "k": rec.k,
            "clusters": clusters, "n_clusters": est["n_clusters"],
            "p_count": p_count, "p_logprob": p_lp, "greedy_cluster": star,
            "se_plug_in": est["plug_in"], "se_miller_madow": est["miller_madow"],
            "se_logprob": None if p_lp is None else entropy_of(p_lp),
            "p_greedy_cluster_count": None if star is None else p_count.get(star, 0.0),
            "p_greedy_cluster_logprob": None if star is None or p_lp is None
            else p_lp.get(star, 0.0)}
    return SemanticEntropyData(rows=rows, protocol=protocol or {}, path=path)


def _mean(xs: Sequence[float]) -> float | None:
    return float(sum(xs) / len(xs)) if xs else None


def _bes_comparison(run_dir: Path, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Spearman between per-fact mean semantic entropy and BES (behavioral_per_fact.jsonl)."""
    from scipy.stats import spearmanr

    path = Path(run_dir) / "metrics" / "behavioral_per_fact.jsonl"
    out: dict[str, Any] = {"file": "metrics/behavioral_per_fact.jsonl", "method": (
        "scipy.stats.spearmanr(per-fact mean plug-in semantic entropy over its sampled queries, "
        "per-fact BES); a negative rho means facts unstable across conditions are also "
        "uncertain under sampling"), "rho": None, "p_value": None, "n_facts": 0}
    if not path.is_file():
        return {**out, "reason": "file not found (run `fks metrics RUN` first)"}
    by_fact: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_fact[r["fact_id"]].append(r["se_plug_in"])
    bes = {row["fact_id"]: row["bes"] for _, row in iter_jsonl(path)
           if row.get("fact_id") in by_fact and row.get("bes") is not None}
    facts = sorted(bes)
    out["n_facts"] = len(facts)
    x = [_mean(by_fact[f]) for f in facts]
    y = [float(bes[f]) for f in facts]
    if len(facts) < 3:
        return {**out, "reason": "fewer than 3 facts with both values"}
    if len(set(x)) < 2 or len(set(y)) < 2:
        return {**out, "reason": "one of the two is constant over the facts"}
    res = spearmanr(x, y)
    return {**out, "rho": float(res.statistic), "p_value": float(res.pvalue)}


def semantic_entropy_summary(data: SemanticEntropyData, run_dir: Path) -> dict[str, Any]:
    """Build the ``semantic_entropy`` block of ``calibration_summary.json`` (``computed``)."""
    rows = list(data.rows.values())
    by_family: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_family[r["condition_family"]].append(r)

    def stats(part: Sequence[dict[str, Any]]) -> dict[str, Any]:
        with_lp = [r["se_logprob"] for r in part if r["se_logprob"] is not None]
        return {"n_queries": len(part),
                "mean_plug_in": _mean([r["se_plug_in"] for r in part]),
                "mean_logprob": _mean(with_lp), "n_with_logprobs": len(with_lp),
                "mean_miller_madow": _mean([r["se_miller_madow"] for r in part]),
                "mean_n_clusters": _mean([r["n_clusters"] for r in part])}

    return {
        "status": "computed", "file": SAMPLES_NAME, "per_query_file": f"metrics/"
        f"{SE_PER_QUERY_NAME}", "protocol": {**data.protocol, "version": SAMPLING_VERSION},
        "clustering": "alias judge step one (fks.judge.assign_alias), reference-blind, on "
                      "answer_span(sample) against the relation slot's lexicon",
        "estimators": {"logprob": "P(c|x) = sum over distinct sampled y in c of P(y|x) (the "
                                  "samples' own log-probs), normalised over observed clusters; "
                                  "H = -sum_c P log P",
                       "plug_in": "count estimator P(c|x) = n_c/k; -sum_c (n_c/k) log(n_c/k), "
                                  "natural log",
                       "miller_madow": "plug_in + (m - 1)/(2k), m observed clusters"},
        "confidence_sources": SE_SOURCES,
        "greedy_cluster": "the greedy answer (generations.jsonl) clustered like the samples; "
                          "its P(c*|x) is the confidence (0 when no sample is in c*)",
        "overall": stats(rows),
        "by_family": {f: stats(by_family[f]) for f in sorted(by_family)},
        "bes_comparison": _bes_comparison(run_dir, rows),
    }
