"""The command-line shell: every command's --help, --version, and the exit-code policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from fks import __version__
from fks.cli import app, main
from fks.errors import FksInputError

CONTRACT_COMMANDS = {("demo",), ("data", "build"), ("data", "validate"), ("data", "summary")}


def _command_paths() -> list[tuple[str, ...]]:
    """Every registered command and group, as argument paths (the root is ``()``)."""
    paths: list[tuple[str, ...]] = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        # typer >= 0.2x vendors click: a group is whatever has sub-commands
        paths.append(path)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths


PATHS = _command_paths()


def test_contract_commands_are_registered():
    assert CONTRACT_COMMANDS <= set(PATHS)
    assert len(PATHS) > len(CONTRACT_COMMANDS) + 2  # the stage commands are walked too


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "fks")
def test_help_of_every_command_exits_0(path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "Usage" in out and "--help" in out


def test_python_m_fks_version():
    env = dict(os.environ, COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "fks", "--version"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"fks {__version__}"


def test_internal_error_exits_1(monkeypatch, tiny_benchmark_dir, capsys):
    import fks.data.validate

    def explode(*args, **kwargs):
        raise RuntimeError("something broke [inside]")

    monkeypatch.setattr(fks.data.validate, "run_validation", explode)
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(tiny_benchmark_dir)])
    assert exc.value.code == 1
    assert "internal error: RuntimeError: something broke [inside]" in capsys.readouterr().err


def test_bad_input_exits_2_with_one_line_kept_verbatim(monkeypatch, tiny_benchmark_dir, capsys):
    import fks.data.validate

    def bad(*args, **kwargs):
        # file contents quoted in a message may look like rich markup; it must print verbatim
        raise FksInputError('found "[mask] is [bold]the[/bold] capital"\nof x', path="q.jsonl",
                            line=7, field="query")

    monkeypatch.setattr(fks.data.validate, "run_validation", bad)
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: q.jsonl:7: field 'query': found \"[mask] is [bold]the[/bold] "
                   "capital\" of x"]


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", "--no-such-option"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2


def test_missing_benchmark_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(tmp_path / "absent")])
    assert exc.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert err == [f"error: {tmp_path / 'absent'}: benchmark directory not found"]
