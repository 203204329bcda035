"""The fact explorer: ``explorer.html`` beside ``report.html``, one page per report.

The report answers *how stable*; the explorer answers *which facts, and what did the model
say*. It is one self-contained file: the data inlined as JSON (``<script
type="application/json">``), vanilla JavaScript, no network (a Content-Security-Policy allows
only the page's own script, by hash, and ``data:`` images), no CDN.

What it shows:

* a sortable, filterable table of the facts (relation, copy flag, behaviour group, BCS, BES,
  ISS, the fact's KTS identification rate, anchor correctness; free-text search on subject,
  object and fact id), with the figures of one chosen run;
* for a clicked fact: every query of every condition family, main-forward queries grouped by
  family, recognition and reverse queries in their own blocks (membership from each query's
  own ``use_for_*`` booleans), each with the exact prompt
  (:func:`fks.generate.prompts.build_prompt` on the benchmark's query), the raw answer, the
  five-label score, the cluster and the cluster's correctness; with several runs of the same
  benchmark, the answers of every run side by side;
* the fact's ISS by layer as a small inline SVG chart (one line per run; display clipped to
  [-1, 1], the table keeps the raw value).

Decisions (the spec and the issue are silent):

* A sibling file, not a section of ``report.html``: the report stays script-free (its test
  asserts that no ``<script>`` is in it at all), and the explorer's data (MBs at full scale)
  does not slow the report down. ``RUN/report.html`` gets ``RUN/explorer.html``; any other
  ``OUT.html`` gets ``OUT_explorer.html``. The report links to it.
* Runs enter the explorer when they share the first run's benchmark checksum (the same fact
  ids then mean the same facts); the others are listed as left out.
* Query rows come from ``judged.jsonl``, else ``scored.jsonl``, else ``generations.jsonl``
  (fields a stage has not added show as empty). Prompts and subject/object come from the
  benchmark named in the run manifest (``benchmark.path``); when it cannot be read, the prompt
  shows as unavailable. A run whose records carry another ``prompt_version`` than the current
  one gets a note: the prompts shown are rebuilt with the current version.
* The fact's KTS identification rate is ``KtsResult.fact_identity`` of the ``full_set``
  coverage mode (every fact over the families it has; the first mode computed otherwise):
  the mean over window layers, eligible family pairs and both directions of "the fact's own
  centroid is the nearest" (not chance-corrected).
* Size: categorical strings (relation, family, label, cluster, ...) go through one string
  table; a prompt is stored as its query text plus the index of a shared template (the
  prompt with the query text cut out; checked to rebuild the prompt exactly, else the whole
  prompt is the template); figures are rounded to 4 decimals (the page shows 3). A raw answer
  longer than :data:`MAX_ANSWER_CHARS` is cut (greedy 24-token answers never are).
* Safety: model text is untrusted. The JSON escapes ``<``, ``>``, ``&``, U+2028 and U+2029, so
  nothing in it can close the script element; the page inserts every string with
  ``textContent`` / text nodes, never ``innerHTML``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fks import __version__
from fks.errors import FksInputError
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.io import atomic_write_text, iter_jsonl
from fks.metrics.behavior import ALL_GROUPS
from fks.report._explorer_template import EXPLORER_CSS, EXPLORER_JS, EXPLORER_SHELL
from fks.report.inputs import benchmark_checksum

if TYPE_CHECKING:
    from fks.report.build import ReportRun

__all__ = [
    "EXPLORER_NAME",
    "FORMAT",
    "MAX_ANSWER_CHARS",
    "explorer_path",
    "explorer_data",
    "render_explorer",
    "safe_json",
    "write_explorer",
]

log = logging.getLogger(__name__)

EXPLORER_NAME = "explorer.html"
FORMAT = "fks-explorer-v1"
MAX_ANSWER_CHARS = 4000
#: the query-text slot of a prompt template (a character no query contains)
SLOT = "\u0000"
#: query records, most complete first
RECORD_FILES = ("judged.jsonl", "scored.jsonl", "generations.jsonl")
#: blocks of the fact view, decided from each query's own booleans
BLOCKS = ("main", "recognition", "reverse", "other")
KTS_MODES = ("full_set", "complete_family")


def explorer_path(report: str | Path) -> Path:
    """Return ``DIR/explorer.html`` for ``DIR/report.html``, else ``DIR/STEM_explorer.html``."""
    report = Path(report)
    name = EXPLORER_NAME if report.stem == "report" else f"{report.stem}_{EXPLORER_NAME}"
    return report.with_name(name)


# ============================================================================ small pieces
class _Strings:
    """One table of repeated strings; ``index(s)`` gives the position of ``s``."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._pos: dict[str, int] = {}

    def index(self, s: Any) -> int:
        s = "" if s is None else str(s)
        i = self._pos.get(s)
        if i is None:
            i = self._pos[s] = len(self.items)
            self.items.append(s)
        return i


