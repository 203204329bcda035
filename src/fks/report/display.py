"""Console display of a comparison (a rich table on stdout, or the console given)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from fks.log import results_console
from fks.report.tables import fmt, label

__all__ = ["print_comparison"]

_SHOWN = ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur", "iss", "kts_geo",
          "kts_id", "kts")


def print_comparison(result: dict[str, Any], *, out: Console | None = None) -> None:
    """Print ``Delta = A - B`` with its interval per figure, one table per coverage mode.

    ``out``: the console (default :data:`fks.log.results_console`, stdout).
    """
    out = out or results_console
    for mode, subsets in result["coverage_modes"].items():
        t = RichTable(title=f"{result['model_a']} - {result['model_b']} ({mode}, all facts)")
        for col in ("figure", "A", "B", "Delta", "95 % interval"):
            t.add_column(col, justify="left" if col == "figure" else "right")
        for name in _SHOWN:
            d = subsets.get("all", {}).get(name)
            if d is None:
                continue
            ci = "" if d["low"] is None else f"[{fmt(d['low'])}, {fmt(d['high'])}]"
            t.add_row(label(name), fmt(d["a"]), fmt(d["b"]), fmt(d["point"]), ci)
        out.print(t)
