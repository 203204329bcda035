"""The embedded demo: a small hand-written source, its benchmark, and ``fks demo``.

The package ships ``fks/data/demo_source/``: about 215 facts over ten registry relations, written
by hand for fks in the mParaRel layout (``mpararel/data/mpararel_reviewed/{tuples,patterns}/
<lang>/P<id>.jsonl``, six languages, coverage ragged on purpose). Building it with the regular
builder gives a small benchmark with all eight condition families, fully offline, in seconds.
See ``fks/data/demo_source/README.md`` for what the source holds.

``run_demo`` is the body of ``fks demo``; it composes library calls only, so later stages
(generation, scoring, metrics) can be appended one call each.
"""

from __future__ import annotations

import logging
from importlib.resources import files
from pathlib import Path

from fks.configs import ConfigSet
from fks.data.build import BuildResult, build_benchmark
from fks.data.stats import render_statistics
from fks.errors import FksInputError

__all__ = ["DEMO_SEED", "demo_source_dir", "build_demo_benchmark", "run_demo"]

log = logging.getLogger(__name__)

#: Seed of the demo build (the decoding protocol's seed; same seed, same bytes).
DEMO_SEED = 20260101


def demo_source_dir() -> Path:
    """Return the packaged demo source folder (the root the builder reads).

    Raises:
        RuntimeError: fks is installed in a form whose data files are not plain files
            (a zip import); the builder needs a folder on disk.
    """
    folder = files("fks.data") / "demo_source"
    if not isinstance(folder, Path) or not folder.is_dir():
        raise RuntimeError(
            f"the packaged demo source is not a folder on disk ({folder!r}); "
            "install fks as files (pip install, not a zip import)"
        )
    return folder


def _build_checked(out: Path, configs: ConfigSet) -> BuildResult:
    """Build the demo benchmark into ``out`` and insist that it passes validation."""
    result = build_benchmark(demo_source_dir(), out, configs=configs, max_facts=None,
                             seed=DEMO_SEED)
    if not result.report["passed"]:
        first = result.report["hard_errors"][0]
        raise FksInputError(
            f"the demo benchmark fails validation gate {first['gate']}: {first['message']} "
            f"({len(result.report['hard_errors'])} hard errors; configs in force may not fit "
            "the demo source)",
            path=first.get("path"), line=first.get("line"), field=first.get("field"),
        )
    return result


def build_demo_benchmark(out: Path, *, configs: ConfigSet) -> Path:
    """Build the demo benchmark (every candidate fact, seed ``DEMO_SEED``) into ``out``.

    Args:
        out: the benchmark directory to write (created; stale benchmark files replaced).
        configs: the configs in force (relation registry, condition registry, switches).

    Returns:
        ``out``, holding ``benchmark_facts_<N>.jsonl``, ``evaluation_queries_<M>.jsonl``,
        ``dataset_statistics.json``, ``benchmark_manifest.json`` and ``validation_report.json``.

    Raises:
        FksInputError: the built benchmark fails a validation gate (for instance with
            ``--config`` overrides that switch relations off).
    """
    return _build_checked(Path(out), configs).out


def run_demo(out: Path, *, configs: ConfigSet) -> None:
    """Run the offline demo: build and validate the demo benchmark, print its statistics.

    Writes ``out/benchmark/`` (see :func:`build_demo_benchmark`).
    """
    out = Path(out)
    result = _build_checked(out / "benchmark", configs)
    render_statistics(result.statistics)
    log.info("demo benchmark (validation passed): %s", result.out)
    log.info("  facts:      %s", result.facts_path)
    log.info("  queries:    %s", result.queries_path)
    log.info("  statistics: %s", result.out / "dataset_statistics.json")
    log.info("  validation: %s", result.out / "validation_report.json")
    log.info("  source:     %s", demo_source_dir())
