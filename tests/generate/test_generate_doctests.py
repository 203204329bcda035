"""The docstring examples of the generate stage stay true."""

from __future__ import annotations

import doctest

import pytest

import fks.generate.backends.openai as openai_backend
import fks.generate.prompts as prompts
import fks.generate.runner as runner


@pytest.mark.parametrize("module", [prompts, runner, openai_backend])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
