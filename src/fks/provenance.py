"""One input chain per run: every stage checks that the files it reads are those the run made.

Each stage, standalone (``fks score``, ``fks judge``, ...) or inside ``fks run``, ends by
recording in ``RUN/evaluation_manifest.json``::

    stages.<stage>.files = {"inputs":  {"generations.jsonl": "<sha256>", ...},
                            "outputs": {"scored.jsonl": "<sha256>", ...}}

(paths relative to RUN). Before it reads an upstream file, a stage calls :func:`check_inputs`,
which walks the chain back from that file:

* the file's producer (:data:`STAGE_OUTPUTS`) recorded it with this sha256 -- otherwise the
  file was edited, truncated or copied in from elsewhere since (**changed**);
* every input the producer recorded still has the sha256 it had then -- otherwise the file was
  made from an older or another upstream file (**stale**), e.g. a ``judged.jsonl`` from an
  earlier ``scored.jsonl``;
* and so on up to the stages that read no run file (generate, import, extract, jlens).

Either is :class:`~fks.errors.FksInputError` (exit 2) naming both files and the stage to rerun.
A file whose producer recorded no ``files`` (a run made before this check, or a folder put
together by hand) cannot be verified: it is read with a debug log line, as before.

:func:`check_benchmark` is the other half of the chain: a stage that reads the benchmark refuses
one whose checksum differs from the one the run was generated on. :func:`check_weights` is the
third: the stages that load the model refuse weights other than those that made the
generations (or that the first hidden-state stage bound an imported run to).

sha256 of a file is computed once per process while its size and mtime stay the same.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME, read_run_manifest, update_run_manifest
from fks.io import sha256_file

__all__ = ["STAGE_OUTPUTS", "producer_of", "file_sha256", "check_inputs", "record_files",
           "expand_outputs", "ProtocolCheck", "protocol_of", "bound_weights", "run_benchmark",
           "verify_run", "check_benchmark", "check_weights", "bind_weights"]

log = logging.getLogger(__name__)

#: the files each stage writes (glob patterns relative to RUN; ``*`` does not cross ``/``).
#: One source for the chain check and for ``fks run``'s freshness (fks.pipeline).
STAGE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "generate": ("generations.jsonl",),
    "score": ("scored.jsonl", "known_labels.json"),
    "judge": ("judged.jsonl",),
    "metrics_behavior": ("metrics/behavioral_per_query.jsonl",
                         "metrics/behavioral_per_fact.jsonl",
                         "metrics/behavioral_model_summary.json"),
    "extract": ("hidden/meta.json", "hidden/index.jsonl", "hidden/layer_*.npy",
                "hidden/duplicate_pass.npz",
                "reference/hidden/meta.json", "reference/hidden/index.jsonl",
                "reference/hidden/layer_*.npy"),
    "jlens": ("jlens/manifest.json", "jlens/layer_*.npy"),
    "metrics_internal": ("metrics/iss_per_fact_layer.jsonl", "metrics/iss_per_fact.jsonl",
                         "metrics/iss_model_summary.json", "metrics/kts_per_pair_layer.jsonl",
                         "metrics/kts_model_summary.json", "metrics/sanity_checks.json",
                         "metrics/negatives.json", "metrics/hidden_family_centroids/*"),
    "calibrate_sample": ("samples.jsonl",),
    "calibrate_elicit": ("verbalized.jsonl",),
    "calibrate": ("metrics/calibration_summary.json", "metrics/calibration_per_query.jsonl",
                  "metrics/semantic_entropy_per_query.jsonl"),
    "bootstrap": ("metrics/bootstrap_intervals.json", "metrics/bootstrap_replicates.npz"),
    "report": ("report.html", "explorer.html", "results.json", "metrics/tables/*"),
}

_SHA_CACHE: dict[tuple[str, int, int, int, int], str] = {}


def producer_of(rel: str) -> str | None:
    """Return the stage whose outputs include ``rel`` (relative to RUN), or None."""
    for stage, patterns in STAGE_OUTPUTS.items():
        for pat in patterns:
            if fnmatch.fnmatchcase(rel, pat) and rel.count("/") == pat.count("/"):
                return stage
    return None


def file_sha256(path: Path) -> str:
    """Return the sha256 of ``path``, cached while its inode, size, mtime and ctime stay.

    Every stage writes by atomic rename (a new inode), so a rewritten output is hashed anew;
    the cache only spares hashing one unchanged file several times in a process (a stage's
    own record, the pipeline's record, the next stage's check).
    """
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    sha = _SHA_CACHE.get(key)
    if sha is None:
        sha = _SHA_CACHE[key] = sha256_file(path)
    return sha


def _rel(run_dir: Path, path: str | Path) -> str:
    """``path`` relative to RUN.

    A relative ``path`` is taken relative to RUN when that file exists (``"scored.jsonl"``),
    else relative to the working directory (``run_dir / "scored.jsonl"`` with a relative
    ``run_dir``).
    """
    p = Path(path)
    if not p.is_absolute():
        p = run_dir / p if (run_dir / p).exists() or not p.exists() else p.absolute()
    try:
        return p.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _files_record(manifest: Mapping[str, Any], stage: str) -> dict[str, dict[str, str]] | None:
    info = (manifest.get("stages") or {}).get(stage)
    files = info.get("files") if isinstance(info, dict) else None
    if not isinstance(files, dict):
        return None
    ins, outs = files.get("inputs"), files.get("outputs")
    if not isinstance(ins, dict) or not isinstance(outs, dict):
        return None
    return {"inputs": dict(ins), "outputs": dict(outs)}


def _rerun_hint(stage: str) -> str:
    command = {"metrics_behavior": "fks metrics RUN --part behavior",
               "metrics_internal": "fks metrics RUN --part internal",
               "calibrate_sample": "fks calibrate sample", "calibrate_elicit":
               "fks calibrate elicit", "bootstrap": "fks report", "report": "fks report"}
    return command.get(stage, f"fks {stage}")


def _verify_file(run_dir: Path, manifest: Mapping[str, Any], rel: str, *, reader: str,
                 seen: set[str]) -> str:
    """Check one file and, recursively, the chain it was made from; return its sha256."""
    path = run_dir / rel
    if not path.is_file():
        raise FksInputError(f"file not found (the {reader} stage reads it; run "
                            f"`{_rerun_hint(producer_of(rel) or reader)}` first)", path=path)
    sha = file_sha256(path)
    if rel in seen:
        return sha
    seen.add(rel)
    producer = producer_of(rel)
    record = _files_record(manifest, producer) if producer else None
    if record is None:
        log.debug("%s: no recorded provenance (stages.%s.files); read unverified", rel, producer)
        return sha
    manifest_path = run_dir / MANIFEST_NAME
    recorded = record["outputs"].get(rel)
    if recorded is None:
        raise FksInputError(
            f"{rel} is not among the files the last `{producer}` of this run wrote (stages."
            f"{producer}.files.outputs in {manifest_path}); it comes from elsewhere: rerun "
            f"`{_rerun_hint(producer)}`", path=path, field=f"stages.{producer}.files")
    if recorded != sha:
        raise FksInputError(
            f"{rel} changed after `{producer}` wrote it (sha256 {sha[:12]}... now, "
            f"{recorded[:12]}... recorded in {manifest_path}); it was edited, truncated or "
            f"copied from another run: rerun `{_rerun_hint(producer)}` (and the stages after "
            "it)", path=path, field=f"stages.{producer}.files.outputs")
    for up_rel, up_sha in record["inputs"].items():
        up_path = run_dir / up_rel
        if not up_path.is_file():
            raise FksInputError(f"{rel} was made from {up_rel}, which is gone; rerun "
                                f"`{_rerun_hint(producer_of(up_rel) or producer)}`",
                                path=up_path, field=f"stages.{producer}.files.inputs")
        if file_sha256(up_path) != up_sha:
            raise FksInputError(
                f"{rel} is stale: `{producer}` made it from another {up_rel} (sha256 "
                f"{up_sha[:12]}... recorded, {file_sha256(up_path)[:12]}... now); rerun "
                f"`{_rerun_hint(producer)}`", path=path, field=f"stages.{producer}.files.inputs")
        _verify_file(run_dir, manifest, up_rel, reader=producer, seen=seen)
    return sha


def check_inputs(run_dir: str | Path, stage: str, inputs: Iterable[str | Path],
                 *, optional: Iterable[str | Path] = ()) -> dict[str, str]:
    """Verify the files ``stage`` reads (see the module docstring); return ``{rel: sha256}``.

    Args:
        run_dir: the run directory (a shard folder for a shard's own stages).
        stage: the reading stage (for messages).
        inputs: files it reads (paths relative to ``run_dir`` or absolute inside it); each
            must exist.
        optional: files it reads when they exist.

    Raises:
        FksInputError: a missing, changed or stale input (naming both files and the stage to
            rerun).
    """
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir)
    seen: set[str] = set()
    digests: dict[str, str] = {}
    wanted = [_rel(run_dir, p) for p in inputs]
    wanted += [r for r in (_rel(run_dir, p) for p in optional) if (run_dir / r).is_file()]
    for rel in wanted:
        digests[rel] = _verify_file(run_dir, manifest, rel, reader=stage, seen=seen)
    return digests


def expand_outputs(run_dir: str | Path, stage: str) -> list[str]:
    """Every existing file matching ``stage``'s :data:`STAGE_OUTPUTS`, relative to RUN, sorted."""
    run_dir = Path(run_dir)
    found: set[str] = set()
    for pattern in STAGE_OUTPUTS[stage]:
        found.update(p.relative_to(run_dir).as_posix() for p in run_dir.glob(pattern)
                     if p.is_file())
    return sorted(found)


def record_files(run_dir: str | Path, stage: str, inputs: Mapping[str, str],
                 outputs: Iterable[str | Path] | None = None) -> dict[str, dict[str, str]]:
    """Record ``stages.<stage>.files``: the inputs it read and the sha256 of its outputs.

    ``inputs`` is what :func:`check_inputs` returned; ``outputs`` defaults to every file
    matching the stage's :data:`STAGE_OUTPUTS`.
    """
    run_dir = Path(run_dir)
    rels = expand_outputs(run_dir, stage) if outputs is None else [
        _rel(run_dir, p) for p in outputs]
    files = {"inputs": dict(inputs), "outputs": {
        rel: file_sha256(run_dir / rel) for rel in rels if (run_dir / rel).is_file()}}
    update_run_manifest(run_dir, stage=stage, stage_info={"files": files})
    return files


def verify_run(run_dir: str | Path, stages: Iterable[str] | None = None) -> dict[str, str]:
    """Verify every file the given stages wrote, and the chains they were made from.

    For readers of a whole run (report, compare, results); default: every stage that
    recorded its files.

    Returns:
        ``{rel: sha256}`` of the given stages' outputs (what a reader of them records).

    Raises:
        FksInputError: a changed, missing or stale file.
    """
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir)
    names = list(stages) if stages is not None else list(STAGE_OUTPUTS)
    seen: set[str] = set()
    digests: dict[str, str] = {}
    for stage in names:
        record = _files_record(manifest, stage)
        if record is None:
            continue
        for rel in record["outputs"]:
            digests[rel] = _verify_file(run_dir, manifest, rel, reader=stage, seen=seen)
    return digests


