"""The headline figures of a run, read from its bootstrap intervals (one reader for all).

``fks run``'s console table (:mod:`fks.pipeline`), ``results.json``
(:mod:`fks.report.results`) and the leaderboard read the same records through
:func:`headline_figures`, so they cannot disagree. It lives in :mod:`fks.report` because the
pipeline calls the report, never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fks.errors import FksInputError
from fks.io import read_json

__all__ = ["HEADLINE", "KTS_KEYS", "INTERVALS_FILE", "headline_figures"]

#: figure key in bootstrap_intervals.json -> display name
HEADLINE: dict[str, str] = {"anchor_accuracy": "anchor accuracy", "bcs": "BCS", "bes": "BES",
                            "scr": "stable correct", "ur": "unstable", "iss": "ISS",
                            "iss_unwhitened": "ISS unwhitened",
                            "kts_geo": "KTS-Geo", "kts_id": "KTS-ID", "kts": "KTS"}
#: headline keys read from the pair-shared coverage mode (D_t & D_t')
KTS_KEYS = ("kts_geo", "kts_id", "kts", "kts_geo_raw_spearman")
#: where the headline figures come from (relative to RUN)
INTERVALS_FILE = "metrics/bootstrap_intervals.json"


def headline_figures(run_dir: str | Path, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """Return ``{"mode", "kts_mode", "n_facts", "n_relations", "figures": {key: record}}``.

    ``record`` is the figure's entry of ``bootstrap_intervals.json`` (``point``, ``low``,
    ``high``, ``n_facts``, ``n_relations``, ``n_valid_resamples``, ...); ``keys`` defaults to
    :data:`HEADLINE`. A figure the bootstrap did not compute is absent; ``figures`` is empty
    when the bootstrap has not run. (``fks.report.results`` reads the same records.)
    """
    path = Path(run_dir) / INTERVALS_FILE
    if not path.is_file():
        return {"mode": None, "kts_mode": None, "n_facts": None, "n_relations": None,
                "figures": {}}
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise FksInputError("expected a JSON object", path=path)
    modes = doc.get("coverage_modes") or {}
    mode = next(iter(modes), None)

    def metrics_of(m: str | None) -> dict[str, Any]:
        return ((modes.get(m) or {}).get("subsets", {}).get("all", {}) or {}).get(
            "metrics") or {} if m else {}

    block = (modes.get(mode) or {}).get("subsets", {}).get("all", {}) if mode else {}
    kts_mode = "full_set" if "full_set" in modes else mode
    figures = {}
    for key in keys or HEADLINE:
        src = metrics_of(kts_mode if key in KTS_KEYS else mode)
        if isinstance(src.get(key), dict):
            figures[key] = dict(src[key])
    return {"mode": mode, "kts_mode": kts_mode, "n_facts": block.get("n_facts"),
            "n_relations": block.get("n_relations"), "figures": figures}
