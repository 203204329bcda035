"""What every pipeline stage reads: the run, the model, the benchmark, the configs, the options.

:class:`PipelineContext` loads the model lazily and at most once per dtype: generation and
extraction share one Hugging Face model (the generation dtype), J-Lens gets a float32 one (the
same object on CPU, where generation already runs in float32).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fks.configs import ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.errors import FksInputError
from fks.hidden.jlens import JLENS_PROMPTS
from fks.io import atomic_write_jsonl

__all__ = ["PipelineOptions", "PipelineContext", "SUBSET_DIR", "limit_facts", "check_model_name"]

log = logging.getLogger(__name__)

#: ``RUN/benchmark/``: the benchmark subset written for ``--limit``
SUBSET_DIR = "benchmark"
#: a run folder name stays well inside every file system's 255-byte name limit
MAX_MODEL_NAME = 100
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class PipelineOptions:
    """Knobs of ``fks run`` beyond model, benchmark and output (defaults: the CLI's).

    Attributes:
        backend: generation backend (``hf``, ``openai``, ``vllm``).
        device: torch device for the in-process model (default: cuda when available).
        dtype: the in-process model's dtype for generation and extraction: None (the
            protocol's on GPU, float32 on CPU), ``auto`` (also bfloat16 on a CPU that computes
            it natively; what ``fks run`` passes) or a dtype name. J-Lens always fits in
            float32 (see :func:`fks.hidden.jlens.fit_jlens`).
        revision: hub revision of the model.
        trust_remote_code: allow the model repository's own code.
        batch_size: prompts per generation batch and per extraction forward pass (64: on 2 CPU
            cores Gemma 3 270M generates 1.6x faster than at 16, issue 29; bf16 answers move
            with it, float32 ones do not).
        judge: judge spec (``alias``, ``hf:PATH``, ``openai:URL``).
        jlens_prompts: main queries the J-Lens average runs over.
        jlens_seed: their sampling seed.
        jlens_layers: ``window`` (the metric window, what ISS/KTS use), ``all`` or ``"3,5"``.
        transport: ``jlens`` (ISS/KTS on transported states) or ``raw``.
        kts_bootstrap: bootstrap KTS too (the slow part of the statistics).
        backend_options: extra keyword arguments for :func:`fks.generate.backends.make_backend`
            (``base_url``, ``api_key``, ... for ``openai``).
    """

    backend: str = "hf"
    device: str | None = None
    dtype: str | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    batch_size: int = 64
    judge: str = "alias"
    jlens_prompts: int = JLENS_PROMPTS
    jlens_seed: int = 20260101
    jlens_layers: str = "window"
    transport: str = "jlens"
    kts_bootstrap: bool = True
    backend_options: dict[str, Any] = field(default_factory=dict)


def check_model_name(name: str) -> str:
    """Return ``name`` when it is a safe folder name (``RUNS/<name>/``), else raise.

    Raises:
        FksInputError: empty, with a path separator, starting with a dot, or longer than
            :data:`MAX_MODEL_NAME` characters.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise FksInputError(f"expected letters, digits and . _ + - (a folder name, not starting "
                            f"with a dot); found {name!r}", field="model")
    if len(name.encode()) > MAX_MODEL_NAME:
        raise FksInputError(f"at most {MAX_MODEL_NAME} characters (it names the run folder); "
                            f"found {len(name)}: {name[:40]!r}...", field="model")
    return name


