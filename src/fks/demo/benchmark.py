"""The embedded demo benchmark: a small hand-written source and its build.

The package ships ``fks/data/demo_source/``: about 215 facts over ten registry relations, written
by hand for fks in the mParaRel layout (``mpararel/data/mpararel_reviewed/{tuples,patterns}/
<lang>/P<id>.jsonl``, six languages, coverage ragged on purpose). Building it with the regular
builder gives a small benchmark with all eight condition families, fully offline, in seconds.
See ``fks/data/demo_source/README.md`` for what the source holds.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fks.configs import ConfigSet
from fks.data.build import BuildResult, build_benchmark
from fks.errors import FksInputError

__all__ = ["DEMO_SEED", "demo_source_dir", "build_demo", "build_demo_benchmark"]

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


def build_demo(out: Path, configs: ConfigSet) -> BuildResult:
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
    return build_demo(Path(out), configs).out
