"""``RUN/evaluation_manifest.json``: one JSON object per run directory, shared by every stage.

Layout (a dict; each stage owns its own entry under ``stages`` and may add top-level sections)::

    {
      "model": {...}, "benchmark": {...}, "generation_config": {...}, "prompt_version": "...",
      "seeds": {...}, "fks_version": "...", "backend": {...},
      "stages": {"generate": {...}, "score": {...}, ...}
    }

Updates are read-modify-write with an atomic replace, so a crash leaves the old or the new file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fks.errors import FksInputError
from fks.io import atomic_write_json, read_json

__all__ = ["MANIFEST_NAME", "read_run_manifest", "update_run_manifest"]

MANIFEST_NAME = "evaluation_manifest.json"


def read_run_manifest(run_dir: str | Path) -> dict[str, Any]:
    """Read the run manifest of ``run_dir`` (an empty skeleton when there is none yet)."""
    path = Path(run_dir) / MANIFEST_NAME
    if not path.is_file():
        return {"stages": {}}
    data = read_json(path)
    if not isinstance(data, dict):
        raise FksInputError("a run manifest must be a JSON object", path=path)
    data.setdefault("stages", {})
    if not isinstance(data["stages"], dict):
        raise FksInputError("must be an object {stage: {...}}", path=path, field="stages")
    return data


def update_run_manifest(
    run_dir: str | Path,
    sections: dict[str, Any] | None = None,
    *,
    stage: str | None = None,
    stage_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge top-level ``sections`` and ``stages[stage] |= stage_info`` into the manifest.

    Other stages' entries and unrelated sections are kept. Returns the manifest written.
    """
    data = read_run_manifest(run_dir)
    data.update(sections or {})
    if stage is not None:
        data["stages"][stage] = {**data["stages"].get(stage, {}), **(stage_info or {})}
    atomic_write_json(Path(run_dir) / MANIFEST_NAME, data)
    return data
