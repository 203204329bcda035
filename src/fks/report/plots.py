"""Report figures drawn with matplotlib (Agg backend) and embedded as base64 PNG data URIs.

Each function takes plain data (no run objects), draws one figure with a title, axis labels
and a legend where there is more than one series, and returns ``data:image/png;base64,...``
so the HTML report stays one self-contained file.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

__all__ = [
    "to_data_uri",
    "iss_by_layer",
    "kts_heatmap",
    "behavior_bars",
    "per_relation_bars",
    "calibration_figure",
    "forest_plot",
]

#: the facts outside the four §6 groups (fks.metrics.behavior.EXTRA_GROUPS), one bar segment
OTHER_GROUPS_LABEL = "Multiple / review / unscorable"
GROUP_COLORS = {"Stable Correct": "#2e7d32", "Stable Wrong": "#c62828",
                "Stable Abstention": "#f9a825", "Unstable": "#607d8b",
                OTHER_GROUPS_LABEL: "#bdbdbd"}


def to_data_uri(fig: Any, *, dpi: int = 100) -> str:
    """Render ``fig`` as PNG, close it, and return a ``data:image/png;base64`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _num(x: Any) -> float:
    return np.nan if x is None else float(x)


def iss_by_layer(series: Mapping[str, Mapping[str, Any]]) -> str:
    """ISS (fact mean) by layer with its 95 % band, one line per model.

    Args:
        series: model -> ``{"layers": [...], "point": [...], "low": [...], "high": [...]}``.
    """
    fig, ax = plt.subplots(figsize=(7, 4))
    for model, s in series.items():
        x = np.asarray(s["layers"], dtype=float)
        ax.plot(x, [_num(v) for v in s["point"]], marker="o", label=model)
        ax.fill_between(x, [_num(v) for v in s["low"]], [_num(v) for v in s["high"]],
                        alpha=0.25)
    ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set(xlabel="layer (window layers, spec §7.10)", ylabel="ISS (mean over facts)",
           title="ISS by layer, 95 % relation-clustered bootstrap band")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(title="model")
    ax.grid(alpha=0.3)
    return to_data_uri(fig)


def kts_heatmap(families: Sequence[str], values: Mapping[str, float | None], *, model: str,
                metric: str = "KTS") -> str:
    """Symmetric family x family heatmap of a per-pair KTS figure (spec §13.3).

    Args:
        families: the families, in order.
        values: ``"a__b"`` -> value (None where undefined).
        model: for the title.
        metric: the figure's label.
    """
    T = len(families)
    M = np.full((T, T), np.nan)
    for key, v in values.items():
        a, b = key.split("__")
        if a in families and b in families and v is not None:
            i, j = families.index(a), families.index(b)
            M[i, j] = M[j, i] = v
    fig, ax = plt.subplots(figsize=(1.2 * T + 2.5, 1.1 * T + 1.5))
    im = ax.imshow(np.ma.masked_invalid(M), vmin=0.0, vmax=1.0, cmap="viridis")
    for i in range(T):
        for j in range(T):
            if np.isfinite(M[i, j]):
                ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center",
                        color="white" if M[i, j] < 0.6 else "black", fontsize=9)
    ax.set_xticks(range(T), families, rotation=30, ha="right")
    ax.set_yticks(range(T), families)
    ax.set(xlabel="condition family", ylabel="condition family",
           title=f"{metric} by condition pair ({model})")
    fig.colorbar(im, ax=ax, label=metric)
    return to_data_uri(fig)


def behavior_bars(shares: Mapping[str, Mapping[str, float | None]]) -> str:
    """Horizontal stacked bars of the four behaviour shares (§6) and the rest, one per model.

    Args:
        shares: model -> ``{group name: share}``.
    """
    models = list(shares)
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(models) + 1.6))
    left = np.zeros(len(models))
    for group, color in GROUP_COLORS.items():
        vals = np.array([_num(shares[m].get(group)) for m in models])
        vals = np.nan_to_num(vals)
        ax.barh(models, vals, left=left, color=color, label=group)
        for k, (x0, v) in enumerate(zip(left, vals, strict=True)):
            if v >= 0.06:
                ax.text(x0 + v / 2, k, f"{v:.0%}", ha="center", va="center", color="white",
                        fontsize=8)
        left += vals
    ax.set(xlim=(0, 1), xlabel="share of facts", ylabel="model",
           title="Behaviour groups (tau_b threshold, spec §6)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.3 / len(models)), ncol=3,
              frameon=False)
    return to_data_uri(fig)


def per_relation_bars(relations: Sequence[str], values: Mapping[str, Sequence[float | None]],
                      *, model: str) -> str:
    """Draw grouped bars per relation (e.g. BCS and ISS), one colour per figure.

    Args:
        relations: relation names (x axis).
        values: figure label -> one value per relation (None: not available).
        model: for the title.
    """
    n = max(len(values), 1)
    width = 0.8 / n
    x = np.arange(len(relations))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(relations) * n + 2), 4))
    for k, (name, vals) in enumerate(values.items()):
        ax.bar(x + (k - (n - 1) / 2) * width, [_num(v) for v in vals], width, label=name)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xticks(x, relations, rotation=45, ha="right")
    ax.set(xlabel="relation", ylabel="value (mean over the relation's facts)",
           title=f"Per-relation results ({model})")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return to_data_uri(fig)


def calibration_figure(sources: Mapping[str, Mapping[str, Any]], *, title: str) -> str:
    """Reliability diagram and risk-coverage curves (both coverage views) per source.

    Args:
        sources: source -> ``{"reliability": {"mean_confidence", "accuracy", "counts",
            optional "accuracy_ci_low"/"accuracy_ci_high"}, "risk_coverage": {"coverage",
            "risk"}, optional "end_to_end_risk_coverage", "ece": float}``.
        title: reading / model, for the titles.

    The reliability diagram labels each bin with its row count and draws its interval when
    the summary has one; the risk-coverage panel draws the confidence-coverage curve (solid)
    and the end-to-end curve (dashed, every query, non-answers last as errors).
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax1.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    for i, (name, s) in enumerate(sources.items()):
        color = f"C{i % 10}"
        rel = s["reliability"]
        lows = rel.get("accuracy_ci_low") or [None] * len(rel["counts"])
        highs = rel.get("accuracy_ci_high") or [None] * len(rel["counts"])
        pts = [(c, a, n, lo, hi) for c, a, n, lo, hi in zip(
            rel["mean_confidence"], rel["accuracy"], rel["counts"], lows, highs, strict=True)
            if n and c is not None]
        if pts:
            ece = s.get("ece")
            lab = f"{name} (ECE {ece:.3f})" if isinstance(ece, float) else name
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color,
                     label=lab)
            bars = [p for p in pts if p[3] is not None and p[4] is not None]
            if bars:
                ax1.errorbar([p[0] for p in bars], [p[1] for p in bars],
                             yerr=[[max(p[1] - p[3], 0.0) for p in bars],
                                   [max(p[4] - p[1], 0.0) for p in bars]],
                             fmt="none", ecolor=color, alpha=0.5, capsize=2)
            for c, a, n, _, _ in pts:
                ax1.annotate(str(n), (c, a), textcoords="offset points", xytext=(3, 3),
                             fontsize=6, color=color)
        rc = s.get("risk_coverage") or {}
        if rc.get("coverage"):
            ax2.step(rc["coverage"], rc["risk"], where="pre", color=color)
        e2e = s.get("end_to_end_risk_coverage") or {}
        if e2e.get("coverage"):
            ax2.step(e2e["coverage"], e2e["risk"], where="pre", color=color, linestyle="--")
    ax1.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean confidence (bin)", ylabel="accuracy (bin)",
            title="Reliability: rows per bin, fact-clustered intervals")
    ax1.title.set_fontsize(9)
    # one legend of the sources (colours) under both panels (bbox_inches="tight" keeps it),
    # never over the curves; the right panel's line styles get a two-line key of their own
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.02),
               ncol=3, frameon=False)
    ax2.set(xlim=(0, 1), ylim=(0, 1), xlabel="coverage", ylabel="risk (error rate)",
            title="Risk-coverage: solid answered rows, dashed all queries")
    ax2.title.set_fontsize(9)
    ax2.legend(handles=[Line2D([], [], color="black",
                               label="answered rows (confidence coverage)"),
                        Line2D([], [], color="black", linestyle="--",
                               label="all queries (end-to-end coverage)")],
               fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    return to_data_uri(fig)


def forest_plot(rows: Sequence[Mapping[str, Any]], *, title: str, xlabel: str) -> str:
    """Points with horizontal interval bars, one row per label (leaderboard / deltas).

    Args:
        rows: ``{"label", "point", "low", "high"}`` each.
        title: the figure's title.
        xlabel: the x axis label.
    """
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.5))
    y = np.arange(len(rows))[::-1]
    pts = np.array([_num(r["point"]) for r in rows])
    lo = np.array([_num(r.get("low")) for r in rows])
    hi = np.array([_num(r.get("high")) for r in rows])
    err = np.vstack([np.nan_to_num(pts - lo), np.nan_to_num(hi - pts)])
    ax.errorbar(pts, y, xerr=err, fmt="o", capsize=3, label="point and 95 % interval")
    ax.axvline(0.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, [str(r["label"]) for r in rows])
    ax.set(xlabel=xlabel, title=title)
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return to_data_uri(fig)
