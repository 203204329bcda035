"""The fact explorer in a real browser: Debian's chromium driven by playwright.

No browser download: playwright drives the system chromium through ``executable_path``
(``FKS_CHROMIUM`` overrides the path). Without playwright or chromium the tests skip, saying
which is missing; a chromium that is there but fails to start is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from report_runs import HOSTILE, XSS, hostile_tiny_run, tiny_run

from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.generate.prompts import build_prompt
from fks.report.build import build_report
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

pytestmark = pytest.mark.browser

#: the launch flags of the CI machine (no sandbox as root, no network at all)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    """``FKS_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH, else None."""
    env = os.environ.get("FKS_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed (it is in the test extra: pip install -e '.[test]')")
    exe = chromium_path()
    if exe is None:
        pytest.skip("no chromium executable (apt-get install chromium, or set FKS_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cfg")
    (d / "metrics.yaml").write_text("bootstrap: {n_resamples: 50}\n")
    return load_configs([d / "metrics.yaml"])


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory) -> Path:
    return write_benchmark(tmp_path_factory.mktemp("bench"), *tiny_benchmark_rows())


@pytest.fixture(scope="module")
def demo_explorer(tmp_path_factory, bench_dir, configs) -> Path:
    """A demo-like run on the tiny benchmark: real behaviour metrics, ISS by layer, hostile
    answers, one Unstable fact (fact_000003)."""
    run = hostile_tiny_run(tmp_path_factory.mktemp("runs"), bench_dir, iss_layers=True,
                           unstable=True)
    build_report([run], configs=configs)
    return run / "explorer.html"


class Page:
    """A page that records console errors, uncaught exceptions and dialogs."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error"
                     else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-ready='1']", state="attached", timeout=15000)

    def rows(self) -> list[str]:
        return self.page.eval_on_selector_all("#facts-body tr", "rs => rs.map(r => r.dataset.fact)")

    def texts(self, selector: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, "es => es.map(e => e.textContent)")

    def open(self, fact_id: str) -> None:
        self.page.click(f"#facts-body tr[data-fact='{fact_id}']")
        self.page.wait_for_selector(f"#detail h2:has-text('{fact_id}')")


def judged(run: Path, fact_id: str) -> list[dict]:
    rows = [json.loads(x) for x in (run / "judged.jsonl").read_text().split("\n") if x]
    return [r for r in rows if r["fact_id"] == fact_id]


def test_filter_to_unstable_open_a_fact_and_see_its_answers(browser, demo_explorer, bench_dir):
    p = Page(browser, demo_explorer)
    assert p.rows() == ["fact_000001", "fact_000002", "fact_000003", "fact_000004"]
    p.page.select_option("#f-group", "Unstable")
    assert p.rows() == ["fact_000003"]
    assert p.page.text_content("#count").startswith("1 of 4 facts")
    p.open("fact_000003")
    records = judged(demo_explorer.parent, "fact_000003")
    # every query of the fact, each with its answer, score, cluster and correctness
    assert sorted(p.texts("#detail pre.answer")) == sorted(r["raw_response"] for r in records)
    assert len(p.texts("#detail tr[data-query]")) == len(records)
    scores = p.texts("#detail td.ans .score")
    assert any("incorrect" in s and "WRONG" in s and "INCORRECT" in s for s in scores)
    assert any("correct" in s and "GOLD" in s and "CORRECT" in s for s in scores)
    # the exact prompts, and recognition in its own block
    bench = load_benchmark(bench_dir)
    prompts = p.texts("#detail pre.prompt")
    mine = [q for q in bench.queries if q.fact_id == "fact_000003"]
    assert sorted(prompts) == sorted(build_prompt(q) for q in mine)
    blocks = p.page.eval_on_selector_all("#detail section.block",
                                         "s => s.map(x => x.dataset.block)")
    assert blocks == ["main", "recognition"]
    # ISS by layer: one line with two points
    assert p.page.locator("#detail svg polyline").count() == 1
    assert p.page.locator("#detail svg circle").count() == 2
    assert p.errors == [] and p.dialogs == []


def test_model_text_is_inert_and_the_table_sorts_and_searches(browser, demo_explorer):
    p = Page(browser, demo_explorer)
    p.page.fill("#f-text", "germ")
    assert p.rows() == ["fact_000002"]
    p.open("fact_000002")
    answers = p.texts("#detail pre.answer")
    assert XSS in answers and HOSTILE in answers  # shown as text ...
    assert p.page.evaluate("document.scripts.length") == 2  # ... and never became markup
    assert p.page.locator("#detail img, #detail script").count() == 0
    p.page.fill("#f-text", "")
    p.page.click("#facts-head th[data-key='bcs']")  # numbers sort high to low first
    bcs = [float(x) for x in p.texts("#facts-body tr td:nth-child(7)")]
    assert bcs == sorted(bcs, reverse=True) and len(bcs) == 4
    p.page.click("#facts-head th[data-key='bcs']")
    assert [float(x) for x in p.texts("#facts-body tr td:nth-child(7)")] == sorted(bcs)
    p.page.select_option("#f-copy", "1")
    assert p.rows() == ["fact_000004"]
    assert p.errors == [] and p.dialogs == []


def test_two_runs_side_by_side(browser, tmp_path, bench_dir, configs):
    a = tiny_run(tmp_path, bench_dir, model="model-a", name="a", unstable=True)
    b = tiny_run(tmp_path, bench_dir, model="model-b", name="b")
    build_report([a, b], configs=configs, out=tmp_path / "both.html")
    p = Page(browser, tmp_path / "both_explorer.html")
    p.page.select_option("#f-group", "Unstable")
    assert p.rows() == ["fact_000003"]
    p.open("fact_000003")
    n = len(judged(a, "fact_000003"))
    assert p.page.locator("#detail td.ans").count() == 2 * n  # one answer cell per run
    heads = p.texts("#detail table.queries tr:first-child th")
    assert "model-a" in heads and "model-b" in heads
    row = p.page.locator("#detail tr[data-query]").filter(has_text="fmt_short")
    cells = row.locator("td.ans pre.answer").all_text_contents()
    assert cells == ["Madrid", "Tokyo"]
    p.page.select_option("#f-run", "1")  # the figures of model-b: no Unstable fact
    assert p.rows() == []
    assert p.errors == [] and p.dialogs == []