# ------------------------------------------------------------------ benchmark and weights
def check_benchmark(run_dir: str | Path, checksum: str, source: str | Path) -> None:
    """Refuse a benchmark whose checksum is not the one the run was generated on.

    A run without a recorded checksum (nothing generated yet) accepts any benchmark.

    Raises:
        FksInputError: the checksums differ (naming the benchmark and the manifest).
    """
    run_dir = Path(run_dir)
    recorded = (read_run_manifest(run_dir).get("benchmark") or {}).get("checksum")
    if recorded and recorded != checksum:
        raise FksInputError(
            f"benchmark {source} (checksum {checksum[:12]}...) is not the one this run was "
            f"generated on ({recorded[:12]}... in {run_dir / MANIFEST_NAME}); pass the run's "
            "benchmark", path=source, field="benchmark.checksum")


def bound_weights(manifest: Mapping[str, Any]) -> tuple[str | None, str]:
    """``(sha256, source)`` of the weights this run belongs to (None: not known yet)."""
    if manifest.get("weights_sha256"):
        return str(manifest["weights_sha256"]), "generate"
    bound = manifest.get("weights_bound")
    if isinstance(bound, dict) and bound.get("weights_sha256"):
        return str(bound["weights_sha256"]), str(bound.get("by") or "a hidden-state stage")
    return None, ""