def _num(v: Any) -> float | None:
    """Return a figure for the page: None for missing/nan, else rounded to 4 decimals."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) or math.isinf(v) else round(v, 4)


def _block(q: dict[str, Any]) -> int:
    if q.get("use_for_main_forward"):
        return BLOCKS.index("main")
    if q.get("use_for_recognition_analysis"):
        return BLOCKS.index("recognition")
    if q.get("use_for_reverse_analysis"):
        return BLOCKS.index("reverse")
    return BLOCKS.index("other")


def _records(run_dir: Path) -> tuple[str | None, Iterator[tuple[int, Any]]]:
    for name in RECORD_FILES:
        p = run_dir / name
        if p.is_file():
            return name, iter_jsonl(p)
    return None, iter(())


def _benchmark(run_dir: Path, manifest: dict[str, Any]) -> tuple[Any, str | None]:
    """Return the run's benchmark (or None) and, when it cannot be read, why."""
    from fks.data.load import load_benchmark

    path = (manifest.get("benchmark") or {}).get("path")
    if not isinstance(path, str) or not path:
        return None, "the run manifest names no benchmark path"
    cand = [Path(path)] if Path(path).is_absolute() else [Path(path), run_dir / path]
    for p in cand:
        if p.is_dir():
            try:
                return load_benchmark(p), None
            except FksInputError as exc:
                return None, f"benchmark {p} unreadable ({exc.message})"
    return None, f"benchmark {path} not found"


def _template(prompt: str, text: str) -> tuple[str, str | None]:
    """``(template, text)`` with ``template.replace(SLOT, text, 1) == prompt`` (checked)."""
    if text and SLOT not in prompt and SLOT not in text and text in prompt:
        t = prompt.replace(text, SLOT, 1)
        if t.replace(SLOT, text, 1) == prompt:
            return t, text
    return prompt, None


# ================================================================================ the data
@dataclass
class _Builder:
    """Accumulates the columnar JSON document (see :func:`explorer_data`)."""

    strings: _Strings = field(default_factory=_Strings)
    templates: _Strings = field(default_factory=_Strings)
    fact_pos: dict[str, int] = field(default_factory=dict)
    facts: dict[str, list[Any]] = field(default_factory=lambda: {
        k: [] for k in ("id", "relation", "subject", "object", "copy")})
    query_pos: dict[str, int] = field(default_factory=dict)
    queries: dict[str, list[Any]] = field(default_factory=lambda: {
        k: [] for k in ("id", "fact", "family", "variant", "language", "block", "template",
                        "text", "gold")})

    def add_fact(self, fid: str, relation: str, subject: str = "", obj: str = "",
                 copy: bool = False) -> int:
        i = self.fact_pos.get(fid)
        if i is None:
            i = self.fact_pos[fid] = len(self.facts["id"])
            for k, v in (("id", fid), ("relation", self.strings.index(relation)),
                         ("subject", subject), ("object", obj), ("copy", int(bool(copy)))):
                self.facts[k].append(v)
        return i

    def add_query(self, q: dict[str, Any], fact: int, prompt: str | None) -> int:
        i = self.query_pos.get(q["query_id"])
        if i is not None:
            return i
        i = self.query_pos[q["query_id"]] = len(self.queries["id"])
        text = str(q.get("query") or "")
        tmpl, slot_text = _template(prompt, text) if prompt is not None else (None, None)
        s = self.strings.index
        for k, v in (("id", q["query_id"]), ("fact", fact),
                     ("family", s(q.get("condition_family"))), ("variant", s(q.get("variant_id"))),
                     ("language", s(q.get("language"))), ("block", _block(q)),
                     ("template", -1 if tmpl is None else self.templates.index(tmpl)),
                     ("text", slot_text), ("gold", s(q.get("gold_canonical")))):
            self.queries[k].append(v)
        return i


def _fact_identity(r: ReportRun) -> dict[str, float]:
    for mode in (*KTS_MODES, *(m for m, _ in r.stats.fact_identity)):
        got = r.stats.fact_identity.get((mode, "all"))
        if got is not None:
            ids, rate = got
            return {str(f): float(v) for f, v in zip(ids.tolist(), rate.tolist(), strict=True)}
    return {}


