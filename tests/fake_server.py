"""Test helper: run ``tests/generate/fake_openai_server.py`` in a subprocess for a test module."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

SERVER = Path(__file__).parent / "generate" / "fake_openai_server.py"


@contextlib.contextmanager
def running_fake_server(*args: str, lifetime_s: int = 120) -> Iterator[str]:
    """Start the fake server on a free port with ``args``; yield its URL; stop it after.

    It is terminated (killed after 5 s) on exit, and its ``PORT n`` line must come within 20 s.
    """
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--lifetime",
                             str(lifetime_s), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=20)
    try:
        assert line and line[0].startswith("PORT "), f"server did not start: {line}"
        yield f"http://127.0.0.1:{int(line[0].split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        assert proc.returncode is not None
