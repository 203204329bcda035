"""Failed §18 checks are heard: a one-line summary on the console, exit code 3 with
``--strict``, and the failure at the top of the HTML report."""

from __future__ import annotations

import pytest
from internal_synth import make_bench, make_run

from fks.errors import EXIT_SANITY_FAILED


def _fks(*args) -> int:
    from fks.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("heard")
    bench = make_bench(root, sizes=(30, 30))
    run = make_run(root, bench, d=16, signal=0.0)  # no fact identity: the query shuffle fails
    return root, bench, run


def test_metrics_prints_the_failed_check_and_strict_exits_3(failing_run, capsys):
    _, bench, run = failing_run
    args = ("metrics", run, "--part", "internal", "--benchmark", bench.root)
    assert _fks(*args) == 0  # outputs written, failure printed, exit 0 without --strict
    cap = capsys.readouterr()
    out = cap.out + cap.err
    line = next(x for x in out.splitlines() if x.startswith(f"{run.name}: sanity checks"))
    assert "FAIL" in line and "query_shuffle (ISS real" in line and "vs shuffled" in line
    assert _fks(*args, "--strict") == EXIT_SANITY_FAILED == 3
    cap = capsys.readouterr()
    assert "strict:" in cap.out + cap.err
    assert _fks("--strict", *args) == 3  # the global form (works for fks demo too)
    assert (run / "metrics" / "sanity_checks.json").is_file()


def test_report_puts_failed_checks_at_the_top(failing_run):
    _, bench, run = failing_run
    assert _fks("metrics", run, "--part", "internal", "--benchmark", bench.root) == 0
    assert _fks("report", run, "--no-kts-bootstrap") == 0
    html = (run / "report.html").read_text()
    alert = html.index('<p class="alert">')
    assert alert < html.index('<h2 id="overview">') and alert < html.index("<nav>")
    assert "query_shuffle (ISS real" in html[alert:alert + 400]


def test_report_shows_both_readings(failing_run):
    from fks.report.inputs import load_run
    from fks.report.tables import readings_table

    _, bench, run = failing_run
    assert _fks("metrics", run, "--part", "internal", "--benchmark", bench.root) == 0
    rows = readings_table(load_run(run)).rows
    assert {r["reading"] for r in rows} == {"with_anchor", "without_anchor"}
    assert {r["reading"] for r in rows if r["default"] == "yes"} == {"with_anchor"}
    assert {r["coverage_mode"] for r in rows} == {"complete_family", "full_set"}
    assert all(r["iss"] is not None and r["kts"] is not None for r in rows)


def test_run_and_demo_summary_prints_the_sanity_line(failing_run, capsys):
    # fks run and fks demo end with render_headline: the table, then the sanity line
    from fks.pipeline import render_headline, reset_sanity_failures, sanity_failures

    _, bench, run = failing_run
    assert _fks("metrics", run, "--part", "internal", "--benchmark", bench.root) == 0
    reset_sanity_failures()
    capsys.readouterr()
    render_headline(run)
    cap = capsys.readouterr()
    assert f"{run.name}: sanity checks (spec §18, layer 3)" in cap.out + cap.err
    assert len(sanity_failures()) == 1 and "query_shuffle" in sanity_failures()[0]
