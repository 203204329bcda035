"""The 70/20/10 dev/test/holdout split (spec §4.1).

:func:`assign_split` is the contract kernel: ``h = int(SHA-256(f"{case_id}|{salt}"), 16)``,
``h mod 100`` in [0, 70) is dev, [70, 90) test, [90, 100) holdout. The spec writes
``SHA256(case_id | split_salt)``; the ``|`` is kept as a literal separator so that
``("ab", "c")`` and ``("a", "bc")`` never collide. The salt ``"finbayes-v1-2026"`` is fixed for v1.

:func:`assign_splits` applies it to a batch and enforces the two batch rules:

* **Holdout uniform across buckets**: each bucket's holdout count must lie in
  ``[floor(0.1 n) - 1, ceil(0.1 n) + 1]``. A bucket outside it is *reshuffled* deterministically:
  its cases are ordered by ``SHA-256(f"{case_id}|{salt}|{bucket}")`` and the first
  ``round(0.7 n)`` go to dev, the next ``round(0.2 n)`` to test, the rest to holdout. (Retrying
  other salts until the bound holds would not terminate reliably for large buckets, where a
  binomial count rarely lands within +-1 of its mean; the quota order always satisfies it.)
* **Anchor placement (option)**: the self-annotated anchor cases (14 in v1) are placed 10/3/1 in
  the same hash order; they are fixed before the bucket rule, which then moves only the others.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

__all__ = [
    "SALT",
    "SPLIT_BOUNDS",
    "split_hash",
    "assign_split",
    "holdout_bounds",
    "assign_splits",
]

#: v1 global split salt.
SALT = "finbayes-v1-2026"
#: ``h mod 100`` upper bounds: dev < 70 <= test < 90 <= holdout.
SPLIT_BOUNDS = (("dev", 70), ("test", 90), ("holdout", 100))
_FRACTIONS = {"dev": 0.7, "test": 0.2, "holdout": 0.1}


def split_hash(*parts: str) -> int:
    """``int(SHA-256("|".join(parts)), 16)``."""
    return int(hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest(), 16)


def assign_split(case_id: str, salt: str = SALT) -> str:
    """``"dev"``, ``"test"`` or ``"holdout"`` from ``SHA-256(case_id|salt) mod 100`` (§4.1).

    >>> assign_split("C1") in {"dev", "test", "holdout"}
    True
    """
    h = split_hash(case_id, salt) % 100
    return next(name for name, bound in SPLIT_BOUNDS if h < bound)


def holdout_bounds(n: int) -> tuple[int, int]:
    """Return the allowed holdout count range ``[floor(0.1n) - 1, ceil(0.1n) + 1]`` of a bucket.

    >>> holdout_bounds(25)
    (1, 4)
    """
    return max(0, math.floor(0.1 * n) - 1), math.ceil(0.1 * n) + 1


def _quota(ordered: list[str], counts: Mapping[str, int]) -> dict[str, str]:
    out: dict[str, str] = {}
    k = 0
    for name in ("dev", "test", "holdout"):
        for cid in ordered[k : k + counts.get(name, 0)]:
            out[cid] = name
        k += counts.get(name, 0)
    for cid in ordered[k:]:
        out[cid] = "holdout"
    return out


def _reshuffle(
    case_ids: list[str], bucket: str, salt: str, fixed: Mapping[str, str]
) -> dict[str, str]:
    """Quota assignment of a bucket's free cases, anchors (``fixed``) counted in the targets."""
    n = len(case_ids) + len(fixed)
    target = {"dev": round(0.7 * n), "test": round(0.2 * n)}
    target["holdout"] = n - target["dev"] - target["test"]
    free_counts = {
        k: max(0, v - sum(1 for s in fixed.values() if s == k)) for k, v in target.items()
    }
    ordered = sorted(case_ids, key=lambda c: split_hash(c, salt, bucket))
    return _quota(ordered, free_counts)


def assign_splits(
    buckets: Mapping[str, str],
    *,
    salt: str = SALT,
    anchors: Iterable[str] | None = None,
    anchor_counts: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """Split a batch: hash split, anchor placement, then the per-bucket holdout rule.

    Args:
        buckets: ``{case_id: bucket_label}`` of every case of the batch.
        salt: the split salt.
        anchors: case ids of the self-annotated anchors to place by ``anchor_counts``
            (``None``: no forced placement).
        anchor_counts: ``{"dev": 10, "test": 3, "holdout": 1}`` by default; must add up to the
            number of anchors.

    Returns:
        ``{case_id: split}``.

    Raises:
        ValueError: an anchor is not in ``buckets``, or the counts do not add up.
    """
    fixed: dict[str, str] = {}
    if anchors is not None:
        anchor_list = sorted(set(anchors))
        counts = dict(anchor_counts or {"dev": 10, "test": 3, "holdout": 1})
        unknown = [a for a in anchor_list if a not in buckets]
        if unknown:
            raise ValueError(f"anchor case {unknown[0]!r} is not in the batch")
        if sum(counts.values()) != len(anchor_list):
            raise ValueError(
                f"anchor counts {counts} add up to {sum(counts.values())}, "
                f"but there are {len(anchor_list)} anchor cases"
            )
        ordered = sorted(anchor_list, key=lambda c: split_hash(c, salt, "anchor"))
        fixed = _quota(ordered, counts)
    out = {cid: fixed.get(cid) or assign_split(cid, salt) for cid in buckets}
    by_bucket: dict[str, list[str]] = {}
    for cid, b in buckets.items():
        by_bucket.setdefault(b, []).append(cid)
    for b, members in by_bucket.items():
        lo, hi = holdout_bounds(len(members))
        n_hold = sum(out[c] == "holdout" for c in members)
        if lo <= n_hold <= hi:
            continue
        free = [c for c in members if c not in fixed]
        out.update(_reshuffle(free, b, salt, {c: fixed[c] for c in members if c in fixed}))
    return out
