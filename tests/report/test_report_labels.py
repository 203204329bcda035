"""Issue 28: ``fks report --labels F`` validates F (it used to ignore a broken one)."""

from __future__ import annotations

import json

import pytest
from report_runs import tiny_run

from fks.cli import main


def _report(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["report", *[str(a) for a in args], "--no-kts-bootstrap", "--no-explorer"])
    return int(exc.value.code or 0)


def test_a_broken_labels_file_is_exit_2_with_file_line_field(tmp_path, tiny_benchmark_dir,
                                                             capsys):
    run = tiny_run(tmp_path, tiny_benchmark_dir)
    rows = [json.loads(line) for line in (run / "judged.jsonl").open()]
    labels = tmp_path / "labels.jsonl"
    hand = [{"query_id": r["query_id"], "correctness": r["correctness"]} for r in rows[:3]]
    hand[1]["correctness"] = "MAYBE"
    labels.write_text("".join(json.dumps(h) + "\n" for h in hand))
    assert _report(run, "--labels", labels) == 2
    err = capsys.readouterr().err
    assert "labels.jsonl:2: field 'correctness'" in err
    assert not (run / "report.html").exists()


def test_a_missing_or_empty_labels_file_is_exit_2(tmp_path, tiny_benchmark_dir, capsys):
    run = tiny_run(tmp_path, tiny_benchmark_dir)
    assert _report(run, "--labels", tmp_path / "absent.jsonl") == 2
    (tmp_path / "empty.jsonl").write_text("")
    assert _report(run, "--labels", tmp_path / "empty.jsonl") == 2
    assert "empty.jsonl" in capsys.readouterr().err
