"""fks.io: atomic writes, torn-line repair, and iter_jsonl on corrupted input."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fks.data.schema import Query
from fks.errors import FksInputError
from fks.io import (
    JsonlAppender,
    atomic_path,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    iter_jsonl,
    read_json,
    read_jsonl,
    repair_jsonl_tail,
)
from tiny_benchmark import tiny_benchmark_rows


class Boom(RuntimeError):
    pass


def _only_file(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------- atomic writes
def test_atomic_jsonl_keeps_old_file_when_writer_fails_mid_write(tmp_path):
    target = tmp_path / "out.jsonl"
    atomic_write_jsonl(target, [{"a": 1}, {"a": 2}])
    before = target.read_bytes()

    def rows():
        yield {"a": 10}
        yield {"a": 20}
        raise Boom("crash after two rows")

    with pytest.raises(Boom):
        atomic_write_jsonl(target, rows())
    assert target.read_bytes() == before
    assert _only_file(tmp_path) == ["out.jsonl"]  # no temporary file left behind


def test_atomic_json_keeps_old_file_on_unserialisable_value(tmp_path):
    target = tmp_path / "report.json"
    atomic_write_json(target, {"passed": True})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"passed": object()})
    assert read_json(target) == {"passed": True}
    assert _only_file(tmp_path) == ["report.json"]


def test_atomic_path_keeps_old_file_and_replaces_on_success(tmp_path):
    target = tmp_path / "arr.bin"
    atomic_write_text(target, "old")
    with pytest.raises(Boom), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise Boom()
    assert target.read_text() == "old"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new"
    assert _only_file(tmp_path) == ["arr.bin"]


def test_atomic_write_creates_parent_folders(tmp_path):
    target = tmp_path / "a" / "b" / "c.json"
    atomic_write_json(target, {"x": [1, 2]})
    assert read_json(target) == {"x": [1, 2]}


# ------------------------------------------------------------------------ JsonlAppender
@pytest.mark.parametrize("torn", [b'{"i": 3, "na', b'{"i": 3, "na\n', b"\x00\x00\x00"])
def test_appender_repairs_torn_last_line(tmp_path, torn):
    path = tmp_path / "gen.jsonl"
    with JsonlAppender(path) as out:
        assert out.write_batch([{"i": 0}, {"i": 1}]) == 2
        out.write_batch([{"i": 2}])
    whole = path.read_bytes()
    with path.open("ab") as fh:  # what a kill -9 mid-write leaves
        fh.write(torn)
    with JsonlAppender(path) as out:
        assert out.repaired_bytes == len(torn)
        assert path.read_bytes() == whole
        out.write_batch([{"i": 3}])
    assert [r["i"] for r in read_jsonl(path)] == [0, 1, 2, 3]


def test_appender_leaves_whole_file_alone(tmp_path):
    path = tmp_path / "gen.jsonl"
    with JsonlAppender(path) as out:
        out.write_batch([{"i": 0}])
    with JsonlAppender(path) as out:
        assert out.repaired_bytes == 0
        assert out.write_batch([]) == 0
    assert read_jsonl(path) == [{"i": 0}]
    assert repair_jsonl_tail(tmp_path / "absent.jsonl") == 0


def test_repair_of_a_single_torn_line_empties_the_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"i": 0')
    assert repair_jsonl_tail(path) == 7
    assert path.read_bytes() == b""


def test_repair_handles_absurdly_nested_last_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"i": 0}\n' + b"[" * 100_000 + b"\n")
    assert repair_jsonl_tail(path) == 100_001
    assert read_jsonl(path) == [{"i": 0}]


# ---------------------------------------------------------------------------- iter_jsonl
def test_iter_jsonl_reports_file_line_and_field(tmp_path):
    _, queries = tiny_benchmark_rows()
    queries[2]["is_assisted"] = "sometimes"
    path = tmp_path / "q.jsonl"
    atomic_write_jsonl(path, queries)
    with pytest.raises(FksInputError) as exc:
        list(iter_jsonl(path, Query))
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), 3, "is_assisted")
    assert str(exc.value).startswith(f"{path}:3: field 'is_assisted': ")
    assert '"sometimes"' in str(exc.value)


def test_iter_jsonl_blank_lines_and_missing_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert [n for n, _ in iter_jsonl(path)] == [1, 3]
    with pytest.raises(FksInputError, match="blank line") as exc:
        list(iter_jsonl(path, skip_blank=False))
    assert exc.value.line == 2
    with pytest.raises(FksInputError, match="file not found"):
        list(iter_jsonl(tmp_path / "absent.jsonl"))


@pytest.mark.parametrize("line", [b"1" * 5000, b"[" * 100_000, b'{"a":' * 50_000, b"[1, 2]",
                                  b"\xff\xfe", b'{"a": 1} trailing'])
def test_iter_jsonl_maps_every_bad_line_to_input_error(tmp_path, line):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n' + line + b"\n")
    with pytest.raises(FksInputError) as exc:
        list(iter_jsonl(path))
    assert exc.value.line == 2 and exc.value.path == str(path)


def _valid_jsonl() -> bytes:
    _, queries = tiny_benchmark_rows()
    return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries[:6]).encode()


VALID = _valid_jsonl()


@st.composite
def corrupted(draw) -> bytes:
    """VALID with random byte replacements, insertions, deletions and a truncation."""
    data = bytearray(VALID)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        byte = draw(st.sampled_from([0, 10, 13, 34, 44, 58, 91, 92, 93, 123, 125, 0xC3, 0xFF])
                    | st.integers(0, 255))
        if op == "replace" and data:
            data[pos] = byte
        elif op == "insert":
            data.insert(pos, byte)
        elif data:
            del data[pos]
    cut = draw(st.integers(0, len(data)))
    return bytes(data[:cut]) if draw(st.booleans()) else bytes(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=corrupted())
@example(blob=VALID)
@example(blob=VALID[: len(VALID) // 2])
@example(blob=VALID.replace(b'"language": "en"', b'"language": "xx"', 1))
def test_iter_jsonl_on_corrupted_input_parses_or_names_file_and_line(blob):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "queries.jsonl"
        path.write_bytes(blob)
        n_lines = blob.count(b"\n") + (0 if blob.endswith(b"\n") or not blob else 1)
        try:
            rows = list(iter_jsonl(path, Query))
        except FksInputError as exc:
            assert exc.path == str(path)
            assert exc.line is not None and 1 <= exc.line <= n_lines
            assert re.match(rf"{re.escape(str(path))}:{exc.line}: ", str(exc))
            assert "\n" not in str(exc)
        else:
            assert all(isinstance(r, Query) for _, r in rows)
            assert [n for n, _ in rows] == sorted({n for n, _ in rows})
            assert all(1 <= n <= n_lines for n, _ in rows)


@pytest.mark.parametrize("blob", [b'{"a": 1,\n"b": }', b"\xff\xfe{}", b"1" * 5000, b"[" * 100_000])
def test_read_json_maps_bad_files_to_input_error(tmp_path, blob):
    path = tmp_path / "m.json"
    path.write_bytes(blob)
    with pytest.raises(FksInputError) as exc:
        read_json(path)
    assert exc.value.path == str(path)
