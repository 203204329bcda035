import logging

from fks.log import LoggedProgress


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_logged_progress_lines_every_interval(caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO, logger="fks.progress"):
        with LoggedProgress(disable=True, every=30.0, clock=clock) as bar:
            task = bar.add_task("generate", total=100, tok_s="-")
            for _ in range(10):  # 10 updates within 25 s: no line beyond the start
                clock.now += 2.5
                bar.update(task, advance=1, tok_s="12")
            clock.now += 10  # 35 s since the start line: the next update logs
            bar.update(task, advance=10, tok_s="12")
            clock.now += 1
            bar.advance(task, 80)  # finished: a final line
    lines = [r.getMessage() for r in caplog.records if r.name == "fks.progress"]
    assert lines[0] == "generate: 0/100 (0.0 %)"
    assert lines[1].startswith("generate: 20/100 (20.0 %) 0.57/s, eta 2m 20s")
    assert lines[1].endswith("12 tok/s")
    assert lines[2].startswith("generate: 100/100 (100.0 %)") and "done in 36s" in lines[2]
    assert len(lines) == 3  # stop() does not repeat a finished task


def test_logged_progress_stop_reports_unfinished_task(caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO, logger="fks.progress"):
        with LoggedProgress(disable=True, every=30.0, clock=clock) as bar:
            task = bar.add_task("j-lens", total=4)
            clock.now += 5
            bar.advance(task)
    lines = [r.getMessage() for r in caplog.records if r.name == "fks.progress"]
    assert lines == ["j-lens: 0/4 (0.0 %)", "j-lens: 1/4 (25.0 %) 0.20/s, eta 15s"]


def test_progress_bar_logs_when_not_a_terminal(monkeypatch):
    import fks.log

    monkeypatch.setattr(fks.log.console, "_force_terminal", False)
    monkeypatch.setenv("FKS_PROGRESS_EVERY", "7")
    bar = fks.log.progress_bar()
    assert isinstance(bar, LoggedProgress) and bar._every == 7.0


def test_logged_progress_ticks_between_updates(caplog):
    import time

    with caplog.at_level(logging.INFO, logger="fks.progress"):
        with LoggedProgress(disable=True, every=0.2) as bar:
            task = bar.add_task("extract", total=10)
            bar.advance(task)
            time.sleep(1.0)  # one long "batch": the ticker thread still logs
    lines = [r.getMessage() for r in caplog.records if r.name == "fks.progress"]
    assert sum(line.startswith("extract: 1/10") for line in lines) >= 2
