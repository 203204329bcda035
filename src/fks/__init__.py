"""fks: Fact Knowledge Stability.

Measures whether a language model that knows a fact still knows it when the question changes
(paraphrase, answer format, distracting context, another language), both in what it says
(BCS, BES, behaviour classes) and in its residual stream (ISS, KTS).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fks")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
