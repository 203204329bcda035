"""Test helper: make a finished run look like a folder put together by hand."""

from __future__ import annotations

import json
from pathlib import Path

from fks.generate.manifest import MANIFEST_NAME


def drop_provenance(run_dir: Path) -> None:
    """Remove every ``stages.<stage>.files`` record (fks.provenance then cannot verify the
    chain and the row readers' own checks are what stands between bad input and a figure)."""
    path = Path(run_dir) / MANIFEST_NAME
    doc = json.loads(path.read_text(encoding="utf-8"))
    for info in doc.get("stages", {}).values():
        if isinstance(info, dict):
            info.pop("files", None)
    path.write_text(json.dumps(doc), encoding="utf-8")
