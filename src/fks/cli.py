"""The ``fks`` command line: a thin typer layer over the Python API.

Each stage package owns its commands in ``fks/<stage>/cli.py`` with a ``register(app)``
function; this module only builds the app, the global options and the exit-code policy:

* exit 0 on success;
* exit 2 on bad input (:class:`~fks.errors.FksInputError`), with one line naming file, line
  and field;
* exit 1 on an internal error (the traceback is shown with ``--verbose``);
* exit 3 with ``--strict`` when a spec §18 sanity check failed (``fks --strict CMD``, or
  ``fks run --strict`` / ``fks metrics --strict``): every output is written, the one-line
  sanity summary is printed, and the exit code says the figures did not pass their checks.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from fks import __version__
from fks.configs import current, use_overrides
from fks.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_SANITY_FAILED,
    FksInputError,
    SanityCheckFailed,
    reset_strict,
    set_strict,
    strict_requested,
)
from fks.io import os_error
from fks.log import console, setup_logging
from fks.runlock import set_lock_wait

__all__ = ["app", "main", "get_configs", "set_strict"]

log = logging.getLogger("fks")

app = typer.Typer(
    name="fks",
    help="Fact Knowledge Stability: does a model that knows a fact still know it when the "
    "question changes?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state: dict[str, object] = {"verbose": False}

#: kept for callers of earlier versions; stage CLIs use :func:`fks.configs.current` and
#: :func:`fks.errors.set_strict`, so no stage imports this module
get_configs = current


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fks {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            help="Override packaged configs: a YAML file named metrics/models/relations/"
            "eval_conditions.yaml, or a folder holding some of them. Repeatable; deep-merged.",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Exit with code 3 when a spec §18 sanity check fails (outputs are "
        "still written).")] = False,
    wait: Annotated[
        float | None,
        typer.Option("--wait", min=0, help="When another process is writing the same run "
                     "directory, wait up to this many seconds (0: forever) instead of exiting 2. "
                     "Default: FKS_LOCK_WAIT, else fail at once."),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    """Fact Knowledge Stability toolkit."""
    from fks.pipeline import reset_sanity_failures

    setup_logging(verbose)
    use_overrides(list(config or []))
    _state["verbose"] = verbose
    reset_strict()
    set_strict(strict)
    reset_sanity_failures()
    set_lock_wait(wait)


def _register_stages() -> None:
    # One import per stage package; each adds its commands (see module docstring).
    from fks.cache import cli as cache_cli
    from fks.data import cli as data_cli
    from fks.demo import cli as demo_cli
    from fks.evalharness import cli as harness_cli
    from fks.generate import cli as generate_cli
    from fks.hidden import cli as hidden_cli
    from fks.interop import cli as interop_cli
    from fks.judge import cli as judge_cli
    from fks.metrics import cli as metrics_cli
    from fks.metrics.calibration import cli as calibration_cli
    from fks.pipeline import cli as pipeline_cli
    from fks.report import cli as report_cli
    from fks.scale import cli as scale_cli
    from fks.score import cli as score_cli

    for module in (
        data_cli, demo_cli, generate_cli, score_cli, judge_cli, hidden_cli, metrics_cli,
        calibration_cli, report_cli, pipeline_cli, scale_cli, harness_cli, interop_cli,
        cache_cli,
    ):
        module.register(app)


_register_stages()


def _usage_error_types() -> tuple[type[Exception], ...]:
    """Click's usage-error base classes, whichever click typer runs on.

    typer >= 0.2x vendors its own click, whose ``ClickException`` subclasses
    ``typer.TyperException`` and is not the installed ``click``'s; older typer uses ``click``.
    """
    types: list[type[Exception]] = []
    if (vendored := getattr(typer, "TyperException", None)) is not None:
        types.append(vendored)
    try:
        import click

        types.append(click.exceptions.ClickException)
    except ImportError:  # pragma: no cover - click is optional with a vendoring typer
        pass
    return tuple(types)


def _enforce_strict() -> None:
    """Raise :class:`SanityCheckFailed` when ``--strict`` is on and a failure was printed."""
    from fks.pipeline import sanity_failures

    heard = sanity_failures()
    if strict_requested() and heard:
        raise SanityCheckFailed(heard[-1])


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``fks`` script: run the app and map errors to exit codes."""
    try:
        app(args=argv, standalone_mode=False)
        _enforce_strict()
    except SanityCheckFailed as exc:
        console.print(f"[red]strict:[/red] {escape(exc.line)}", highlight=False, soft_wrap=True)
        sys.exit(EXIT_SANITY_FAILED)
    except FksInputError as exc:
        # escape: the message quotes file contents, which may hold rich markup like "[mask]"
        console.print(f"[red]error:[/red] {escape(exc.one_line())}", highlight=False,
                      soft_wrap=True)
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort as exc:
        if isinstance(exc.__cause__, EOFError):  # click turns EOFError into a bare Abort
            console.print(f"[red]internal error:[/red] EOFError: {escape(str(exc.__cause__))}",
                          highlight=False)
        else:
            console.print("aborted")
        sys.exit(EXIT_INTERNAL)
    except OSError as exc:
        if exc.filename is None:  # not about a path (a socket, the device, ...): internal
            _internal(exc)
        # an OS error on a path: a directory where a file belongs, a symlink loop, a name too
        # long, a file where a folder belongs, no permission -- bad input, never exit 1
        console.print(f"[red]error:[/red] {escape(os_error(exc).one_line())}", highlight=False,
                      soft_wrap=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # click usage errors are ClickException subclasses
        if isinstance(exc, _usage_error_types()):
            if hasattr(exc, "show"):
                exc.show()
            else:  # a bare TyperException
                console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            code = getattr(exc, "exit_code", EXIT_BAD_INPUT)
            sys.exit(EXIT_BAD_INPUT if code == 2 else code)
        _internal(exc)
    sys.exit(0)


def _internal(exc: BaseException) -> None:
    if _state.get("verbose"):
        console.print_exception()
    console.print(f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))}",
                  highlight=False)
    sys.exit(EXIT_INTERNAL)
