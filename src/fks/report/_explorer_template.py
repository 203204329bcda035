# ruff: noqa: E501  (HTML, CSS and JavaScript lines)
"""The page of the fact explorer: shell, CSS and vanilla JavaScript (no library, no network).

:func:`fks.report.explorer.render_explorer` fills the ``@@NAME@@`` slots of
:data:`EXPLORER_SHELL` in one pass. The script inserts every string it shows with
``textContent`` or text nodes (never ``innerHTML``), and the Content-Security-Policy admits it
by its sha256 only, so a ``<script>`` smuggled into the data could not run even if it reached
the DOM as markup.
"""

EXPLORER_SHELL = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src '@@SCRIPT_HASH@@'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>@@TITLE@@</title>
<style>
@@CSS@@
</style>
</head>
<body>
<header>
<h1>@@TITLE@@</h1>
<p class="note">@@REPORT_LINK@@ <span id="meta"></span></p>
<div id="notes"></div>
</header>
<main>
<section id="list">
<div id="filters">
<label id="run-pick">Figures of <select id="f-run"></select></label>
<label>Group <select id="f-group"></select></label>
<label>Relation <select id="f-relation"></select></label>
<label>Copy <select id="f-copy"><option value="">all</option><option value="0">real</option><option value="1">copy</option></select></label>
<label>Anchor <select id="f-anchor"><option value="">all</option><option value="1">correct</option><option value="0">wrong</option><option value="none">no anchor</option></select></label>
<label>Search <input id="f-text" type="search" placeholder="subject, object or fact id" size="22"></label>
</div>
<p class="note" id="count"></p>
<div class="scroll"><table id="facts"><thead><tr id="facts-head"></tr></thead><tbody id="facts-body"></tbody></table></div>
<div id="pager"><button id="prev" type="button">previous</button> <span id="page"></span> <button id="next" type="button">next</button></div>
</section>
<section id="detail"><p class="note">Click a fact to see every query, prompt and answer.</p></section>
</main>
<script type="application/json" id="fks-data">@@DATA@@</script>
<script>@@JS@@</script>
</body>
</html>
"""

EXPLORER_CSS = """
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 0; color: #222; font-size: 14px; display: flex; flex-direction: column; height: 100vh; }
header { padding: .5em 1em .3em; border-bottom: 2px solid #444; }
h1 { font-size: 1.25em; margin: .2em 0; }
h2 { font-size: 1.1em; margin: .2em 0 .4em; }
h3 { font-size: 1em; margin: 1.1em 0 .3em; border-bottom: 1px solid #bbb; }
h4 { font-size: .92em; margin: .8em 0 .2em; color: #444; }
.note { color: #555; font-size: .85em; margin: .2em 0; }
.warn { color: #8a6d3b; background: #fcf8e3; border: 1px solid #faebcc; padding: .2em .6em; margin: .2em 0; font-size: .85em; }
main { display: grid; grid-template-columns: minmax(0, 50fr) minmax(0, 50fr); gap: 0; flex: 1 1 auto; min-height: 30em; }
#list { padding: .5em 1em; border-right: 1px solid #ccc; display: flex; flex-direction: column; min-height: 0; }
#detail { padding: .5em 1em 2em; overflow: auto; }
#filters { display: flex; flex-wrap: wrap; gap: .3em .9em; font-size: .88em; }
#filters select, #filters input { font-size: 1em; }
.scroll { overflow: auto; flex: 1 1 auto; min-height: 0; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: .86em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; position: sticky; top: 0; }
#facts { width: 100%; font-size: .82em; }
#facts td, #facts th { padding: 2px 4px; }
#facts td.num, #facts td:nth-child(5), #facts td:nth-child(6), #facts td:nth-child(11) { white-space: nowrap; }
#facts th { cursor: pointer; user-select: none; white-space: nowrap; }
#facts th.sorted::after { content: " \\25B4"; }
#facts th.sorted.desc::after { content: " \\25BE"; }
#facts td.num { text-align: right; font-variant-numeric: tabular-nums; }
#facts tbody tr { cursor: pointer; }
#facts tbody tr:hover { background: #eef4fb; }
#facts tbody tr.selected { background: #d6e6f7; }
#pager { margin: .4em 0 0; font-size: .88em; }
.group { padding: 0 5px; border-radius: 3px; white-space: nowrap; }
.g-stable-correct { background: #d7f0d8; } .g-stable-wrong { background: #f8d4d4; }
.g-stable-abstention { background: #e4e4e4; } .g-unstable { background: #fde7c2; }
.g-stable-multiple, .g-stable-review { background: #e4dcf5; } .g-unscorable { background: #eee; color: #666; }
.c-correct { color: #1b6e20; font-weight: 600; } .c-incorrect { color: #b71c1c; font-weight: 600; }
.c-abstain { color: #616161; font-weight: 600; } .c-other { color: #8a5a00; font-weight: 600; }
pre { margin: 0; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .95em; white-space: pre-wrap; word-break: break-word; }
.prompt { background: #f4f6f8; padding: 2px 4px; }
.answer { background: #fffbe6; padding: 2px 4px; border-left: 3px solid #e0c060; }
.empty { color: #999; font-style: italic; }
.qmeta { color: #555; font-size: .9em; }
.score { font-size: .9em; margin-top: 2px; }
table.queries { width: 100%; }
table.queries td.q { width: 40%; }
table.figs td, table.figs th { text-align: right; } table.figs td:first-child, table.figs th:first-child { text-align: left; }
svg text { font-size: 10px; fill: #444; }
.legend span { display: inline-block; margin-right: 1em; font-size: .85em; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
@media (max-width: 900px) { body { display: block; height: auto; } main { display: block; } .scroll { max-height: 60vh; } }
"""

EXPLORER_JS = r"""
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("fks-data").textContent);
  const S = D.strings, F = D.facts, Q = D.queries, R = D.runs, P = D.per_run;
  const nF = F.id.length, nQ = Q.id.length, nR = R.length;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
  const BLOCK_TITLES = {main: "Main condition families", recognition: "Recognition queries", reverse: "Reverse queries", other: "Other queries"};
  const PAGE = 100;
  const $ = (id) => document.getElementById(id);

  // fact -> its query rows (benchmark order); run -> (query row -> answer row)
  const factQueries = Array.from({length: nF}, () => []);
  for (let i = 0; i < nQ; i++) factQueries[Q.fact[i]].push(i);
  const answerOf = P.map((p) => {
    const m = new Int32Array(nQ).fill(-1);
    p.answers.query.forEach((q, k) => { m[q] = k; });
    return m;
  });
  const lower = {subject: F.subject.map((s) => s.toLowerCase()), object: F.object.map((s) => s.toLowerCase()), id: F.id.map((s) => s.toLowerCase())};

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of kids) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of kids) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const fmt = (v) => (v === null || v === undefined) ? "" : Number(v).toFixed(3);
  const slug = (s) => s.toLowerCase().replace(/[^a-z]+/g, "-");
  const anchorText = (v) => v === null ? "" : (v ? "correct" : "wrong");
  function groupChip(g) { return g ? el("span", {class: "group g-" + slug(g)}, g) : el("span", {class: "empty"}, "none"); }
  function corrClass(c) {
    return {CORRECT: "c-correct", INCORRECT: "c-incorrect", ABSTAIN: "c-abstain"}[c] || "c-other";
  }
  function prompt(q) {
    const t = Q.template[q];
    if (t < 0) return null;
    const tmpl = D.templates[t], text = Q.text[q];
    return text === null ? tmpl : tmpl.replace("\u0000", () => text);
  }

  // ------------------------------------------------------------------ the fact table
  const COLS = [
    {key: "id", label: "fact"}, {key: "subject", label: "subject"}, {key: "relation", label: "relation"},
    {key: "object", label: "object"}, {key: "copy", label: "copy"}, {key: "group", label: "group"},
    {key: "bcs", label: "BCS", num: true}, {key: "bes", label: "BES", num: true}, {key: "iss", label: "ISS", num: true},
    {key: "kts_id", label: "KTS-ID", num: true, title: "the fact's KTS identification rate"},
    {key: "anchor", label: "anchor", title: "anchor correctness"}];
  const state = {run: 0, sort: "id", dir: 1, page: 0, selected: -1};

  function value(key, i) {
    const p = P[state.run].facts;
    switch (key) {
      case "id": return F.id[i];
      case "subject": return F.subject[i];
      case "object": return F.object[i];
      case "relation": return S[F.relation[i]];
      case "copy": return F.copy[i];
      case "group": return S[p.group[i]] || null;
      default: return p[key][i];
    }
  }
  function shown(key, i) {
    const v = value(key, i);
    if (key === "copy") return v ? "copy" : "real";
    if (key === "anchor") return anchorText(v);
    if (key === "group") return groupChip(v);
    return COLS.find((c) => c.key === key).num ? fmt(v) : (v === null ? "" : String(v));
  }
  function filtered() {
    const g = $("f-group").value, rel = $("f-relation").value, copy = $("f-copy").value;
    const anc = $("f-anchor").value, text = $("f-text").value.trim().toLowerCase();
    const p = P[state.run].facts, out = [];
    for (let i = 0; i < nF; i++) {
      if (g !== "" && S[p.group[i]] !== g) continue;
      if (rel !== "" && S[F.relation[i]] !== rel) continue;
      if (copy !== "" && String(F.copy[i]) !== copy) continue;
      if (anc !== "" && (anc === "none" ? p.anchor[i] !== null : String(p.anchor[i]) !== anc)) continue;
      if (text && !(lower.subject[i].includes(text) || lower.object[i].includes(text) || lower.id[i].includes(text))) continue;
      out.push(i);
    }
    const key = state.sort, dir = state.dir;
    const vals = new Map(out.map((i) => [i, value(key, i)]));
    out.sort((a, b) => {
      const x = vals.get(a), y = vals.get(b);
      const xn = x === null || x === "", yn = y === null || y === "";
      if (xn || yn) return xn === yn ? a - b : (xn ? 1 : -1);  // missing values last
      return x < y ? -dir : x > y ? dir : a - b;
    });
    return out;
  }
  function renderTable() {
    const rows = filtered(), pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const body = $("facts-body");
    body.replaceChildren();
    for (const i of rows.slice(state.page * PAGE, (state.page + 1) * PAGE)) {
      const tr = el("tr", {"data-fact": F.id[i], tabindex: "0", class: i === state.selected ? "selected" : ""});
      for (const c of COLS) tr.append(el("td", {class: c.num ? "num" : ""}, shown(c.key, i)));
      tr.addEventListener("click", () => openFact(i));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") openFact(i); });
      body.append(tr);
    }
    $("count").textContent = rows.length + " of " + nF + " facts" + (nR > 1 ? " (figures of " + R[state.run].label + ")" : "");
    $("page").textContent = "page " + (state.page + 1) + " of " + pages;
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
    for (const th of $("facts-head").children) {
      const on = th.dataset.key === state.sort;
      th.classList.toggle("sorted", on);
      th.classList.toggle("desc", on && state.dir < 0);
    }
  }
  function fillSelect(sel, values, allLabel) {
    const keep = sel.value;
    sel.replaceChildren(el("option", {value: ""}, allLabel));
    for (const v of values) sel.append(el("option", {value: v}, v));
    sel.value = values.includes(keep) ? keep : "";
  }
  function fillGroups() {
    // every group, present or not, so that a filter survives a change of run
    const present = new Set(P.flatMap((p) => p.facts.group.map((g) => S[g])).filter((g) => g));
    const order = D.groups.concat([...present].filter((g) => !D.groups.includes(g)).sort());
    fillSelect($("f-group"), order, "all");
  }

  // ------------------------------------------------------------------ one fact
  function issChart(f) {
    const series = P.map((p, r) => ({r, layers: p.iss_layers.layers, v: p.iss_layers.values[f]}))
      .filter((s) => s.v && s.layers.length);
    if (!series.length) return el("p", {class: "note"}, "ISS by layer: not run for this fact (no iss_per_fact_layer.jsonl)");
    const W = 380, H = 150, L = 34, B = 30, T = 8, Rm = 10;
    const all = series.flatMap((s) => s.layers);
    const x0 = Math.min(...all), x1 = Math.max(...all);
    const clip = (v) => Math.max(-1, Math.min(1, v));
    const lo = Math.min(0, ...series.flatMap((s) => s.v.filter((v) => v !== null).map(clip)));
    const X = (l) => L + (x1 === x0 ? (W - L - Rm) / 2 : (l - x0) / (x1 - x0) * (W - L - Rm));
    const Y = (v) => T + (1 - clip(v)) / (1 - lo) * (H - T - B);
    const g = svg("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "ISS by layer"});
    for (const t of [lo, (lo + 1) / 2, 1].concat(lo < 0 ? [0] : [])) {
      g.append(svg("line", {x1: L, x2: W - Rm, y1: Y(t), y2: Y(t), stroke: t === 0 ? "#999" : "#e3e3e3"}));
      g.append(svg("text", {x: L - 4, y: Y(t) + 3, "text-anchor": "end"}, t.toFixed(1)));
    }
    const ticks = [...new Set(all)].sort((a, b) => a - b);
    const step = Math.max(1, Math.ceil(ticks.length / 10));
    ticks.forEach((l, k) => { if (k % step === 0) g.append(svg("text", {x: X(l), y: H - B + 12, "text-anchor": "middle"}, l)); });
    g.append(svg("text", {x: (L + W - Rm) / 2, y: H - 3, "text-anchor": "middle"}, "layer"));
    g.append(svg("text", {x: 10, y: T + (H - T - B) / 2, "text-anchor": "middle", transform: "rotate(-90 10 " + (T + (H - T - B) / 2) + ")"}, "ISS"));
    for (const s of series) {
      const c = COLORS[s.r % COLORS.length];
      const pts = s.layers.map((l, k) => [l, s.v[k]]).filter((p) => p[1] !== null);
      g.append(svg("polyline", {points: pts.map((p) => X(p[0]) + "," + Y(p[1])).join(" "), fill: "none", stroke: c, "stroke-width": 1.8}));
      for (const [l, v] of pts) {
        g.append(svg("circle", {cx: X(l), cy: Y(v), r: 2.6, fill: c}, svg("title", {}, R[s.r].label + ", layer " + l + ": ISS " + fmt(v))));
      }
    }
    const box = el("div", {class: "chart"}, el("h4", {}, "ISS by layer" + (series.some((s) => s.v.some((v) => v !== null && Math.abs(v) > 1)) ? " (shown clipped to [-1, 1])" : "")), g);
    if (nR > 1) box.append(el("div", {class: "legend"}, ...series.map((s) => el("span", {}, el("span", {class: "swatch", style: "background:" + COLORS[s.r % COLORS.length]}), R[s.r].label))));
    return box;
  }
  function figures(f) {
    const t = el("table", {class: "figs"}, el("tr", {}, ...["run", "group", "BCS", "BES", "ISS", "KTS-ID", "anchor", "modal cluster"].map((h) => el("th", {}, h))));
    P.forEach((p, r) => {
      const x = p.facts;
      t.append(el("tr", {}, el("td", {}, R[r].label), el("td", {}, groupChip(S[x.group[f]])), el("td", {}, fmt(x.bcs[f])),
        el("td", {}, fmt(x.bes[f])), el("td", {}, fmt(x.iss[f])), el("td", {}, fmt(x.kts_id[f])),
        el("td", {}, anchorText(x.anchor[f])), el("td", {}, S[x.modal[f]])));
    });
    return t;
  }
  function answerCell(r, q) {
    const k = answerOf[r][q];
    if (k < 0) return el("td", {}, el("span", {class: "empty"}, "no record"));
    const a = P[r].answers, raw = a.raw[k];
    const cluster = S[a.cluster[k]], meaning = S[a.meaning[k]], corr = S[a.correctness[k]];
    return el("td", {class: "ans"},
      raw === "" ? el("span", {class: "empty"}, "(empty answer)") : el("pre", {class: "answer"}, raw),
      el("div", {class: "score"}, "score ", el("b", {}, S[a.label[k]] || "n/a"),
        " \u00b7 cluster ", el("b", {}, cluster || "n/a"), meaning && meaning !== cluster ? " (" + meaning + ")" : null,
        " \u00b7 ", corr ? el("span", {class: corrClass(corr)}, corr) : el("span", {class: "empty"}, "not judged")));
  }
  function queryTable(rows) {
    const head = el("tr", {}, el("th", {}, "query and exact prompt"), ...R.map((x) => el("th", {}, nR > 1 ? x.label : "answer, score, cluster, correctness")));
    const t = el("table", {class: "queries"}, head);
    for (const q of rows) {
      const p = prompt(q);
      t.append(el("tr", {"data-query": Q.id[q]},
        el("td", {class: "q"},
          el("div", {class: "qmeta"}, Q.id[q] + " \u00b7 " + S[Q.family[q]] + " \u00b7 " + S[Q.variant[q]] + " \u00b7 " + S[Q.language[q]] + (S[Q.gold[q]] ? " \u00b7 gold: " : ""), S[Q.gold[q]] ? el("b", {}, S[Q.gold[q]]) : null),
          p === null ? el("span", {class: "empty"}, "prompt unavailable") : el("pre", {class: "prompt"}, p)),
        ...R.map((_, r) => answerCell(r, q))));
    }
    return t;
  }
  function openFact(f, keepHash) {
    state.selected = f;
    for (const tr of $("facts-body").children) tr.classList.toggle("selected", tr.dataset.fact === F.id[f]);
    const d = $("detail");
    d.replaceChildren();
    d.append(el("h2", {}, F.id[f] + ": " + (F.subject[f] || "?") + " \u2192 " + S[F.relation[f]] + " \u2192 " + (F.object[f] || "?")),
      el("p", {class: "note"}, F.copy[f] ? "copy-answerable: the object appears in the subject's surface" : "real: the object is not in the subject's surface"),
      figures(f), issChart(f));
    const qs = factQueries[f];
    D.blocks.forEach((b, bi) => {
      const rows = qs.filter((q) => Q.block[q] === bi);
      if (!rows.length) return;
      const sec = el("section", {class: "block", "data-block": b}, el("h3", {}, BLOCK_TITLES[b] + " (" + rows.length + ")"));
      if (b === "main") {
        const fams = [...new Set(rows.map((q) => Q.family[q]))];
        for (const fam of fams) sec.append(el("h4", {}, S[fam]), queryTable(rows.filter((q) => Q.family[q] === fam)));
      } else sec.append(queryTable(rows));
      d.append(sec);
    });
    if (!qs.length) d.append(el("p", {class: "warn"}, "no query records for this fact"));
    if (!keepHash) history.replaceState(null, "", "#fact=" + encodeURIComponent(F.id[f]));
    d.scrollTop = 0;
  }

  // ------------------------------------------------------------------ wiring
  function init() {
    $("meta").textContent = nF + " facts, " + nQ + " queries, " + nR + " run(s); generated " + D.generated_at + " by fks " + D.fks_version + " (prompts " + D.prompt_version + "). Model text is shown as text.";
    const notes = $("notes");
    if (D.benchmark_note) notes.append(el("p", {class: "warn"}, D.benchmark_note));
    for (const x of D.left_out) notes.append(el("p", {class: "warn"}, "left out: " + x));
    R.forEach((x) => x.notes.forEach((n) => notes.append(el("p", {class: "warn"}, x.label + ": " + n))));
    const head = $("facts-head");
    for (const c of COLS) {
      const th = el("th", {"data-key": c.key, title: c.title || ("sort by " + c.label)}, c.label);
      th.addEventListener("click", () => {
        state.dir = state.sort === c.key ? -state.dir : (c.num ? -1 : 1);
        state.sort = c.key;
        renderTable();
      });
      head.append(th);
    }
    const runSel = $("f-run");
    R.forEach((x, r) => runSel.append(el("option", {value: String(r)}, x.label)));
    if (nR < 2) $("run-pick").style.display = "none";
    runSel.addEventListener("change", () => { state.run = Number(runSel.value); fillGroups(); renderTable(); if (state.selected >= 0) openFact(state.selected, true); });
    fillGroups();
    fillSelect($("f-relation"), [...new Set(F.relation.map((r) => S[r]))].sort(), "all");
    for (const id of ["f-group", "f-relation", "f-copy", "f-anchor"]) $(id).addEventListener("change", () => { state.page = 0; renderTable(); });
    $("f-text").addEventListener("input", () => { state.page = 0; renderTable(); });
    $("prev").addEventListener("click", () => { state.page -= 1; renderTable(); });
    $("next").addEventListener("click", () => { state.page += 1; renderTable(); });
    renderTable();
    const m = /^#fact=(.+)$/.exec(location.hash);
    if (m) {
      const f = F.id.indexOf(decodeURIComponent(m[1]));
      if (f >= 0) openFact(f, true);
    }
    document.body.dataset.ready = "1";
    window.fksExplorerReadyMs = performance.now();
  }
  init();
})();
"""
