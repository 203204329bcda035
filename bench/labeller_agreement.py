"""§18.6 agreement of two hand labelings of the same answers: the labellers' own ceiling.

    .venv/bin/python bench/labeller_agreement.py FIRST.jsonl SECOND.jsonl [--out report.json]

Both files are label sets in the builders' format (``data/judge_validation/*/labels_*.jsonl``)
over the same answers, labelled blind by different sessions under the same guide (issue 26,
stop 37: ``fresh11b`` relabels ``fresh11``; ``fresh12b`` relabels ``fresh12``). The five
figures are those of ``fks judge agreement`` (:func:`fks.judge.compare_labels`, the code that
measures the judge), with the first labeling in the judge's place, per model and pooled:
kind agreement, extraction where both say ANSWER, within-fact cluster pairs, correctness
Cohen's kappa, and the mean per-fact BCS gap with its 95 % bootstrap interval over facts.

What it is for: the issue's goals hold the judge to the first labeling. Where two labellers
reading by the same guide differ from each other by as much as the judge differs from either,
the goal is below the measurement's own noise, and that is a finding, not a reason to tune.
Nothing is tuned here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge_heldout import _figures, _fmt  # the judge's own lines, so the two read alike

from fks.io import iter_jsonl
from fks.judge import compare_labels
from fks.judge._agreement import LabelRow, _key


def _read(path: Path) -> dict[str, LabelRow]:
    out: dict[str, LabelRow] = {}
    for _, row in iter_jsonl(path, LabelRow):
        assert isinstance(row, LabelRow)
        out[_key(row.model, row.query_id)] = row
    return out


def _with_facts(rep: dict[str, Any]) -> dict[str, Any]:
    return {**_figures(rep), "n_facts": rep["bcs_gap"]["n_facts"]}


def agreement(first: Path, second: Path) -> dict[str, dict[str, Any]]:
    """``{"pooled" | model: figures}`` of ``second`` against ``first`` (common rows only)."""
    a, b = _read(first), _read(second)
    groups = {k: f"{r.model}|{r.model_extra.get('fact_id')}|main" for k, r in a.items()}
    out = {"pooled": _with_facts(compare_labels(a, b, groups))}
    for model in sorted({r.model for r in a.values()}):
        keep = {k for k, r in a.items() if r.model == model}
        out[str(model)] = _with_facts(compare_labels({k: a[k] for k in keep},
                                                  {k: v for k, v in b.items() if k in keep},
                                                  groups))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rep = agreement(args.first, args.second)
    for name, f in rep.items():
        print(f"{name:24s} {_fmt(f, ci=True)}  over {f['n_facts']} facts")
    if args.out:
        args.out.write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