def _run_facts(r: ReportRun, b: _Builder) -> dict[str, Any]:
    """Return the per-fact figures of one run, aligned with ``b.facts`` (all facts added)."""
    n = len(b.facts["id"])
    out: dict[str, list[Any]] = {k: [None] * n for k in
                                 ("group", "bcs", "bes", "iss", "kts_id", "anchor", "modal")}
    out["group"] = [b.strings.index("")] * n
    out["modal"] = [b.strings.index("")] * n
    layers: list[int] = []
    per_layer: list[Any] = [None] * n
    f = r.data.facts
    if f is not None:
        ident = _fact_identity(r)
        iss_l = r.data.iss_layers
        if iss_l is not None:
            layers = list(iss_l[0])
        for k, fid in enumerate(f.fact_ids.tolist()):
            i = b.fact_pos[fid]
            out["group"][i] = b.strings.index(f.behavior_group[k])
            out["modal"][i] = b.strings.index(f.modal_cluster[k])
            for key, src in (("bcs", "bcs"), ("bes", "bes"), ("iss", "iss"),
                             ("anchor", "anchor_accuracy")):
                out[key][i] = _num(f.values[src][k])
            out["kts_id"][i] = _num(ident.get(fid))
            if iss_l is not None:
                row = [_num(v) for v in iss_l[1][k].tolist()]
                per_layer[i] = row if any(v is not None for v in row) else None
    return {"facts": out, "iss_layers": {"layers": layers, "values": per_layer}}


