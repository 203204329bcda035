"""Years and full dates in normalised text (rule R6 of :mod:`fks.score`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fks.score import lexicon as lex
from fks.score.match import norm

__all__ = ["YearDate", "find_years", "find_dates"]


@dataclass(frozen=True)
class YearDate:
    """A year or a full date at ``text[start:end]``; ``value`` is ``(y,)`` or ``(y, m, d)``."""

    start: int
    end: int
    value: tuple[int, ...]


# A year: 3-4 digits not inside a longer number, not starting with 0, not a decade ("1870s").
_YEAR = re.compile(r"(?<!\d)([1-9]\d{2,3})(?!\d)(?!'?s(?!\w))")

_MONTH_OF = {norm(name): month for month, names in lex.MONTHS.items() for name in names}
_MONTH_ALT = "|".join(re.escape(m) for m in sorted(_MONTH_OF, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th|er|\.)?"
_Y = r"([1-9]\d{2,3})"
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, str, str]], ...] = (
    # 1879-03-14, 1879/03/14, 1879.03.14
    (re.compile(rf"(?<!\d){_Y}[-/.](\d{{1,2}})[-/.](\d{{1,2}})(?!\d)"), ("y", "m", "d")),
    # 14.03.1879, 14/03/1879 (day first; see :func:`find_dates` for the swap)
    (re.compile(rf"(?<!\d)(\d{{1,2}})[./](\d{{1,2}})[./]{_Y}(?!\d)"), ("d", "m", "y")),
    # 14 March 1879, 14 de marzo de 1879, 14. März 1879, 14 марта 1879
    (re.compile(rf"(?<!\d){_DAY}\s*(?:de\s+)?({_MONTH_ALT})(?!\w)\.?,?\s*(?:de\s+)?{_Y}(?!\d)"),
     ("d", "m", "y")),
    # March 14, 1879
    (re.compile(rf"(?<!\w)({_MONTH_ALT})(?!\w)\.?\s*{_DAY},?\s*{_Y}(?!\d)"), ("m", "d", "y")),
    # 1879年3月14日 (normalised: "1879 年 3 月 14 日")
    (re.compile(rf"(?<!\d){_Y}\s*年\s*(\d{{1,2}})\s*月\s*(\d{{1,2}})\s*日?"), ("y", "m", "d")),
)


def find_years(text: str) -> list[YearDate]:
    """Every year (3-4 digits) in a normalised text.

    >>> [y.value for y in find_years("march 14, 1879")]
    [(1879,)]
    >>> find_years("the 1870s")
    []
    """
    return [YearDate(m.start(), m.end(), (int(m.group(1)),)) for m in _YEAR.finditer(text)]


def _month(token: str) -> int:
    return int(token) if token.isdigit() else _MONTH_OF[token]


def find_dates(text: str) -> list[YearDate]:
    """Every full date (year, month, day) in a normalised text, non-overlapping.

    Numeric day-first dates whose "month" exceeds 12 are read month-first (``03/14/1879``).

    >>> [d.value for d in find_dates("born on 14 march 1879 in ulm")]
    [(1879, 3, 14)]
    >>> [d.value for d in find_dates("1879 年 3 月 14 日")]
    [(1879, 3, 14)]
    """
    found: list[YearDate] = []
    for pattern, order in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < f.end and f.start < m.end() for f in found):
                continue
            parts = dict(zip(order, m.groups(), strict=True))
            day, month = int(parts["d"]), _month(parts["m"])
            if month > 12 and parts["m"].isdigit() and day <= 12:
                day, month = month, day
            if 1 <= month <= 12 and 1 <= day <= 31:
                found.append(YearDate(m.start(), m.end(), (int(parts["y"]), month, day)))
    return sorted(found, key=lambda d: d.start)