def check_weights(run_dir: str | Path, loaded: str | None, *, stage: str,
                  model_path: str | None = None, made_by: str | Path | None = None) -> None:
    """Refuse weights other than those of the run's generations (``--stages`` or not).

    ``loaded`` is the digest of the weights the stage loaded (``weights_sha256`` of the
    backend), or, with ``made_by``, the digest a file records of the weights that made it
    (a hidden store's or a J-Lens fit's ``model_info``). Unknown on either side: nothing to
    compare (a server backend).

    Raises:
        FksInputError: another model's weights.
    """
    run_dir = Path(run_dir)
    recorded, source = bound_weights(read_run_manifest(run_dir))
    if recorded and loaded and recorded != loaded:
        what = (f"{made_by} was made with weights" if made_by is not None else
                f"the loaded weights{f' ({model_path})' if model_path else ''} have")
        raise FksInputError(
            f"{stage}: {what} sha256 {loaded[:12]}..., but this run belongs to "
            f"{recorded[:12]}... (recorded by {source} in {run_dir / MANIFEST_NAME}); one model "
            "per run: use that model or another run directory",
            path=made_by if made_by is not None else run_dir / MANIFEST_NAME,
            field="model_info.weights_sha256" if made_by is not None else "weights_sha256")


def bind_weights(run_dir: str | Path, loaded: str | None, *, stage: str,
                 model_path: str | None = None) -> None:
    """Check the weights, then bind a run whose generations name none to ``loaded``.

    An imported run records no weights; the first hidden-state stage binds it (manifest
    ``weights_bound``), so later ones must use the same model (:func:`check_weights`).
    """
    check_weights(run_dir, loaded, stage=stage, model_path=model_path)
    manifest = read_run_manifest(run_dir)
    if loaded and bound_weights(manifest)[0] is None:
        update_run_manifest(run_dir, {"weights_bound": {"weights_sha256": loaded, "by": stage,
                                                        "model_path": model_path}})


