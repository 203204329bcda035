r"""fks inside lm-evaluation-harness: ``fks export lm-eval`` and ``fks import lm-eval``.

Export writes plain files (lm-eval is not needed to write them)::

    OUT/fks_stability.yaml   the task: generate_until, zero-shot, fks's greedy settings
    OUT/utils.py             loads the queries, returns each prompt verbatim, a trivial metric
    OUT/fks_queries.jsonl    one row per query: query_id, ..., prompt, prompt_version

Run it (the ``hf`` model; ``accelerate`` must be installed beside lm-eval)::

    lm_eval --model hf --model_args pretrained=MODEL,max_length=216 \
        --include_path OUT --tasks fks_stability --batch_size 1 \
        --output_path LM_OUT --log_samples

and import ``LM_OUT/<model>/samples_fks_stability_<time>.jsonl``.

How the protocol maps onto lm-eval (``generation:`` of ``configs/models.yaml``, the hf backend):

* prompt: ``doc_to_text`` returns :func:`fks.generate.prompts.build_prompt`'s string; no
  description, no few-shot, no ``--apply_chat_template``/``--system_instruction`` (the import
  compares the logged context with fks's prompt, so any of these is refused);
* tokens: lm-eval's ``hf`` model tokenises with the tokenizer's own special tokens, as fks does;
* greedy: ``do_sample: false``, ``temperature: 0.0``, ``max_gen_toks: 24``;
* stop: ``until: []``: lm-eval then stops only at the EOS token, like fks (its default
  ``"\n\n"`` stop string would cut answers fks keeps);
* prompt cut: ``max_length=216`` (192 + 24) makes lm-eval keep the last 192 prompt tokens. fks
  keeps a leading BOS and the last 191 tokens instead, so a prompt longer than 192 tokens can
  still differ from fks's (fks records ``prompt_truncated`` for those);
* the metric ``answered`` is only the share of non-empty answers; the fks figures come from
  ``fks run`` after the import.

Import reads the ``--log_samples`` JSONL: one line per query with ``doc``, ``arguments`` (the
context sent and the generation kwargs) and ``resps`` (the raw answer, before lm-eval filters).
Each line is checked (exit 2 naming line and field): the doc's prompt version, the context
byte-for-byte against fks's prompt, the greedy kwargs; then the query ids against the benchmark
(:func:`fks.interop._common.match_queries`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from fks.configs import ConfigSet
from fks.data.load import Benchmark
from fks.errors import FksInputError
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.interop._common import (
    TASK_NAME,
    ImportedAnswer,
    check_prompt,
    check_prompt_version,
    export_rows,
    match_queries,
    write_imported_run,
)
from fks.io import atomic_write_jsonl, atomic_write_text, iter_jsonl, read_json

__all__ = ["QUERIES_NAME", "export_lmeval", "read_lmeval_samples", "import_lmeval"]

QUERIES_NAME = "fks_queries.jsonl"

_UTILS = '''\
"""Helpers of the fks_stability task (written by `fks export lm-eval`; do not edit)."""

import json
from pathlib import Path

import datasets

HERE = Path(__file__).resolve().parent


def load_fks_queries(**kwargs):
    """The exported queries, one doc per query, in benchmark order (the 'test' split)."""
    with open(HERE / "{queries}", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return {{"test": datasets.Dataset.from_list(rows)}}


def doc_to_text(doc):
    """fks's exact prompt, verbatim."""
    return doc["prompt"]


def doc_to_target(doc):
    """No target: fks scores the answers after `fks import lm-eval`."""
    return ""


def process_results(doc, results):
    """`answered`: 1 for a non-empty answer (fks computes the real figures)."""
    return {{"answered": float(bool(results[0].strip()))}}
