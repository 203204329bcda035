"""Error types that the command line maps to exit codes.

* :class:`FksInputError` -- bad input (exit code 2). Its message is one line naming the file,
  the line and the field at fault, plus what was expected and what was found.
* :class:`SanityCheckFailed` -- with ``--strict``, a failed spec §18 sanity check (exit code 3).
* anything else -- an internal error (exit code 1).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FksInputError", "SanityCheckFailed", "EXIT_OK", "EXIT_INTERNAL", "EXIT_BAD_INPUT",
           "EXIT_SANITY_FAILED", "set_strict", "reset_strict", "strict_requested"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
#: ``--strict``: the outputs were written, but a §18 sanity check failed
EXIT_SANITY_FAILED = 3

_strict = {"on": False}


def set_strict(value: bool = True) -> None:
    """Make a failed §18 sanity check end this invocation with exit code 3 (``--strict``).

    ``False`` leaves the setting as it is, so a stage's ``--strict`` adds to the root one.
    """
    if value:
        _strict["on"] = True


def reset_strict() -> None:
    """Begin an invocation without ``--strict`` (the root ``fks`` command calls it)."""
    _strict["on"] = False


def strict_requested() -> bool:
    """Whether ``--strict`` is in force for this invocation."""
    return _strict["on"]


class SanityCheckFailed(RuntimeError):
    """A spec §18 sanity check failed and ``--strict`` is in force (exit code 3).

    Args:
        line: the one-line sanity summary (which check failed, with its two numbers).
    """

    def __init__(self, line: str) -> None:
        self.line = line
        super().__init__(line)


class FksInputError(ValueError):
    """Bad user input: a file, line and field, and what is wrong there.

    Args:
        message: what is wrong (expected versus found).
        path: the file at fault, if any.
        line: 1-based line number in that file, if any.
        field: dotted field path inside the record, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """Render ``file:line: field: message`` on one line (parts absent are left out)."""
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        parts = [p for p in (where, f"field '{self.field}'" if self.field else "") if p]
        text = " ".join(self.message.split())  # one line, whatever the message held
        return ": ".join([*parts, text]) if parts else text
