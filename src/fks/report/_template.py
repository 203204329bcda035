# ruff: noqa: E501  (HTML lines)
"""The jinja2 template of the HTML report (kept in Python so it ships with the package).

Autoescaping is on (:func:`fks.report.html.render`): every value, model text included, is
HTML-escaped, and nothing is marked safe. Images are ``data:image/png;base64`` URIs built by
:mod:`fks.report.plots` (escaping leaves them unchanged).
"""

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 2em auto; max-width: 1200px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; margin-top: 2em; }
h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 0.86em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; }
td.text, th.text { text-align: left; }
.note { color: #555; font-size: 0.85em; max-width: 60em; }
.notrun { color: #8a6d3b; background: #fcf8e3; border: 1px solid #faebcc; padding: .4em .8em;
          display: inline-block; }
.pass { color: #fff; background: #2e7d32; padding: 1px 6px; border-radius: 3px; }
.fail { color: #fff; background: #c62828; padding: 1px 6px; border-radius: 3px; }
.alert { color: #fff; background: #c62828; padding: .5em .9em; margin: .4em 0;
         border-radius: 3px; }
.na { color: #fff; background: #757575; padding: 1px 6px; border-radius: 3px; }
.missing { color: #8a6d3b; }
td.hash { font-family: ui-monospace, Menlo, Consolas, monospace; word-break: break-all;
          max-width: 22em; }
img { max-width: 100%; height: auto; margin: .5em 0; }
.answer { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap;
          background: #f7f7f7; text-align: left; max-width: 40em; }
nav ul { columns: 2; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="note">Generated {{ generated_at }} by fks {{ version }}. Intervals: 95 % relation-clustered
percentile bootstrap (spec §14.1; {{ n_resamples }} replicates, seed {{ seed }}). All model text below
is shown escaped.</p>
{% for a in alerts %}<p class="alert">{{ a }}</p>
{% endfor %}

<nav><ul>
{% if explorer_href %}<li><a href="{{ explorer_href }}">Fact explorer: every fact, query and answer</a></li>{% endif %}
<li><a href="#details">Run details</a></li>
{% if runs|length > 1 %}<li><a href="#leaderboard">Leaderboard and paired differences</a></li>{% endif %}
<li><a href="#overview">Figures across runs</a></li>
{% for run in runs %}<li><a href="#run-{{ loop.index }}">{{ run.label }}</a></li>{% endfor %}
</ul></nav>

{% macro table(t) -%}
{% if t.rows %}
<h3>{{ t.title }}</h3>
<table>
<tr>{% for h in t.header %}<th class="{{ 'text' if loop.index0 in t.text_cols else '' }}">{{ h }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for c in row %}<td class="{{ 'text' if loop.index0 in t.text_cols else '' }}">{{ c }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% if t.note %}<p class="note">{{ t.note }}</p>{% endif %}
{% else %}
<h3>{{ t.title }}</h3><p class="notrun">not run{% if t.note %}: {{ t.note }}{% endif %}</p>
{% endif %}
{%- endmacro %}

{% macro status(s) -%}
{% if s == "pass" %}<span class="pass">pass</span>{% elif s == "fail" %}<span class="fail">fail</span>{% else %}<span class="na">{{ s }}</span>{% endif %}
{%- endmacro %}

<h2 id="details">Run details</h2>
<table id="run-details">
<tr>{% for h in details.header %}<th class="text">{{ h }}</th>{% endfor %}</tr>
{% for row in details.rows %}<tr>{% for c in row %}<td class="text{{ ' hash' if c.hash else '' }}">{% if c.value is not none %}{{ c.value }}{% else %}<span class="missing">n/a{% if c.reason %}: {{ c.reason }}{% endif %}</span>{% endif %}</td>{% endfor %}</tr>
{% endfor %}
</table>
<p class="note">From each run's evaluation_manifest.json; the same fields, with the figures, are in RUN/results.json.</p>

{% if runs|length > 1 %}
<h2 id="leaderboard">Leaderboard and paired differences</h2>
{% if leaderboard_note %}<p class="alert">{{ leaderboard_note }}</p>{% endif %}
{% for t in leaderboard %}{{ table(t) }}{% endfor %}
{% if forest %}<img alt="leaderboard forest plot" src="{{ forest }}">{% endif %}
<h3>Paired differences against {{ reference }}</h3>
{% if deltas %}
<p class="note">Delta = model - {{ reference }} on the same relation and fact draws (spec §14.2);
an interval excluding 0 marks a difference the bootstrap supports.</p>
{% for t in deltas %}{{ table(t) }}{% endfor %}
{% endif %}
{% for n in delta_notes %}<p class="notrun">{{ n }}</p>{% endfor %}
{% endif %}

<h2 id="overview">Figures across runs</h2>
<h3>Behaviour groups</h3>
{% if behavior_plot %}<img alt="behaviour groups" src="{{ behavior_plot }}">{% else %}<p class="notrun">not run: no behavioural metrics</p>{% endif %}
<h3>ISS by layer</h3>
{% if iss_plot %}<img alt="ISS by layer" src="{{ iss_plot }}">{% else %}<p class="notrun">not run: no per-layer ISS (iss_per_fact_layer.jsonl)</p>{% endif %}

{% for run in runs %}
<h2 id="run-{{ loop.index }}">{{ run.label }}</h2>
<p class="note">Run directory: {{ run.run_dir }}. Benchmark checksum: {{ run.checksum or "not recorded" }}.</p>
<table>
<tr><th class="text">stage</th><th class="text">status</th></tr>
{% for name, st in run.stages %}<tr><td class="text">{{ name }}</td><td class="text">{{ st }}</td></tr>{% endfor %}
</table>

{% for t in run.tables %}{{ table(t) }}
{% if t.name == "kts_pairs" %}{% for img in run.kts_heatmaps %}<img alt="KTS heatmap" src="{{ img }}">{% endfor %}{% endif %}
{% if t.name == "per_relation" and run.relation_plot %}<img alt="per-relation results" src="{{ run.relation_plot }}">{% endif %}
{% endfor %}

<h3>Sanity checks (spec §18)</h3>
{% if run.sanity %}
<p class="note">Layer {{ run.sanity.layer }}, selection {{ run.sanity.selection }};
{{ run.sanity.summary }}</p>
<table>
<tr><th class="text">check</th><th class="text">status</th><th class="text">criteria</th><th class="text">numbers</th></tr>
{% for c in run.sanity.checks %}
<tr><td class="text">{{ c.name }}</td><td class="text">{{ status(c.status) }}</td>
<td class="text">{% for k, v in c.criteria %}{{ k }}: {{ v }}<br>{% endfor %}</td>
<td class="text">{% for k, v in c.numbers %}{{ k }} = {{ v }}<br>{% endfor %}</td></tr>
{% endfor %}
</table>
{% else %}<p class="notrun">not run: no sanity_checks.json (internal metrics)</p>{% endif %}

<h3>Calibration</h3>
{% if run.calibration %}
{% for c in run.calibration %}
{% if c.image %}<img alt="reliability diagram" src="{{ c.image }}">{% endif %}
{{ table(c.table) }}
{% endfor %}
{% else %}<p class="notrun">not run: no calibration_summary.json</p>{% endif %}

{% if run.judge_validation %}
<h3>Judge validation (spec §18.6)</h3>
<p class="note">Against the hand-labelled answers given with --labels; pairs: within-fact cluster-pair agreement; BCS gap: mean per-fact |BCS(fks) - BCS(hand)|, with its 95 % bootstrap interval over facts.</p>
<table>
<tr><th class="text">split</th><th class="text">labels of</th><th>n</th><th>kind</th><th>extraction</th><th>pairs</th><th>correctness</th><th>&kappa;</th><th>&alpha;</th><th>BCS gap</th></tr>
{% for v in run.judge_validation %}<tr><td class="text">{{ v.split }}</td><td class="text">{{ v.who }}</td><td>{{ v.n }}</td>{% for x in [v.kind, v.extraction, v.pairs, v.accuracy, v.kappa, v.alpha] %}<td>{{ "%.3f"|format(x) if x is not none else "n/a" }}</td>{% endfor %}<td>{{ "%.3f"|format(v.bcs_gap) if v.bcs_gap is not none else "n/a" }}{% if v.bcs_gap_ci95 %} [{{ "%.3f"|format(v.bcs_gap_ci95[0]) }}, {{ "%.3f"|format(v.bcs_gap_ci95[1]) }}]{% endif %}</td></tr>
{% endfor %}
</table>
{% endif %}

<h3>Example answers by behaviour group</h3>
{% if run.examples %}
<table>
<tr><th class="text">group</th><th class="text">fact</th><th class="text">relation</th><th class="text">modal cluster</th><th class="text">family</th><th class="text">correctness</th><th class="text">raw response</th></tr>
{% for e in run.examples %}
<tr><td class="text">{{ e.group }}</td><td class="text">{{ e.fact_id }}</td><td class="text">{{ e.relation }}</td>
<td class="text">{{ e.modal }}</td><td class="text">{{ e.family }}</td><td class="text">{{ e.correctness }}</td>
<td class="answer">{{ e.raw_response }}</td></tr>
{% endfor %}
</table>
{% else %}<p class="notrun">not run: {{ run.examples_note }}</p>{% endif %}
{% endfor %}
</body>
</html>
"""
