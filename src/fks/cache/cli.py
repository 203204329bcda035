"""``fks cache list``: the cached folders (GGUF conversions, the demo model, ...) and sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["cache_app", "register"]

cache_app = typer.Typer(help="Inspect fks's cache ($FKS_CACHE, else ~/.cache/fks).",
                        no_args_is_help=True)


@cache_app.command("list")
def list_cmd(
    root: Annotated[Path | None, typer.Option(
        "--cache-dir", help="The cache folder (default: $FKS_CACHE, else ~/.cache/fks).")] = None,
) -> None:
    """Print each cached folder (GGUF conversions, the demo model, ...) with its size."""
    from fks.cache import format_size, list_cache
    from fks.io import fks_cache_dir

    base = root if root is not None else fks_cache_dir()
    entries = list_cache(base)
    if not entries:
        typer.echo(f"no cached folders in {base}")
        return
    width = max(len(e.kind) for e in entries)
    for e in entries:
        detail = f"  ({e.detail})" if e.detail else ""
        typer.echo(f"{e.kind:<{width}}  {format_size(e.size_bytes):>10}  {e.path}{detail}")
    total = sum(e.size_bytes for e in entries)
    typer.echo(f"{len(entries)} folder(s), {format_size(total)} in {base}")


def register(app: typer.Typer) -> None:
    """Add ``fks cache`` to the root app."""
    app.add_typer(cache_app, name="cache")
