"""The few headline figures printed at the end of ``fks run`` and ``fks demo``.

Read from ``RUN/metrics/bootstrap_intervals.json`` (point and 95 % interval, relation-clustered
bootstrap), all facts: the fact-level figures in the first coverage mode of ``metrics.yaml``
(``complete_family`` by default, spec §1.3), the KTS figures in ``full_set``, where each pair is
scored on its own shared facts ``D_t & D_t'`` (spec §8.2, §10.1, §17.3); a figure whose stage
did not run is absent. Below the table, from ``behavioral_model_summary.json``: the unscorable
facts and the empty answers per family; then one line of §18 sanity checks
(:func:`render_sanity`) and, when a configured main family is absent from the run, a line
naming it. All of it is the command's result, on stdout (:data:`fks.log.results_console`);
``--json`` sends it to stderr and prints ``RUN/results.json``'s document instead
(:mod:`fks.report.results`, which reads the same figures through :func:`headline_figures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from fks.io import read_json
from fks.log import console, results_console
from fks.report.headline import HEADLINE, KTS_KEYS, headline_figures

__all__ = ["HEADLINE", "headline_figures", "render_headline", "render_sanity",
           "sanity_failures", "reset_sanity_failures"]

#: one-line summaries of the failed sanity checks printed in this process (``--strict``)
_HEARD: list[str] = []


def reset_sanity_failures() -> None:
    """Forget the failures heard so far (each command invocation starts afresh)."""
    _HEARD.clear()


def sanity_failures() -> list[str]:
    """Return the one-line summaries of failed sanity checks printed since the last reset."""
    return list(_HEARD)


def render_sanity(run_dir: str | Path, *, out: Console | None = None) -> dict[str, Any] | None:
    """Print the one-line §18 sanity summary of a run; return ``sanity_checks.json``.

    The line names every failed check with its two numbers (for example ``condition_label_
    shuffle (ISS real 0.68 vs shuffled 0.60)``); a failure is also remembered for
    ``--strict`` (:func:`sanity_failures`). Nothing is printed when the internal metrics
    have not run. ``out``: the console (default: stderr's).
    """
    out = out or console
    from fks.metrics.internal.sanity import sanity_line, summarize_checks

    path = Path(run_dir) / "metrics" / "sanity_checks.json"
    if not path.is_file():
        return None
    doc = read_json(path)
    if not isinstance(doc, dict) or "checks" not in doc:
        return None
    line = f"{Path(run_dir).name}: {sanity_line(doc)}"
    failed = summarize_checks(doc["checks"])["failed"]
    out.print(f"[red]{escape(line)}[/red]" if failed else escape(line), highlight=False,
              soft_wrap=True)
    if failed:
        _HEARD.append(line)
    return doc

def families_absent(run_dir: str | Path) -> list[str]:
    """Return the configured main families absent from the run (internal or behavioural)."""
    out: list[str] = []
    metrics = Path(run_dir) / "metrics"
    iss = metrics / "iss_model_summary.json"
    if iss.is_file():
        out += list((read_json(iss) or {}).get("families_absent") or [])
    beh = metrics / "behavioral_model_summary.json"
    if beh.is_file():
        for r in ((read_json(beh) or {}).get("readings") or {}).values():
            seen = set(r.get("families_observed") or [])
            out += [f for f in r.get("families_configured") or [] if f not in seen]
    return list(dict.fromkeys(out))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def render_headline(run_dir: str | Path, *, title: str | None = None,
                    keys: Sequence[str] | None = None, out: Console | None = None
                    ) -> dict[str, Any]:
    """Print the headline figures as a table, then the sanity line; returns the figures.

    Args:
        run_dir: the run directory.
        title: the table title (default: run name, coverage mode, facts, relations).
        keys: the figures to show, in order (default: every key of :data:`HEADLINE`).
        out: the console (default :data:`fks.log.results_console`, stdout; ``--json``
            passes stderr's so that stdout holds only the JSON).
    """
    from rich.table import Table

    out = out or results_console
    head = headline_figures(run_dir)
    if not head["figures"]:
        out.print(f"{Path(run_dir).name}: no bootstrap intervals (the bootstrap stage has "
                  "not run)", highlight=False)
        _render_absent(run_dir, out)
        render_sanity(run_dir, out=out)
        return head
    table = Table(title=title or f"{Path(run_dir).name}: {head['mode'] or 'no bootstrap'}"
                  f" ({head['n_facts']} facts, {head['n_relations']} relations)",
                  caption=f"KTS: each pair on its shared facts ({head['kts_mode']})"
                  if any(k in head["figures"] for k in KTS_KEYS) else None)
    table.add_column("figure")
    table.add_column("point", justify="right")
    table.add_column("95 % CI", justify="right")
    for key in keys or HEADLINE:
        fig = head["figures"].get(key)
        if fig is not None:
            ci = f"[{_fmt(fig['low'])}, {_fmt(fig['high'])}]"
            table.add_row(HEADLINE[key], _fmt(fig["point"]), ci)
    out.print(table)
    line = behavior_line(run_dir)
    if line:
        out.print(line, highlight=False)
    _render_absent(run_dir, out)
    render_sanity(run_dir, out=out)
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


def _render_absent(run_dir: str | Path, out: Console) -> None:
    absent = families_absent(run_dir)
    if absent:
        out.print(f"{Path(run_dir).name}: configured main families absent from the run: "
                  f"{', '.join(absent)} (complete-family sets use the families present)",
                  highlight=False, soft_wrap=True)
