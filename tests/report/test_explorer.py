"""The fact explorer file: inert model text, safe inline JSON, exact prompts, several runs."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest
from report_runs import HOSTILE, XSS, hostile_tiny_run, page_data, synthetic_run, tiny_run

from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.generate.prompts import build_prompt
from fks.report.build import build_report
from fks.report.explorer import explorer_path, safe_json


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cfg")
    (d / "metrics.yaml").write_text("bootstrap: {n_resamples: 50}\n")
    return load_configs([d / "metrics.yaml"])


def prompts_of(data: dict) -> dict[str, str | None]:
    q = data["queries"]
    out = {}
    for i, qid in enumerate(q["id"]):
        t = q["template"][i]
        tmpl = None if t < 0 else data["templates"][t]
        out[qid] = (tmpl if tmpl is None or q["text"][i] is None
                    else tmpl.replace("\u0000", q["text"][i], 1))
    return out


def answers_of(data: dict, run: int = 0) -> dict[str, str]:
    a = data["per_run"][run]["answers"]
    return {data["queries"]["id"][q]: raw for q, raw in zip(a["query"], a["raw"], strict=True)}


def test_safe_json_cannot_close_the_script_element():
    text = safe_json({"a": HOSTILE, "<b>": XSS})
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == {"a": HOSTILE, "<b>": XSS}


def test_explorer_beside_the_report_with_inert_model_text(tmp_path, tiny_benchmark_dir, configs):
    run = hostile_tiny_run(tmp_path, tiny_benchmark_dir, iss_layers=True)
    report = build_report([run], configs=configs)
    explorer = run / "explorer.html"
    assert explorer_path(report) == explorer and explorer.is_file()
    rhtml = report.read_text()
    assert '<a href="explorer.html">' in rhtml
    assert re.search(r"<script", rhtml, re.I) is None  # the report itself stays script-free

    html = explorer.read_text()
    # model text never appears raw: no third script tag, no closing tag but ours, no handler
    assert XSS not in html and "<img" not in html
    assert len(re.findall(r"<script", html, re.I)) == 2
    assert len(re.findall(r"</script", html, re.I)) == 2
    assert "\u2028" not in html and "\u2029" not in html
    assert "innerHTML" not in html and "outerHTML" not in html and "insertAdjacentHTML" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    # the CSP admits exactly the page's own script, by hash
    code = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(code) == 1
    digest = base64.b64encode(hashlib.sha256(code[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html and "default-src 'none'" in html

    data = page_data(html)
    answers = answers_of(data)
    assert XSS in answers.values() and HOSTILE in answers.values()  # restored by JSON.parse
    # exact prompts: every benchmark query, rebuilt from its template, equals build_prompt
    bench = load_benchmark(tiny_benchmark_dir)
    prompts = prompts_of(data)
    assert len(prompts) == len(bench.queries)
    for q in bench.queries:
        assert prompts[q.query_id] == build_prompt(q)
    assert set(answers) == {q.query_id for q in bench.queries}
    assert data["benchmark_note"] is None
    # the hand-written records carry prompt_version "test-v1": the page says the prompts shown
    # are rebuilt with the current version
    assert data["runs"][0]["notes"] == ["the run recorded prompt version test-v1; the prompts "
                                        "shown are rebuilt with fks-prompt-v1"]


def test_the_fact_columns_and_query_blocks(tmp_path, tiny_benchmark_dir, configs):
    run = tiny_run(tmp_path, tiny_benchmark_dir, iss_layers=True, unstable=True)
    build_report([run], configs=configs)
    data = page_data((run / "explorer.html").read_text())
    S, facts = data["strings"], data["facts"]
    assert facts["id"] == ["fact_000001", "fact_000002", "fact_000003", "fact_000004"]
    assert facts["subject"][3] == "Airbus A320" and facts["object"][0] == "Paris"
    assert facts["copy"] == [0, 0, 0, 1]  # "Airbus" is in "Airbus A320"
    per = {json.loads(x)["fact_id"]: json.loads(x)
           for x in (run / "metrics" / "behavioral_per_fact.jsonl").read_text().splitlines()}
    f = data["per_run"][0]["facts"]
    for i, fid in enumerate(facts["id"]):
        assert S[f["group"][i]] == per[fid]["behavior_group"]
        assert f["bcs"][i] == pytest.approx(per[fid]["bcs"], abs=1e-4)
        assert f["anchor"][i] == float(per[fid]["anchor_correct"])
    assert S[f["group"][1]] == "Stable Wrong" and S[f["group"][2]] == "Unstable"
    assert data["per_run"][0]["iss_layers"] == {
        "layers": [2, 3], "values": [[0.0, 0.1], [0.2, 0.3], [0.4, 0.5], [0.6, 0.7]]}
    # blocks from each query's own booleans
    q = data["queries"]
    block = {S[q["family"][i]]: data["blocks"][q["block"][i]] for i in range(len(q["id"]))}
    assert block["anchor"] == block["multilingual"] == "main"
    assert block["recognition"] == "recognition" and block["reverse"] == "reverse"
    a = data["per_run"][0]["answers"]
    row = a["query"].index(q["id"].index("query_00000001"))
    assert (S[a["label"][row]], S[a["cluster"][row]], S[a["correctness"][row]]) == (
        "correct", "GOLD", "CORRECT")


def test_several_runs_side_by_side_and_another_benchmark_left_out(tmp_path, configs):
    a = synthetic_run(tmp_path, "a", model="model-a", seed=1)
    b = synthetic_run(tmp_path, "b", model="model-b", seed=2, shift=0.1)
    c = synthetic_run(tmp_path, "c", model="model-c", seed=3, checksum="other-bench")
    out = build_report([a, b, c], configs=configs, out=tmp_path / "all.html", allow_mixed=True)
    explorer = tmp_path / "all_explorer.html"
    assert '<a href="all_explorer.html">' in out.read_text()
    data = page_data(explorer.read_text())
    assert [r["label"] for r in data["runs"]] == ["model-a", "model-b"]
    assert len(data["left_out"]) == 1 and data["left_out"][0].startswith("model-c")
    # no benchmark path in these manifests: answers shown, prompts unavailable, said so
    assert data["benchmark_note"].startswith("prompts unavailable")
    assert set(data["queries"]["template"]) == {-1}
    assert len(data["facts"]["id"]) == 30 and len(data["queries"]["id"]) == 60
    for r in range(2):
        assert len(data["per_run"][r]["answers"]["query"]) == 60
        kts = data["per_run"][r]["facts"]["kts_id"]
        assert all(v is not None and 0 <= v <= 1 for v in kts)  # from the stored centroids
    fa, fb = data["per_run"][0]["facts"]["bcs"], data["per_run"][1]["facts"]["bcs"]
    assert fa != fb  # two models, two columns of figures


def test_no_explorer_flag(tmp_path, configs):
    run = synthetic_run(tmp_path, internal=False, extras=False)
    report = build_report([run], configs=configs, explorer_on=False)
    assert not (run / "explorer.html").exists()
    assert "explorer.html" not in report.read_text()
