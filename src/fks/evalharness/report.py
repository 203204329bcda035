"""The HTML section of the harness report.

One self-contained ``<section>`` (inline CSS, no script, no external asset) that the main fks
report can embed, or that stands alone wrapped by :func:`render_html_page`.

Every piece of text that comes from the input files (case ids, labels, flags, contested
points) goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from fks.evalharness.config import DIMENSION_IDS
from fks.evalharness.gaming import is_gaming_flag
from fks.evalharness.scoring import HarnessResult

__all__ = ["render_html_section", "render_html_page"]

_CSS = """
.fks-harness{font-family:system-ui,sans-serif;font-size:14px;color:#222}
.fks-harness table{border-collapse:collapse;margin:0.5em 0 1.2em}
.fks-harness th,.fks-harness td{border:1px solid #ccc;padding:2px 6px;text-align:right}
.fks-harness th{background:#f3f3f3}
.fks-harness td.l,.fks-harness th.l{text-align:left}
.fks-harness .warn{color:#a40000}
.fks-harness .note{color:#555;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    return "&ndash;" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], left: int = 1) -> str:
    """Header cells are escaped; row cells must already be escaped/formatted."""
    head = "".join(
        f'<th class="l">{_e(h)}</th>' if k < left else f"<th>{_e(h)}</th>"
        for k, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="l">{c}</td>' if k < left else f"<td>{c}</td>" for k, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _buckets(result: HarnessResult, min_cases: int) -> str:
    rows = []
    for b, rep in result.report.bucket_reports.items():
        bw = (
            f"bandwidth: &plusmn;{100 * rep.percentile_bandwidth:.1f}%"
            if rep.case_count < min_cases
            else ""
        )
        flag = _e(rep.sample_quality_flag)
        if rep.sample_quality_flag != "ok":
            flag = f'<span class="warn">{flag}</span>'
        rows.append(
            [_e(b), str(rep.case_count), _num(rep.median_score), bw, flag]
            + [_num(rep.dimension_medians.get(d)) for d in DIMENSION_IDS]  # type: ignore[call-overload]
        )
    header = ["bucket", "cases", "median score", "percentile bandwidth", "quality", *DIMENSION_IDS]
    return "<h3>Buckets (medians; percentiles are within-bucket only)</h3>" + _table(header, rows)


def _cross_bucket(result: HarnessResult) -> str:
    rows = []
    for row in result.details.get("cross_bucket_table", []):
        norm = row["normalised_median"]
        rows.append(
            [
                _e(row["bucket_label"]),
                "yes" if row["included"] else f'<span class="warn">no ({_e(row["reason"])})</span>',
                str(row["case_count"]),
                str(row["anchor_count"]),
                _num(row["anchor_median"]),
                _num(norm) if norm is not None else _e(row.get("normalisation_reason") or "-"),
            ]
        )
    return (
        "<h3>Cross-bucket comparison (§3.2 anchor-normalised)</h3>"
        '<p class="note">Scores are divided by the median score of the bucket\'s admitted '
        "expert-consensus anchors (kappa &ge; 0.7, &ge; 5 per bucket). Only buckets flagged ok "
        "take part (B7 is a separate baseline in v1; buckets with low annotation agreement "
        "report absolute scores only).</p>"
        + _table(
            ["bucket", "included", "cases", "anchors", "anchor median", "normalised median"],
            rows,
        )
    )


def _degradation(result: HarnessResult) -> str:
    flags = result.report.degradation_flags
    if not flags:
        return "<h3>Degradation</h3><p>No degradation flag (or no baseline given).</p>"
    rows = [
        [
            _e(f.bucket_label),
            _e(f.dimension_id),
            _num(f.baseline_score),
            _num(f.current_score),
            _num(f.delta_ratio),
            _e(f.severity),
        ]
        for f in flags
    ]
    return "<h3>Degradation (&Delta; &ge; threshold)</h3>" + _table(
        ["bucket", "dimension", "baseline", "current", "delta", "severity"], rows, left=2
    )


def _iaa(result: HarnessResult) -> str:
    summaries = result.details.get("iaa", {})
    if not summaries:
        return "<h3>Inter-annotator agreement</h3><p>No double annotation in the gold file.</p>"
    rows = []
    for task, s in summaries.items():
        kappa = s["kappa_rolling_10"]
        k_text = (
            _num(kappa) if kappa is not None else f"undefined ({_e(s['kappa_undefined_reason'])})"
        )
        if s["below_threshold"]:
            k_text = f'<span class="warn">{k_text}</span>'
        rows.append(
            [
                _e(task),
                str(s["n_items"]),
                k_text,
                _num(s["threshold"], 2),
                _num(s["disagreement_rate"], 2),
                "yes" if s["triggered_mini_review"] else "no",
                str(s["consecutive_windows_below"]),
                str(len(s["contested_points"])),
            ]
        )
    contested = [
        [
            _e(task),
            _e(p["case_id"]),
            _e(p["item"]),
            _e(p["label_a"]),
            _e(p["label_b"]),
            _e(p["label_c"] if p["label_c"] is not None else ""),
        ]
        for task, s in summaries.items()
        for p in s["contested_points"]
    ]
    out = "<h3>Inter-annotator agreement (rolling 10)</h3>" + _table(
        [
            "task",
            "items",
            "kappa",
            "threshold",
            "disagreement",
            "mini-review",
            "windows below",
            "contested",
        ],
        rows,
    )
    if contested:
        out += "<h4>Contested points (audit trail)</h4>" + _table(
            ["task", "case", "item", "label a", "label b", "label c"], contested, left=6
        )
    return out


def _gaming(result: HarnessResult) -> str:
    counts: Counter[str] = Counter()
    per_case = []
    for cs in result.case_scores:
        flags = [f for d in cs.dimensions.values() for f in d.gaming_flags]
        counts.update(flags)
        flags = [f for f in flags if is_gaming_flag(f)]
        if flags:
            per_case.append(
                [_e(cs.case_id), _e(cs.bucket_label), _e(", ".join(sorted(set(flags))))]
            )
    out = "<h3>Flags (anti-gaming and not-computed reasons)</h3>"
    out += _table(["flag", "cases"], [[_e(f), str(n)] for f, n in sorted(counts.items())])
    if per_case:
        out += "<h4>Cases with anti-gaming flags (review)</h4>"
        out += _table(["case", "bucket", "flags"], per_case, left=3)
    return out


def _d5(result: HarnessResult) -> str:
    out = "<h3>D5 applicability: confusion matrix and not-applicable FP rate</h3>"
    d5 = result.details.get("d5_by_bucket", {})
    if not d5:
        return out + "<p>No D5 annotation.</p>"
    for bucket, entry in d5.items():
        labels = entry["labels"]
        rows = [
            [_e(g)] + [str(v) for v in row]
            for g, row in zip(labels[:-1], entry["matrix"], strict=True)
        ]
        out += f"<h4>{_e(bucket)} (FP rate {_num(entry['fp_rate'])})</h4>"
        out += _table(["gold \\ predicted", *labels], rows)
    return out


def render_html_section(result: HarnessResult, *, percentile_min_cases: int = 30) -> str:
    """Render the harness report as one self-contained ``<section class="fks-harness">``."""
    rep = result.report
    missing = result.details.get("missing_predictions", [])
    head = (
        f"<h2>EvalHarness 11-dimension report &mdash; split {_e(rep.split)}</h2>"
        f"<p>{len(result.case_scores)} case(s) scored in {len(rep.bucket_reports)} bucket(s).</p>"
    )
    if missing:
        head += (
            f'<p class="warn">{len(missing)} case(s) without a prediction were scored as empty: '
            f"{_e(', '.join(missing))}</p>"
        )
    head += (
        '<p class="note">C_kelly is retired (ADR-021): D6 and D11 carry weights summing to 0.9 '
        "unless renormalisation is switched on in harness.yaml.</p>"
    )
    parts = [
        head,
        _buckets(result, percentile_min_cases),
        _cross_bucket(result),
        _degradation(result),
        _iaa(result),
        _gaming(result),
        _d5(result),
    ]
    return f'<section class="fks-harness"><style>{_CSS}</style>{"".join(parts)}</section>'


def render_html_page(result: HarnessResult, *, percentile_min_cases: int = 30) -> str:
    """Wrap :func:`render_html_section` in a minimal standalone HTML document."""
    section = render_html_section(result, percentile_min_cases=percentile_min_cases)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>fks harness report</title></head><body>"
        f"{section}</body></html>\n"
    )
