"""Render the report template (jinja2, autoescape on, no external resources)."""

from __future__ import annotations

from typing import Any

import jinja2

from fks.report._template import TEMPLATE

__all__ = ["render"]


def render(context: dict[str, Any]) -> str:
    """Render the report with ``context``; every value is HTML-escaped.

    ``StrictUndefined`` makes a missing context key an error instead of an empty string.
    """
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TEMPLATE).render(**context)
