"""Fuzz every reader (issue 14): a corrupted input ends in exit 0 or exit 2, never anything else.

Each case takes one file of a finished tiny run (benchmark rows, generations, scored, judged,
the hidden store's ``meta.json`` and a layer, a J-Lens layer, a YAML config), corrupts it the
way disks, editors and crashed jobs do -- a truncation, a flipped byte, a duplicated line, a
field of the wrong type, a non-finite number -- and runs the stage that reads it, in process:

* exit 0, or exit 2 with a one-line ``file...`` message -- never a traceback, exit 1 or a hang;
* the stage's output is never left half-written: it is either absent, unchanged, or whole.

``FKS_FUZZ_EXAMPLES`` (default 12 per reader) sets the depth; ``FKS_FUZZ_REPORT=PATH`` writes
the tally (inputs tried, exit 0, exit 2, anything else) as JSON, for the long profile run by
hand: ``FKS_FUZZ_EXAMPLES=200 FKS_FUZZ_REPORT=fuzz.json pytest tests/test_fuzz_readers.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fks.cli import main
from fks.pipeline import STAGE_NAMES
from fks.runlock import LOCK_NAME
from provenance_util import drop_provenance

EXAMPLES = int(os.environ.get("FKS_FUZZ_EXAMPLES", "12"))
TALLY: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    if path := os.environ.get("FKS_FUZZ_REPORT"):
        Path(path).write_text(json.dumps(dict(TALLY), indent=1, sort_keys=True))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir):
    """Every stage of ``fks run`` on the tiny model and benchmark (raw transport)."""
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("fuzz")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    stages = ",".join(n for n in STAGE_NAMES if n not in ("jlens", "report", "bootstrap"))
    assert _run_cli(["run", "--model", "tiny", "--model-path", str(tiny_model_dir),
                     "--benchmark", str(bench), "--out", str(root / "runs"), "--device", "cpu",
                     "--transport", "raw", "--no-kts-bootstrap", "--stages", stages]) == 0
    return bench, root / "runs" / "tiny"


def _run_cli(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# ------------------------------------------------------------------------------ corruptions
def _truncate(data: bytes, draw: st.DrawFn) -> bytes:
    return data[: draw(st.integers(0, max(len(data) - 1, 0)))]


def _flip(data: bytes, draw: st.DrawFn) -> bytes:
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]


def _dup_line(data: bytes, draw: st.DrawFn) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 2:
        return data + data
    i = draw(st.integers(0, len(lines) - 2))
    return b"\n".join([*lines[: i + 1], lines[i], *lines[i + 1:]])


_SWAPS = [None, True, 0, -1, 1.5, "", "x" * 300, [], {}, [None], "NaN"]


def _type_swap(data: bytes, draw: st.DrawFn) -> bytes:
    lines = data.split(b"\n")
    for _ in range(len(lines)):
        i = draw(st.integers(0, len(lines) - 1))
        try:
            obj = json.loads(lines[i])
        except ValueError:
            continue
        if isinstance(obj, dict) and obj:
            key = draw(st.sampled_from(sorted(obj)))
            obj[key] = draw(st.sampled_from(_SWAPS))
            lines[i] = json.dumps(obj, ensure_ascii=False).encode()
            break
    return b"\n".join(lines)


def _non_finite(data: bytes, draw: st.DrawFn) -> bytes:
    token = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"]))
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    for num in (b"-0.", b"0.", b"1", b"2"):
        j = lines[i].find(b":" + num)
        if j >= 0:
            k = j + 1
            while k < len(lines[i]) and lines[i][k:k + 1] in b"-0123456789.eE+":
                k += 1
            lines[i] = lines[i][: j + 1] + token + lines[i][k:]
            break
    return b"\n".join(lines)


CORRUPTIONS = {"truncate": _truncate, "flip": _flip, "dup_line": _dup_line,
               "type_swap": _type_swap, "non_finite": _non_finite}


# ---------------------------------------------------------------------------------- readers
def _cmd(kind: str, run: Path, bench: Path) -> tuple[str, list[str], list[str]]:
    """(the file to corrupt, the command reading it, the outputs it writes)."""
    b = ["--benchmark", str(bench)]
    facts = next(bench.glob("benchmark_facts_*.jsonl")).name
    return {
        "benchmark": (f"bench:{facts}", ["data", "validate", str(bench)], []),
        "generations": ("generations.jsonl", ["score", str(run), *b], ["scored.jsonl"]),
        "scored": ("scored.jsonl", ["judge", str(run), *b], ["judged.jsonl"]),
        "judged": ("judged.jsonl", ["metrics", str(run), "--part", "behavior"],
                   ["metrics/behavioral_per_fact.jsonl"]),
        "hidden_meta": ("hidden/meta.json", ["metrics", str(run), "--part", "internal",
                                             "--transport", "raw", *b],
                        ["metrics/iss_per_fact.jsonl"]),
        "hidden_layer": ("hidden/layer_001.npy", ["metrics", str(run), "--part", "internal",
                                                  "--transport", "raw", *b],
                         ["metrics/iss_per_fact.jsonl"]),
        "config": ("cfg:metrics.yaml", ["--config", "{cfg}", "metrics", str(run), "--part",
                                        "behavior"], ["metrics/behavioral_per_fact.jsonl"]),
    }[kind]


def _whole(path: Path) -> bool:
    """An output is whole when it parses completely (JSON lines, or a JSON file)."""
    text = path.read_bytes().decode("utf-8")
    if path.suffix == ".jsonl":
        return all(json.loads(x) is not None for x in text.split("\n") if x)
    json.loads(text)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["benchmark", "generations", "scored", "judged", "hidden_meta",
                                  "hidden_layer", "config"])
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_corrupted_input_ends_in_exit_0_or_2(finished_run, tmp_path_factory, kind, data,
                                               capsys):
    bench0, run0 = finished_run
    root = tmp_path_factory.mktemp("case")
    run = root / "tiny"
    shutil.copytree(run0, run, ignore=shutil.ignore_patterns(LOCK_NAME))
    bench = root / "bench"
    shutil.copytree(bench0, bench)
    target, argv, outputs = _cmd(kind, run, bench)
    if target.startswith("bench:"):
        path = bench / target.split(":", 1)[1]
    elif target.startswith("cfg:"):
        path = root / target.split(":", 1)[1]
        path.write_text("tau_b: 0.8\nbootstrap:\n  n_boot: 100\n  seed: 7\n")
        argv = [a.replace("{cfg}", str(path)) for a in argv]
    else:
        path = run / target
    if data.draw(st.booleans(), label="hand-made run (no recorded provenance)"):
        drop_provenance(run)  # the row readers, not the chain check, meet the corruption
    how = data.draw(st.sampled_from(sorted(CORRUPTIONS)), label="corruption")
    if path.suffix == ".npy" and how in ("dup_line", "type_swap", "non_finite"):
        how = "truncate"
    before = {o: (run / o).read_bytes() if (run / o).is_file() else None for o in outputs}
    path.write_bytes(CORRUPTIONS[how](path.read_bytes(), data.draw))
    capsys.readouterr()
    code = _run_cli(argv)
    out = capsys.readouterr()
    TALLY["tried"] += 1
    TALLY[f"exit_{code}" if code in (0, 2) else "other"] += 1
    assert code in (0, 2), f"{kind}/{how}: exit {code}\n{out.out}{out.err}"
    assert "Traceback" not in out.out + out.err
    if code == 2:
        assert "error:" in out.err + out.out
    for name, old in before.items():
        p = run / name
        if p.is_file() and p.read_bytes() != old:
            assert _whole(p), f"{name} is half-written after {kind}/{how}"


def test_npy_with_object_dtype_is_refused_without_pickle(finished_run, tmp_path, capsys):
    bench0, run0 = finished_run
    run = tmp_path / "tiny"
    shutil.copytree(run0, run, ignore=shutil.ignore_patterns(LOCK_NAME))
    drop_provenance(run)  # the npy reader, not the chain check, must meet the object array
    layers = sorted((run / "hidden").glob("layer_*.npy"))
    for layer in layers:
        np.save(layer, np.array([object()] * 3, dtype=object), allow_pickle=True)
    code = _run_cli(["metrics", str(run), "--part", "internal", "--transport", "raw",
                     "--benchmark", str(bench0)])
    out = "".join(capsys.readouterr())
    assert code == 2 and any(layer.name in out for layer in layers)
    assert "object dtype" in out