def _answers(run_dir: Path, b: _Builder, include: set[str] | None,
             bench_queries: dict[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Return the run's query records as columns, and facts about them (source file, versions)."""
    cols: dict[str, list[Any]] = {k: [] for k in ("query", "raw", "label", "cluster",
                                                  "meaning", "status", "correctness")}
    source, rows = _records(run_dir)
    versions: set[str] = set()
    cut = 0
    s = b.strings.index
    for _, rec in rows:
        if not isinstance(rec, dict) or not isinstance(rec.get("query_id"), str) \
                or not isinstance(rec.get("fact_id"), str):
            continue
        fid = rec["fact_id"]
        if include is not None and fid not in include:
            continue
        if fid not in b.fact_pos:
            b.add_fact(fid, str(rec.get("relation") or ""),
                       copy=bool(rec.get("answer_in_subject_surface")))
        q = bench_queries.get(rec["query_id"])
        if q is None:  # no benchmark row: the record's own fields, no prompt
            qi = b.add_query(rec, b.fact_pos[fid], None)
        else:
            qi = b.query_pos[rec["query_id"]]
        if rec.get("prompt_version"):
            versions.add(str(rec["prompt_version"]))
        raw = rec.get("raw_response")
        raw = "" if raw is None else str(raw)
        if len(raw) > MAX_ANSWER_CHARS:
            raw, cut = raw[:MAX_ANSWER_CHARS] + " [...]", cut + 1
        for k, v in (("query", qi), ("raw", raw), ("label", s(rec.get("label"))),
                     ("cluster", s(rec.get("cluster_id"))),
                     ("meaning", s(rec.get("canonical_meaning"))),
                     ("status", s(rec.get("status") or rec.get("generation_status"))),
                     ("correctness", s(rec.get("correctness")))):
            cols[k].append(v)
    return cols, {"source": source, "prompt_versions": sorted(versions), "n_cut": cut}


def _same_benchmark(runs: Sequence[ReportRun]) -> tuple[list[ReportRun], list[str]]:
    def key(r: ReportRun) -> str | None:
        try:
            return benchmark_checksum(r.data.run_dir, r.data.manifest)
        except FksInputError:
            return None

    first = key(runs[0])
    kept, left = [runs[0]], []
    for r in runs[1:]:
        if key(r) == first:
            kept.append(r)
        else:
            left.append(f"{r.label}: another benchmark than {runs[0].label} (checksum "
                        f"{key(r) or 'not recorded'})")
    return kept, left


def explorer_data(runs: Sequence[ReportRun]) -> dict[str, Any]:
    r"""Build the explorer's JSON document of the runs (columnar; see the module docstring).

    Layout: ``strings`` (the string table; ``relation``, ``family``, ``variant``,
    ``language``, ``gold``, ``group``, ``modal``, ``label``, ``cluster``, ``meaning``,
    ``status`` and ``correctness`` are indices into it), ``templates`` (prompt templates with
    ``\\u0000`` for the query text), ``facts`` and ``queries`` (benchmark-level columns) and
    per run ``facts`` (figures per fact, ``null`` = no value), ``iss_layers`` and ``answers``
    (one row per record, ``query`` = row of ``queries``).
    """
    if not runs:
        raise FksInputError("the explorer needs at least one run", field="runs")
    kept, left = _same_benchmark(runs)
    b = _Builder()
    universe: set[str] = set()
    for r in kept:
        if r.data.facts is not None:
            universe |= set(r.data.facts.fact_ids.tolist())
    bench, why = None, "no run"
    for r in kept:
        bench, why = _benchmark(r.data.run_dir, r.data.manifest)
        if bench is not None:
            break
    bench_queries: dict[str, Any] = {}
    if bench is not None:
        for fact in bench.facts:
            if not universe or fact.fact_id in universe:
                b.add_fact(fact.fact_id, fact.relation.relation_id, fact.subject.canonical,
                           fact.object.canonical, fact.answer_in_subject_surface)
        for q in bench.queries:
            if q.fact_id in b.fact_pos:
                row = q.model_dump()
                b.add_query(row, b.fact_pos[q.fact_id], build_prompt(q))
                bench_queries[q.query_id] = row
    for r in kept:  # facts with metrics the benchmark lacks (or no benchmark at all)
        f = r.data.facts
        if f is not None:
            for k, fid in enumerate(f.fact_ids.tolist()):
                b.add_fact(fid, str(f.relation[k]), copy=bool(f.copy[k]))
    include = universe or None
    answers = [_answers(r.data.run_dir, b, include, bench_queries) for r in kept]
    per_run, meta = [], []
    for r, (cols, info) in zip(kept, answers, strict=True):
        notes = []
        if info["source"] is None:
            notes.append("no judged.jsonl, scored.jsonl or generations.jsonl: no answers")
        elif info["source"] != "judged.jsonl":
            notes.append(f"answers from {info['source']} (judged.jsonl absent): clusters and "
                         "correctness are not there yet")
        other = [v for v in info["prompt_versions"] if v != PROMPT_VERSION]
        if other:
            notes.append(f"the run recorded prompt version {', '.join(other)}; the prompts "
                         f"shown are rebuilt with {PROMPT_VERSION}")
        if info["n_cut"]:
            notes.append(f"{info['n_cut']} answers longer than {MAX_ANSWER_CHARS} characters "
                         "are cut")
        per_run.append({**_run_facts(r, b), "answers": cols})
        meta.append({"label": r.label, "model": r.data.model, "run_dir": str(r.data.run_dir),
                     "source": info["source"], "notes": notes})
    return {
        "format": FORMAT, "fks_version": __version__, "prompt_version": PROMPT_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "benchmark": None if bench is None else str(bench.root),
        "benchmark_note": None if bench is not None else f"prompts unavailable: {why}",
        "runs": meta, "left_out": left, "blocks": list(BLOCKS), "groups": list(ALL_GROUPS),
        "strings": b.strings.items, "templates": b.templates.items,
        "facts": b.facts, "queries": b.queries, "per_run": per_run,
    }


# ================================================================================ the page
def safe_json(obj: Any) -> str:
    r"""Return JSON safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` become ``\\u003c``/``\\u003e``/``\\u0026`` (so no ``</script>`` or
    ``<!--`` can appear), U+2028/U+2029 their escapes; ``JSON.parse`` restores them all.
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def render_explorer(data: dict[str, Any], *, title: str, report_href: str | None = None
                    ) -> str:
    """Return the explorer page of :func:`explorer_data`'s document."""
    digest = base64.b64encode(hashlib.sha256(EXPLORER_JS.encode()).digest()).decode()
    slots = {"TITLE": html.escape(title), "CSS": EXPLORER_CSS, "JS": EXPLORER_JS,
             "DATA": safe_json(data), "SCRIPT_HASH": f"sha256-{digest}",
             "REPORT_LINK": (f'<a href="{html.escape(report_href)}">back to the report</a>'
                             if report_href else "")}
    # one pass over the shell: text put into a slot is never scanned for slots again
    return re.sub(r"@@([A-Z_]+)@@", lambda m: slots[m.group(1)], EXPLORER_SHELL)


def write_explorer(runs: Sequence[ReportRun], out: str | Path, *,
                   report: str | Path | None = None) -> Path:
    """Write the explorer of ``runs`` to ``out`` (atomically) and return the path.

    Args:
        runs: the report's runs (the first run's benchmark decides which runs enter).
        out: the HTML file.
        report: the report it belongs to (linked back, relative to ``out``).
    """
    out = Path(out)
    data = explorer_data(runs)
    title = "fks fact explorer: " + ", ".join(m["label"] for m in data["runs"])
    href = None
    if report is not None:
        report = Path(report)
        href = report.name if report.parent.resolve() == out.parent.resolve() else None
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render_explorer(data, title=title, report_href=href))
    log.info("fact explorer of %d run(s), %d facts, %d queries -> %s", len(data["runs"]),
             len(data["facts"]["id"]), len(data["queries"]["id"]), out)
    return out
