"""EvalHarness: the 11-dimension scoring suite (spec ``evalharness_11_dimensions.zh.md``).

* :mod:`~fks.evalharness.inputs` / :mod:`~fks.evalharness.schema` -- the input records (cases,
  gold) and the §8.2 report records with the §8.3 rules.
* :mod:`~fks.evalharness.components`, :mod:`~fks.evalharness.graph` -- component kernels
  (F1 variants, rank correlations, MAPE/MAE/KL terms, LinkSim and SubIso).
* :mod:`~fks.evalharness.dimensions` -- D1..D11, one pure function each (:data:`DIMENSIONS`).
* :mod:`~fks.evalharness.aggregate` -- §2 case score, §3 within-bucket percentiles, bandwidths,
  bucket reports.
* :mod:`~fks.evalharness.split` -- §4.1 hash split (:func:`assign_split`, :func:`assign_splits`).
* :mod:`~fks.evalharness.iaa` -- §5 rolling kappa, mini-review, contested points.
* :mod:`~fks.evalharness.degradation` -- §6 degradation flags and severities.
* :mod:`~fks.evalharness.gaming` -- §7 anti-gaming checks.
* :mod:`~fks.evalharness.scoring` / :mod:`~fks.evalharness.pipeline` -- :func:`score_batch` and
  the file-level :func:`run_score` behind ``fks harness score``.

The shared statistics come from fks's core: :mod:`fks.metrics.stats.bootstrap` (percentile
bootstrap, bandwidth), :func:`fks.metrics.stats.cohen_kappa`, ``fks.metrics.calibration``
(ECE) and :mod:`scipy.stats` (Spearman, Kendall).

The numeric modules are imported on first use, so ``fks`` starts quickly.
"""

from __future__ import annotations

import importlib
from typing import Any

from fks.evalharness.config import HarnessConfig, load_harness_config
from fks.evalharness.inputs import CaseRecord, GoldRecord, StructuredCognitionResult
from fks.evalharness.schema import (
    BatchReport,
    BucketReport,
    CaseScore,
    DegradationFlag,
    DimensionScore,
    IAAReport,
)
from fks.evalharness.split import assign_split, assign_splits

__all__ = [
    "BatchReport",
    "BucketReport",
    "CaseRecord",
    "CaseScore",
    "DIMENSIONS",
    "DegradationFlag",
    "DimensionScore",
    "GoldRecord",
    "HarnessConfig",
    "HarnessResult",
    "IAAReport",
    "StructuredCognitionResult",
    "assign_split",
    "assign_splits",
    "load_harness_config",
    "run_score",
    "score_batch",
]

_LAZY = {
    "DIMENSIONS": "fks.evalharness.dimensions",
    "HarnessResult": "fks.evalharness.scoring",
    "score_batch": "fks.evalharness.scoring",
    "run_score": "fks.evalharness.pipeline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fks.evalharness' has no attribute {name!r}")
