"""A typer group whose default subcommand is ``run`` (``fks judge RUN``, ``fks calibrate RUN``).

The rule (issue 28: a run directory literally named ``run`` was read as the subcommand):

* a first argument that is not a subcommand name goes to ``run``: ``fks judge RUN ...`` is
  ``fks judge run RUN ...``;
* a first argument that *is* a subcommand name is that subcommand, **unless** a run directory
  of that name exists (a folder holding ``evaluation_manifest.json`` or the command's input
  file) *and* the subcommand would get fewer positional arguments than it needs: then it is the
  run directory. So with a folder ``./run``, ``fks judge run --benchmark B`` judges ``./run``
  (``run`` alone would lack its ``RUN``), while ``fks judge run run --benchmark B`` and
  ``fks judge agreement A B`` are the subcommands as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.core import TyperGroup

__all__ = ["default_run_group", "RUN_MARKER"]

#: a folder holding this file is a run directory
RUN_MARKER = "evaluation_manifest.json"


def _positionals(command: Any, args: list[str]) -> int:
    """How many positional arguments ``args`` hold for ``command`` (option values skipped).

    Parameters are told apart by ``param_type_name`` (typer vendors its own click, so the
    classes are not ``click``'s).
    """
    takes_value: dict[str, bool] = {}
    for p in command.params:
        if p.param_type_name == "option":
            for name in (*p.opts, *p.secondary_opts):
                takes_value[name] = not (p.is_flag or p.count)
    n, skip = 0, False
    for k, a in enumerate(args):
        if skip:
            skip = False
        elif a == "--":
            return n + len(args) - k - 1
        elif a.startswith("-") and a != "-":
            skip = "=" not in a and takes_value.get(a, False)
        else:
            n += 1
    return n


def _needs(command: Any) -> int:
    return sum(
        max(p.nargs, 1)
        for p in command.params
        if p.param_type_name == "argument" and p.required
    )


def default_run_group(*inputs: str) -> type[TyperGroup]:
    """Return a :class:`TyperGroup` class that routes to ``run`` by the module's rule.

    ``inputs``: file names that mark a run directory for this command (besides
    :data:`RUN_MARKER`), e.g. ``"scored.jsonl"`` for ``fks judge``.
    """

    class _DefaultRunGroup(TyperGroup):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            if args and args[0] not in ctx.help_option_names:
                first = args[0]
                command = self.commands.get(first)
                if command is None or (
                    _is_run_dir(Path(first), inputs)
                    and _positionals(command, args[1:]) < _needs(command)
                ):
                    args = ["run", *args]
            return super().parse_args(ctx, args)

    return _DefaultRunGroup


def _is_run_dir(path: Path, inputs: tuple[str, ...]) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in (RUN_MARKER, *inputs))
