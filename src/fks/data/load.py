"""Load a benchmark: a local directory, or the published one through Hugging Face ``datasets``.

A *benchmark directory* holds exactly one ``benchmark_facts_<N>.jsonl`` and one
``evaluation_queries_<M>.jsonl`` (``N``/``M`` are the row counts, checked by validation), and
optionally ``benchmark_manifest.json`` (written by ``fks data build``) with expected counts.

The published benchmark (``hf`` or ``hf:REPO_OR_LOCAL_PATH``, default repo
``LucasLoading/stable``, configs ``facts`` and ``queries``) is materialised into the same
directory layout under a cache folder, so both sources pass exactly the same validation.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fks.data.schema import Fact, Query
from fks.errors import FksInputError
from fks.io import atomic_write_jsonl, iter_jsonl, read_json, sha256_file

__all__ = [
    "Benchmark",
    "BenchmarkFiles",
    "find_benchmark_files",
    "load_benchmark",
    "iter_queries",
    "iter_facts",
    "HF_REPO",
    "resolve_benchmark",
]

log = logging.getLogger(__name__)

HF_REPO = "LucasLoading/stable"
_FACTS_RE = re.compile(r"^benchmark_facts_(\d+)\.jsonl$")
_QUERIES_RE = re.compile(r"^evaluation_queries_(\d+)\.jsonl$")


@dataclass(frozen=True)
class BenchmarkFiles:
    """Paths of one benchmark directory."""

    root: Path
    facts: Path
    queries: Path
    n_facts_in_name: int
    n_queries_in_name: int
    manifest: Path | None

    def checksum(self) -> str:
        """sha256 over the two data files' sha256 (identifies the benchmark in run manifests)."""
        h = hashlib.sha256()
        for p in (self.facts, self.queries):
            h.update(p.name.encode())
            h.update(sha256_file(p).encode())
        return h.hexdigest()


@dataclass
class Benchmark:
    """A loaded benchmark: validated facts and queries plus where they came from."""

    files: BenchmarkFiles
    facts: list[Fact]
    queries: list[Query]
    facts_by_id: dict[str, Fact] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.facts_by_id = {f.fact_id: f for f in self.facts}

    @property
    def root(self) -> Path:
        """The benchmark directory."""
        return self.files.root

    def checksum(self) -> str:
        """See :meth:`BenchmarkFiles.checksum`."""
        return self.files.checksum()


def find_benchmark_files(root: str | Path) -> BenchmarkFiles:
    """Locate the facts and queries files of a benchmark directory.

    Raises:
        FksInputError: the directory is missing, or it holds zero or several files of a kind.
    """
    root = Path(root)
    if not root.is_dir():
        raise FksInputError("benchmark directory not found", path=root)
    facts = sorted(p for p in root.iterdir() if _FACTS_RE.match(p.name))
    queries = sorted(p for p in root.iterdir() if _QUERIES_RE.match(p.name))
    kinds = (("benchmark_facts_<N>.jsonl", facts), ("evaluation_queries_<M>.jsonl", queries))
    for kind, hits in kinds:
        if len(hits) != 1:
            found = ", ".join(p.name for p in hits) or "none"
            raise FksInputError(f"expected exactly one {kind}; found {found}", path=root)
    manifest = root / "benchmark_manifest.json"
    m_facts = _FACTS_RE.match(facts[0].name)
    m_queries = _QUERIES_RE.match(queries[0].name)
    assert m_facts is not None and m_queries is not None
    return BenchmarkFiles(
        root=root,
        facts=facts[0],
        queries=queries[0],
        n_facts_in_name=int(m_facts.group(1)),
        n_queries_in_name=int(m_queries.group(1)),
        manifest=manifest if manifest.is_file() else None,
    )


def iter_facts(files: BenchmarkFiles) -> Iterator[tuple[int, Fact]]:
    """Stream validated facts with their line numbers."""
    yield from iter_jsonl(files.facts, Fact)  # type: ignore[misc]


def iter_queries(files: BenchmarkFiles) -> Iterator[tuple[int, Query]]:
    """Stream validated queries with their line numbers."""
    yield from iter_jsonl(files.queries, Query)  # type: ignore[misc]


def _hf_cache_dir() -> Path:
    base = os.environ.get("FKS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "fks"
    )
    return Path(base) / "benchmarks"


def _materialise_hf(spec: str) -> Path:
    """Fetch the published benchmark with ``datasets`` and write it as a benchmark directory."""
    repo = spec.split(":", 1)[1] if ":" in spec else HF_REPO
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a core dependency
        raise FksInputError(f"the 'datasets' package is needed to load {repo!r}: {exc}") from None
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", repo.strip("/"))
    out = _hf_cache_dir() / safe
    # A local folder is re-read every time: datasets' cache can serve a stale copy of a local
    # folder whose files changed (seen with datasets 5.2), and re-reading one is cheap.
    fresh = {"download_mode": "force_redownload"} if Path(repo).is_dir() else {}
    try:
        tables = {
            cfg: datasets.load_dataset(repo, cfg, split="train", **fresh)
            for cfg in ("facts", "queries")
        }
    except Exception as exc:  # datasets raises many types for network/offline failures
        offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")
        hint = (
            "the Hugging Face hub cannot be reached"
            + (" (HF_HUB_OFFLINE is set)" if offline else "")
            + f"; download {repo!r} on a connected machine and pass its local folder, "
            "or pass a benchmark directory built with `fks data build`"
        )
        raise FksInputError(f"{hint} ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})",
                            path=repo) from None
    n_f, n_q = len(tables["facts"]), len(tables["queries"])
    facts_path = out / f"benchmark_facts_{n_f}.jsonl"
    queries_path = out / f"evaluation_queries_{n_q}.jsonl"
    # Always rewritten (atomically): the cache folder is keyed by repo name only, so a source
    # that changed without changing its row counts must not be served from a stale copy.
    atomic_write_jsonl(facts_path, (dict(r) for r in tables["facts"]))
    atomic_write_jsonl(queries_path, (dict(r) for r in tables["queries"]))
    for stale in out.glob("*.jsonl"):
        if stale not in (facts_path, queries_path):
            stale.unlink()
    log.info("materialised %s into %s", repo, out)
    return out


def resolve_benchmark(source: str | Path) -> Path:
    """Turn ``DIR``, ``hf`` or ``hf:REPO_OR_PATH`` into a local benchmark directory."""
    text = str(source)
    if text == "hf" or text.startswith("hf:"):
        return _materialise_hf(text)
    return Path(text)


def load_benchmark(source: str | Path) -> Benchmark:
    """Load and schema-validate a benchmark (directory or ``hf[:repo]``).

    This checks every row against :class:`Fact`/:class:`Query`. The cross-row gates
    (unique ids, one anchor per fact, counts, ...) are :func:`fks.data.validate.validate_benchmark`.
    """
    files = find_benchmark_files(resolve_benchmark(source))
    facts = [f for _, f in iter_facts(files)]
    queries = [q for _, q in iter_queries(files)]
    return Benchmark(files=files, facts=facts, queries=queries)


def read_manifest(files: BenchmarkFiles) -> dict | None:
    """Read the builder's ``benchmark_manifest.json``, if the directory has one."""
    return read_json(files.manifest) if files.manifest else None
