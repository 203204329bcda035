"""Optional PNG plots of the calibration summary (only when matplotlib is importable).

The report stage draws its own figures from the arrays in ``calibration_summary.json``; these
are quick looks: one reliability diagram (equal-width bins, Wilson intervals, bin counts) and
one risk-coverage curve in both coverage views (answered rows; every query) per (reading,
source) with data.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from fks.io import atomic_path

__all__ = ["PLOTS_DIR", "write_plots"]

log = logging.getLogger(__name__)

PLOTS_DIR = "calibration_plots"


def _reliability(ax: Any, table: dict[str, Any], title: str) -> None:
    """Draw accuracy against mean confidence per non-empty bin, with the diagonal.

    Error bars are the table's (fact-clustered) intervals; a bin without one (too few facts)
    is drawn as a hollow point. Each point is labelled with its row count.
    """
    pts = [(c, a, lo, hi, n) for c, a, lo, hi, n in zip(
        table["mean_confidence"], table["accuracy"], table["accuracy_ci_low"],
        table["accuracy_ci_high"], table["counts"], strict=True) if n]
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color="C0")
    bars = [p for p in pts if p[2] is not None and p[3] is not None]
    if bars:
        ax.errorbar([p[0] for p in bars], [p[1] for p in bars],
                    yerr=[[max(p[1] - p[2], 0.0) for p in bars],
                          [max(p[3] - p[1], 0.0) for p in bars]], fmt="o",
                    color="C0")
    bare = [p for p in pts if p[2] is None or p[3] is None]
    if bare:
        ax.plot([p[0] for p in bare], [p[1] for p in bare], "o", mfc="none", color="C0",
                label="no interval (too few facts)")
        ax.legend(fontsize=7)
    for c, a, _, _, n in pts:
        ax.annotate(str(n), (c, a), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean confidence", ylabel="accuracy",
           title=f"{title}\nECE {table['ece']:.3f} ({table['bins']} equal-width bins)")


def write_plots(summary: dict[str, Any], out_dir: str | Path) -> list[str]:
    """Write the PNGs under ``out_dir/calibration_plots``; returns their paths relative to it.

    Returns an empty list (and logs a warning) when matplotlib is not installed.
    """
    if importlib.util.find_spec("matplotlib") is None:
        log.warning("matplotlib is not installed; no calibration plots drawn")
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    written: list[str] = []
    for reading, rd in summary["readings"].items():
        for source, block in rd["sources"].items():
            if not block.get("available") or block.get("figures") is None:
                continue
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 4))
            _reliability(ax1, block["reliability"]["equal_width"], f"{reading} / {source}")
            rc = block["risk_coverage"]
            ax2.step(rc["coverage"], rc["risk"], where="pre",
                     label=f"confidence coverage (AURC {block['figures']['aurc']:.3f})")
            e2e = block.get("end_to_end") or {}
            if e2e.get("risk_coverage"):
                ax2.step(e2e["risk_coverage"]["coverage"], e2e["risk_coverage"]["risk"],
                         where="pre", linestyle="--",
                         label=f"end-to-end coverage (AURC {e2e['figures']['aurc']:.3f})")
            ax2.set(xlim=(0, 1), ylim=(0, 1), xlabel="coverage", ylabel="risk",
                    title="risk-coverage, both views")
            ax2.legend(fontsize=7)
            fig.tight_layout()
            name = f"{PLOTS_DIR}/{reading}__{source}.png"
            with atomic_path(out_dir / name, suffix=".png") as tmp:
                fig.savefig(tmp, format="png", dpi=100)
            plt.close(fig)
            written.append(name)
    return written
