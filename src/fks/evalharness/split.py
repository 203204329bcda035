"""The 70/20/10 dev/test/holdout split (spec §4.1).

:func:`assign_split` is the contract kernel: ``h = int(SHA-256(f"{case_id}|{salt}"), 16)``,
``h mod 100`` in [0, 70) is dev, [70, 90) test, [90, 100) holdout. The spec writes
``SHA256(case_id | split_salt)``; the ``|`` is kept as a literal separator so that
``("ab", "c")`` and ``("a", "bc")`` never collide. The salt ``"finbayes-v1-2026"`` is fixed for v1.

:func:`assign_splits` applies it to a batch and enforces the batch rules:

* **Pinned assignments** (issue 22): a stored assignment file
  (:func:`read_split_file` / :func:`write_split_file`, ``{"salt", "assignments"}``) fixes every
  case it lists; those never move again. Only cases new to the file are assigned -- by the hash,
  then by the two rules below -- and appended. So a quarterly top-up never reshuffles the
  holdout (§4.1, §7). Without a file every case is new (the first run).
* **Holdout uniform across buckets**: each bucket's holdout count must lie in
  ``[floor(0.1 n) - 1, ceil(0.1 n) + 1]``. A bucket outside it is "reshuffled" (§4.1) by
  moving only its *new*, non-anchor cases, in the order of
  ``SHA-256(f"{case_id}|{salt}|{bucket}")``, into or out of holdout until the count reaches
  ``round(0.1 n)`` clipped to the bounds (cases leaving holdout go to whichever of dev/test is
  further below its 70/20 share). When the new cases cannot restore the bound, the bucket is
  reported by :func:`out_of_bounds` instead of moving pinned cases.
* **Anchor placement** (on by default when the 14 self-annotated anchors are present, see
  ``SplitSettings``): the anchors are placed 10/3/1 in ``SHA-256(case_id|salt|anchor)`` order;
  pinned anchors count towards those quotas, so new anchors only fill what is left.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from fks.errors import FksInputError
from fks.io import atomic_write_json, read_json

__all__ = [
    "SALT",
    "SPLIT_BOUNDS",
    "split_hash",
    "assign_split",
    "holdout_bounds",
    "assign_splits",
    "out_of_bounds",
    "read_split_file",
    "write_split_file",
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


def _rebalance(
    members: list[str], movable: list[str], bucket: str, salt: str, out: dict[str, str]
) -> None:
    """Move ``movable`` cases of one bucket into/out of holdout towards ``round(0.1 n)``."""
    n = len(members)
    lo, hi = holdout_bounds(n)
    n_hold = sum(out[c] == "holdout" for c in members)
    if lo <= n_hold <= hi:
        return
    target = min(max(round(0.1 * n), lo), hi)
    ordered = sorted(movable, key=lambda c: split_hash(c, salt, bucket))
    if n_hold < target:
        for cid in ordered:
            if n_hold >= target:
                break
            if out[cid] != "holdout":
                out[cid] = "holdout"
                n_hold += 1
        return
    for cid in ordered:
        if n_hold <= target:
            break
        if out[cid] == "holdout":
            short = {
                s: _FRACTIONS[s] * n - sum(out[c] == s for c in members) for s in ("dev", "test")
            }
            out[cid] = max(short, key=lambda s: (short[s], s == "dev"))
            n_hold -= 1


def out_of_bounds(buckets: Mapping[str, str], splits: Mapping[str, str]) -> dict[str, dict]:
    """Buckets whose holdout count leaves ``holdout_bounds`` (pinned cases could not move).

    Returns ``{bucket: {"n", "holdout", "bounds"}}``.
    """
    by_bucket: dict[str, list[str]] = {}
    for cid, b in buckets.items():
        by_bucket.setdefault(b, []).append(cid)
    bad = {}
    for b, members in sorted(by_bucket.items()):
        lo, hi = holdout_bounds(len(members))
        n_hold = sum(splits[c] == "holdout" for c in members)
        if not lo <= n_hold <= hi:
            bad[b] = {"n": len(members), "holdout": n_hold, "bounds": [lo, hi]}
    return bad


def assign_splits(
    buckets: Mapping[str, str],
    *,
    salt: str = SALT,
    anchors: Iterable[str] | None = None,
    anchor_counts: Mapping[str, int] | None = None,
    pinned: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Split a batch: pinned cases kept, then hash split, anchor placement, holdout rule.

    Args:
        buckets: ``{case_id: bucket_label}`` of every case of the batch.
        salt: the split salt.
        anchors: case ids of the self-annotated anchors to place by ``anchor_counts``
            (``None``: no placement).
        anchor_counts: ``{"dev": 10, "test": 3, "holdout": 1}`` by default; must add up to the
            number of anchors.
        pinned: stored assignments (``{case_id: split}``); those cases never move. Entries for
            cases absent from ``buckets`` are ignored here (the caller keeps them in the file).

    Returns:
        ``{case_id: split}`` for every case of ``buckets``.

    Raises:
        ValueError: an anchor is not in ``buckets``, or the counts do not add up.
    """
    pinned = {c: s for c, s in (pinned or {}).items() if c in buckets}
    fixed: dict[str, str] = dict(pinned)
    anchor_set: set[str] = set()
    if anchors is not None:
        anchor_list = sorted(set(anchors))
        anchor_set = set(anchor_list)
        counts = dict(anchor_counts or {"dev": 10, "test": 3, "holdout": 1})
        unknown = [a for a in anchor_list if a not in buckets]
        if unknown:
            raise ValueError(f"anchor case {unknown[0]!r} is not in the batch")
        if sum(counts.values()) != len(anchor_list):
            raise ValueError(
                f"anchor counts {counts} add up to {sum(counts.values())}, "
                f"but there are {len(anchor_list)} anchor cases"
            )
        left = {
            k: max(0, v - sum(1 for a in anchor_list if pinned.get(a) == k))
            for k, v in counts.items()
        }
        new_anchors = [a for a in anchor_list if a not in pinned]
        ordered = sorted(new_anchors, key=lambda c: split_hash(c, salt, "anchor"))
        fixed.update(_quota(ordered, left))
    out = {cid: fixed.get(cid) or assign_split(cid, salt) for cid in buckets}
    by_bucket: dict[str, list[str]] = {}
    for cid, b in buckets.items():
        by_bucket.setdefault(b, []).append(cid)
    for b, members in by_bucket.items():
        movable = [c for c in members if c not in pinned and c not in anchor_set]
        _rebalance(members, movable, b, salt, out)
    return out


def read_split_file(path: str | Path, *, salt: str) -> dict[str, str]:
    """Read a stored assignment file ``{"salt": ..., "assignments": {case_id: split}}``.

    Raises:
        FksInputError: not JSON, not that shape, an unknown split name, or a salt other than
            ``salt`` (v1 keeps the salt fixed; a different one would reassign every case).
    """
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("assignments"), dict):
        raise FksInputError("expected {'salt': ..., 'assignments': {...}}", path=path)
    if data.get("salt") != salt:
        raise FksInputError(
            f"split file salt {data.get('salt')!r} differs from the configured {salt!r}",
            path=path,
            field="salt",
        )
    out = {}
    for cid, split in data["assignments"].items():
        if split not in _FRACTIONS:
            raise FksInputError(
                f"split {split!r} is not dev/test/holdout", path=path, field=f"assignments.{cid}"
            )
        out[str(cid)] = split
    return out


def write_split_file(path: str | Path, *, salt: str, assignments: Mapping[str, str]) -> None:
    """Write the assignment file atomically (case ids sorted)."""
    atomic_write_json(
        path, {"salt": salt, "assignments": {c: assignments[c] for c in sorted(assignments)}}
    )