def limit_facts(bench: Benchmark, n: int, out: Path) -> Path:
    """Write a benchmark of at most ``n`` facts of ``bench`` (with all their queries) to ``out``.

    Facts are taken round-robin over the relations in file order (the first fact of each
    relation, then the second, ...), so a small limit still covers every relation; rows keep
    the benchmark's order. The same input and ``n`` write the same bytes.

    Raises:
        FksInputError: ``n < 1``.
    """
    if n < 1:
        raise FksInputError(f"must be >= 1; found {n}", field="limit")
    by_rel: dict[str, list[str]] = defaultdict(list)
    for f in bench.facts:
        by_rel[f.relation.relation_id].append(f.fact_id)
    keep: set[str] = set()
    depth = 0
    while len(keep) < min(n, len(bench.facts)):
        for fids in by_rel.values():
            if depth < len(fids) and len(keep) < n:
                keep.add(fids[depth])
        depth += 1
    facts = [f for f in bench.facts if f.fact_id in keep]
    queries = [q for q in bench.queries if q.fact_id in keep]
    out.mkdir(parents=True, exist_ok=True)
    names = {f"benchmark_facts_{len(facts)}.jsonl", f"evaluation_queries_{len(queries)}.jsonl"}
    for stale in [*out.glob("benchmark_facts_*.jsonl"), *out.glob("evaluation_queries_*.jsonl")]:
        if stale.name not in names:
            stale.unlink()
    atomic_write_jsonl(out / f"benchmark_facts_{len(facts)}.jsonl", facts)
    atomic_write_jsonl(out / f"evaluation_queries_{len(queries)}.jsonl", queries)
    return out


@dataclass
class PipelineContext:
    """One ``fks run``: where, which model, which benchmark, which configs and options."""

    run_dir: Path
    model: str
    model_path: str
    benchmark: Benchmark
    configs: ConfigSet
    options: PipelineOptions = field(default_factory=PipelineOptions)
    #: the benchmark ``--limit`` sliced (None: the run is the whole benchmark); its main
    #: queries are the reference pool of the ISS/KTS fits (fks.metrics.internal.reference)
    parent: Benchmark | None = None
    _hf: Any = field(default=None, repr=False)

    @classmethod
    def create(cls, *, runs_dir: str | Path, model: str, model_path: str,
               benchmark: str | Path | Benchmark, configs: ConfigSet,
               options: PipelineOptions | None = None, limit: int | None = None
               ) -> PipelineContext:
        """Check the inputs, create ``RUNS/<model>/`` and load (or subset) the benchmark.

        Raises:
            FksInputError: a bad model name, a bad limit, or an unreadable benchmark.
        """
        run_dir = Path(runs_dir) / check_model_name(model)
        bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
        run_dir.mkdir(parents=True, exist_ok=True)
        parent = None
        if limit is not None:
            full = bench
            bench = load_benchmark(limit_facts(bench, limit, run_dir / SUBSET_DIR))
            log.info("--limit %d: %d facts, %d queries in %s", limit, len(bench.facts),
                     len(bench.queries), bench.root)
            parent = full if len(bench.facts) < len(full.facts) else None
        return cls(run_dir, model, str(model_path), bench, configs, options or PipelineOptions(),
                   parent=parent)

    def generation_backend(self) -> Any:
        """Return the backend ``generate`` uses (the shared HF model for ``hf``)."""
        if self.options.backend == "hf":
            return self.hf_model()
        from fks.generate.backends import make_backend

        return make_backend(self.options.backend, self.model_path, configs=self.configs,
                            device=self.options.device,
                            trust_remote_code=self.options.trust_remote_code,
                            **self.options.backend_options)

    def hf_model(self, dtype: str | None = None) -> Any:
        """Return an in-process :class:`~fks.generate.backends.hf.HFBackend` (model + tokenizer).

        Args:
            dtype: ``None`` for the generation dtype (``options.dtype``, see
                :func:`~fks.generate.backends.hf.resolve_dtype`), or ``float32`` (J-Lens).
                The loaded model is reused when its dtype matches;
                otherwise it is replaced (one model in memory at a time).
        """
        from fks.generate.backends.hf import HFBackend, resolve_device, resolve_dtype

        device = resolve_device(self.options.device)
        gen = self.configs.models.generation
        want = resolve_dtype(device, gen.dtype, dtype or self.options.dtype)
        if self._hf is None or self._hf.dtype != want:
            self._hf = None  # free the old model before loading the next
            self._hf = HFBackend(self.model_path, generation=gen, device=device, dtype=want,
                                 revision=self.options.revision,
                                 trust_remote_code=self.options.trust_remote_code)
        return self._hf

    def close(self) -> None:
        """Drop the loaded model."""
        self._hf = None
