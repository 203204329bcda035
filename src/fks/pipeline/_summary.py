"""The few headline figures printed at the end of ``fks run`` and ``fks demo``.

Read from ``RUN/metrics/bootstrap_intervals.json`` (point and 95 % interval, relation-clustered
bootstrap) in the first coverage mode of ``metrics.yaml`` (``complete_family`` by default), all
facts; a figure whose stage did not run is absent. Below the table, from
``behavioral_model_summary.json``: the unscorable facts and the empty answers per family.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fks.io import read_json
from fks.log import console

__all__ = ["HEADLINE", "headline_figures", "render_headline"]

#: figure key in bootstrap_intervals.json -> display name
HEADLINE: dict[str, str] = {"anchor_accuracy": "anchor accuracy", "bcs": "BCS", "bes": "BES",
                            "scr": "stable correct", "ur": "unstable", "iss": "ISS",
                            "kts_geo": "KTS-Geo", "kts_id": "KTS-ID", "kts": "KTS"}


def headline_figures(run_dir: str | Path) -> dict[str, Any]:
    """Return ``{"mode", "n_facts", "n_relations", "figures": {key: {point, low, high}}}``.

    Empty ``figures`` when the bootstrap has not run.
    """
    path = Path(run_dir) / "metrics" / "bootstrap_intervals.json"
    if not path.is_file():
        return {"mode": None, "n_facts": None, "n_relations": None, "figures": {}}
    doc = read_json(path)
    modes = doc.get("coverage_modes") or {}
    mode = next(iter(modes), None)
    block = (modes.get(mode) or {}).get("subsets", {}).get("all", {}) if mode else {}
    metrics = block.get("metrics") or {}
    figures = {key: {k: metrics[key].get(k) for k in ("point", "low", "high")}
               for key in HEADLINE if key in metrics}
    return {"mode": mode, "n_facts": block.get("n_facts"), "n_relations":
            block.get("n_relations"), "figures": figures}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def render_headline(run_dir: str | Path, *, title: str | None = None,
                    keys: Sequence[str] | None = None) -> dict[str, Any]:
    """Print the headline figures as a table on the fks console; returns them.

    Args:
        run_dir: the run directory.
        title: the table title (default: run name, coverage mode, facts, relations).
        keys: the figures to show, in order (default: every key of :data:`HEADLINE`).
    """
    from rich.table import Table

    head = headline_figures(run_dir)
    if not head["figures"]:
        console.print(f"{Path(run_dir).name}: no bootstrap intervals (the bootstrap stage has "
                      "not run)", highlight=False)
        return head
    table = Table(title=title or f"{Path(run_dir).name}: {head['mode'] or 'no bootstrap'}"
                  f" ({head['n_facts']} facts, {head['n_relations']} relations)")
    table.add_column("figure")
    table.add_column("point", justify="right")
    table.add_column("95 % CI", justify="right")
    for key in keys or HEADLINE:
        fig = head["figures"].get(key)
        if fig is not None:
            ci = f"[{_fmt(fig['low'])}, {_fmt(fig['high'])}]"
            table.add_row(HEADLINE[key], _fmt(fig["point"]), ci)
    console.print(table)
    line = behavior_line(run_dir)
    if line:
        console.print(line, highlight=False)
    return head


def behavior_line(run_dir: str | Path) -> str | None:
    """One line: unscorable facts (primary reading, full set) and empty answers per family."""
    path = Path(run_dir) / "metrics" / "behavioral_model_summary.json"
    if not path.is_file():
        return None
    from fks.metrics.behavior import answer_coverage_line

    doc = read_json(path)
    reading = (doc.get("readings") or {}).get(doc.get("primary_reading"), {})
    block = ((reading.get("full_set") or {}).get("fixed") or {}).get("all") or {}
    head = ""
    if "n_unscorable" in block:
        head = (f"behaviour: {block['n_unscorable']} of {block['n_facts']} facts unscorable "
                "(too few scorable answers); ")
    return head + answer_coverage_line(doc)
