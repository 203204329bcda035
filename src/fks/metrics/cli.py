"""``fks metrics RUN [--part behavior|...|all]``.

Each part is a function ``part(run_dir, configs) -> dict`` registered in :data:`PARTS`; a
later stage adds its own (``internal``: ISS/KTS) with :func:`register_part`, and ``--part all``
runs every registered part in registration order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from fks.configs import ConfigSet
from fks.errors import FksInputError

log = logging.getLogger("fks")

MetricsPart = Callable[[Path, ConfigSet], dict[str, Any]]
PARTS: dict[str, MetricsPart] = {}


def register_part(name: str, part: MetricsPart) -> None:
    """Make ``part`` runnable as ``fks metrics RUN --part name`` (and in ``--part all``)."""
    PARTS[name] = part


def _behavior_part(run_dir: Path, configs: ConfigSet) -> dict[str, Any]:
    from fks.metrics.behavior import run_behavior_metrics

    m = configs.metrics
    return run_behavior_metrics(run_dir, main_families=m.main_families, tau_b=m.tau_b,
                                tau_sensitivity=m.tau_b_sensitivity)


register_part("behavior", _behavior_part)


def _internal_part(run_dir: Path, configs: ConfigSet, *, transport: str = "jlens",
                   benchmark: str | None = None) -> dict[str, Any]:
    from fks.metrics.internal import internal_part

    return internal_part(run_dir, configs, transport=transport, benchmark=benchmark)


register_part("internal", _internal_part)


def metrics_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory (reads judged.jsonl, ...).")],
    part: Annotated[str, typer.Option(
        help="Which metrics: a registered part (behavior, ...) or all.")] = "all",
    transport: Annotated[str, typer.Option(
        help="internal: ISS/KTS on J-Lens transported states (jlens) or raw ones (raw).")
    ] = "jlens",
    benchmark: Annotated[str | None, typer.Option(
        help="internal: the benchmark (default: the path in the run manifest).")] = None,
    strict: Annotated[bool, typer.Option(
        help="Exit with code 3 when a spec §18 sanity check fails (outputs still written).")
    ] = False,
) -> None:
    """Compute metrics of a run into RUN/metrics/ (spec §17); print the sanity line."""
    from fks.configs import current as get_configs
    from fks.errors import set_strict
    from fks.log import console
    from fks.pipeline import families_absent, render_sanity

    set_strict(strict)
    if part != "all" and part not in PARTS:
        raise FksInputError(f"unknown part {part!r}; expected one of: "
                            f"{', '.join([*PARTS, 'all'])}", field="part")
    if not run.is_dir():
        raise FksInputError("run directory not found", path=run)
    options = {"internal": {"transport": transport, "benchmark": benchmark}}
    for name in (list(PARTS) if part == "all" else [part]):
        if name == "internal" and part == "all" and not (run / "hidden").is_dir():
            log.info("no hidden states in %s: the internal part (ISS/KTS) is skipped", run)
            continue
        PARTS[name](run, get_configs(), **options.get(name, {}))
        log.info("metrics part %r done", name)
    absent = families_absent(run)
    if absent:
        console.print(f"{run.name}: configured main families absent from the run: "
                      f"{', '.join(absent)} (complete-family sets use the families present)",
                      highlight=False, soft_wrap=True)
    if part in ("all", "internal"):
        render_sanity(run)


def register(app: typer.Typer) -> None:
    """Add ``fks metrics``."""
    app.command("metrics")(metrics_cmd)