'''


def _task_yaml(bench: Benchmark, configs: ConfigSet) -> str:
    gen = configs.models.generation
    return textwrap.dedent(f"""\
        # fks_stability: written by `fks export lm-eval` (prompt version {PROMPT_VERSION},
        # benchmark checksum {bench.checksum()}, {len(bench.queries)} queries). Do not edit:
        # `fks import lm-eval` refuses samples whose prompts or greedy settings differ.
        task: {TASK_NAME}
        custom_dataset: !function utils.load_fks_queries
        test_split: test
        output_type: generate_until
        num_fewshot: 0
        doc_to_text: !function utils.doc_to_text
        doc_to_target: !function utils.doc_to_target
        generation_kwargs:
          until: []
          max_gen_toks: {gen.max_new_tokens}
          do_sample: false
          temperature: 0.0
        process_results: !function utils.process_results
        metric_list:
          - metric: answered
            aggregation: mean
            higher_is_better: true
        metadata:
          version: 1.0
          fks_prompt_version: {PROMPT_VERSION}
          fks_benchmark_checksum: {bench.checksum()}
        """)


def export_lmeval(bench: Benchmark, out: str | Path, *, configs: ConfigSet) -> Path:
    """Write the lm-eval task folder ``out`` (see the module docstring); returns ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(out / QUERIES_NAME, export_rows(bench))
    atomic_write_text(out / "utils.py", _UTILS.format(queries=QUERIES_NAME))
    atomic_write_text(out / f"{TASK_NAME}.yaml", _task_yaml(bench, configs))
    return out


def _get(row: dict[str, Any], dotted: str) -> Any:
    value: Any = row
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _check_kwargs(kwargs: Any, configs: ConfigSet, *, path: Path, line: int) -> None:
    """Refuse generation kwargs that are not fks's greedy protocol."""
    field = "arguments.gen_args_0.arg_1"
    if not isinstance(kwargs, dict):
        raise FksInputError(f"expected the generation kwargs object, found {kwargs!r}",
                            path=path, line=line, field=field)
    want = {"max_gen_toks": configs.models.generation.max_new_tokens, "do_sample": False}
    extra = sorted(set(kwargs) - {*want, "until", "temperature"})
    if extra:  # e.g. `lm_eval --gen_kwargs repetition_penalty=1.3`
        raise FksInputError(f"expected only fks's greedy settings, found {extra[0]}="
                            f"{kwargs[extra[0]]!r}", path=path, line=line,
                            field=f"{field}.{extra[0]}")
    if kwargs.get("temperature", 0.0) != 0.0:
        raise FksInputError(f"expected 0.0 (greedy), found {kwargs['temperature']!r}",
                            path=path, line=line, field=f"{field}.temperature")
    for key, value in want.items():
        if kwargs.get(key) != value:
            raise FksInputError(f"expected {value!r} (fks's greedy protocol), found "
                                f"{kwargs.get(key)!r}", path=path, line=line,
                                field=f"{field}.{key}")
    if kwargs.get("until") not in ([], None):
        raise FksInputError(f"expected no stop strings (fks stops at EOS only), found "
                            f"{kwargs.get('until')!r}", path=path, line=line,
                            field=f"{field}.until")


def read_lmeval_samples(path: str | Path, bench: Benchmark, *, configs: ConfigSet
                        ) -> list[ImportedAnswer]:
    """Read and check an lm-eval ``--log_samples`` file; answers in benchmark order.

    Raises:
        FksInputError: a line that is not an fks_stability sample, a prompt version or prompt
            text that is not fks's, non-greedy kwargs, or query ids that do not match the
            benchmark (unknown, twice, missing).
    """
    path = Path(path)
    queries = {q.query_id: q for q in bench.queries}
    answers: list[ImportedAnswer] = []
    for line, row in iter_jsonl(path):
        doc = row.get("doc") if isinstance(row, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("query_id"), str):
            raise FksInputError("expected an lm-eval sample of the fks_stability task (a doc "
                                "with a query_id)", path=path, line=line, field="doc.query_id")
        qid = doc["query_id"]
        check_prompt_version(doc.get("prompt_version"), path=path, line=line,
                             field="doc.prompt_version")
        if qid in queries:
            check_prompt(build_prompt(queries[qid]), _get(row, "arguments.gen_args_0.arg_0"),
                         path=path, line=line, field="arguments.gen_args_0.arg_0",
                         query_id=qid)
        _check_kwargs(_get(row, "arguments.gen_args_0.arg_1"), configs, path=path, line=line)
        resps = row.get("resps")
        if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list)
                and len(resps[0]) == 1 and isinstance(resps[0][0], str)):
            raise FksInputError(f"expected one generated string [[text]], found {resps!r}",
                                path=path, line=line, field="resps")
        answers.append(ImportedAnswer(qid, resps[0][0], line))
    return match_queries(answers, bench, path)


def _tool_info(samples: Path) -> dict[str, Any]:
    """lm-eval's version and model args from the ``results_*.json`` beside the samples.

    The results file is optional (none: ``{}``), but one that is there is read like every
    input: not JSON, not an object, or a ``config`` that is not an object is exit 2 naming
    it, since what it says is recorded as the run's provenance.
    """
    stamp = samples.stem.rsplit("_", 1)[-1]
    for cand in sorted(samples.parent.glob(f"results_{stamp}*.json")):
        data = read_json(cand)
        if not isinstance(data, dict):
            raise FksInputError(f"expected an lm-eval results object, found "
                                f"{type(data).__name__}", path=cand)
        cfg = data.get("config") or {}
        if not isinstance(cfg, dict):
            raise FksInputError(f"expected an object (lm-eval's run config), found "
                                f"{type(cfg).__name__} {str(cfg)[:60]!r}", path=cand,
                                field="config")
        return {"tool_version": data.get("lm_eval_version"), "model": cfg.get("model"),
                "model_args": cfg.get("model_args"), "results_file": str(cand.resolve())}
    return {}


def import_lmeval(samples: str | Path, bench: Benchmark, out: str | Path, *,
                  configs: ConfigSet) -> Path:
    """Check ``samples`` and write ``out/generations.jsonl`` (+ manifest); returns its path."""
    samples = Path(samples)
    answers = read_lmeval_samples(samples, bench, configs=configs)
    info = _tool_info(samples)
    args = info.get("model_args")
    model_path = None
    if isinstance(args, str):
        parts = dict(p.split("=", 1) for p in args.split(",") if "=" in p)
        model_path = parts.get("pretrained")
    elif isinstance(args, dict):
        model_path = None if args.get("pretrained") is None else str(args["pretrained"])
        if args.get("dtype") is not None:
            info["dtype"] = str(args["dtype"])  # recorded as generation_config.dtype_used
    return write_imported_run(out, bench, answers, configs=configs, log_path=samples,
                              tool="lm-eval", tool_info=info, model_path=model_path)