# ------------------------------------------------------------------------ one protocol per run
#: fields of ``generation_config`` that record the hardware, not the protocol (shards on
#: different machines may differ there; every other field must agree)
RECORDED_DETAILS: frozenset[str] = frozenset({"dtype_used"})


def protocol_of(generation_config: Any) -> Any:
    """Return a row's ``generation_config`` without its recorded details (the protocol)."""
    if not isinstance(generation_config, dict):
        return generation_config
    return {k: v for k, v in generation_config.items() if k not in RECORDED_DETAILS}


class ProtocolCheck:
    """Rows of one run share one prompt version and one decoding protocol.

    Call it on every row as it is read; the first row fixes the values (or ``expected``, the
    run's own, such as the manifest's ``prompt_version`` and ``generation_config``).
    """

    def __init__(self, path: str | Path, *, prompt_version: str | None = None,
                 generation_config: Any = None, source: str = "the run manifest") -> None:
        self.path = Path(path)
        self.source = source
        self.prompt_version = prompt_version
        self.protocol = None if generation_config is None else protocol_of(generation_config)

    @classmethod
    def for_run(cls, run_dir: str | Path, path: str | Path) -> ProtocolCheck:
        """Return a check against the prompt version and protocol of ``run_dir``'s manifest."""
        manifest = read_run_manifest(run_dir)
        return cls(path, prompt_version=manifest.get("prompt_version"),
                   generation_config=manifest.get("generation_config"),
                   source=str(Path(run_dir) / MANIFEST_NAME))

    def __call__(self, line: int, record: Any) -> None:
        """Check one row (a record with ``prompt_version`` and ``generation_config``)."""
        pv = getattr(record, "prompt_version", None)
        proto = protocol_of(getattr(record, "generation_config", None))
        if self.prompt_version is None and self.protocol is None:
            self.prompt_version, self.protocol = pv, proto
            self.source = f"line {line}"
            return
        if self.prompt_version is None:
            self.prompt_version = pv
        if self.protocol is None:
            self.protocol = proto
        if pv != self.prompt_version:
            raise FksInputError(
                f"rows of one run share one prompt version: {pv!r} here, {self.prompt_version!r}"
                f" in {self.source}; regenerate with one prompt version (or split the run)",
                path=self.path, line=line, field="prompt_version")
        if proto != self.protocol:
            both = isinstance(proto, dict) and isinstance(self.protocol, dict)
            diff = sorted(k for k in {*proto, *self.protocol}
                          if proto.get(k) != self.protocol.get(k)) if both else []
            raise FksInputError(
                f"rows of one run share one decoding protocol; this row differs from "
                f"{self.source}{' in ' + ', '.join(diff) if diff else ''}; regenerate with one "
                "protocol", path=self.path, line=line,
                field="generation_config" + (f".{diff[0]}" if diff else ""))


def run_benchmark(run_dir: str | Path, benchmark: Any = None) -> Any:
    """Return the run's benchmark, checked against the checksum the run recorded.

    ``benchmark``: a path or a loaded one; None: the one the manifest records
    (``benchmark.path``).

    None when neither is available (a run folder put together by hand, or a recorded path that
    is gone: logged); the readers then check rows against each other only.

    Raises:
        FksInputError: the benchmark is not the one the run was generated on.
    """
    from fks.data.load import Benchmark, load_benchmark

    run_dir = Path(run_dir)
    if benchmark is None:
        path = (read_run_manifest(run_dir).get("benchmark") or {}).get("path")
        if not path:
            return None
        if not Path(path).is_dir():
            log.warning("the benchmark this run records (%s) is gone; its query ids are not "
                        "checked", path)
            return None
        benchmark = path
    bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
    check_benchmark(run_dir, bench.checksum(), bench.root)
    return bench
