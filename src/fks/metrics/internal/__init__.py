"""Internal stability: ISS and KTS (spec §7-11, §16.2-16.4) and the §18 sanity checks.

The public API is the reference kernels and the production entry points:

* :func:`family_centroid`, :func:`compute_iss_for_fact`, :func:`cross_condition_top1`,
  :func:`l2_normalize` -- the exact spec §16.2-16.4 kernels (:mod:`.kernels`);
* :func:`run_internal_metrics` and :func:`internal_part` -- ``fks metrics RUN --part internal``
  (:mod:`.engine`).

Modules of this package:

* :mod:`.kernels` -- the reference kernels the production path is tested against;
* :mod:`.space` -- transport, residualisation, whitening, embedding, centroids (§7-9);
* :mod:`.scores` -- vectorised ISS / KTS / top-1 identification (§7.7-11);
* :mod:`.negatives` -- the §10.3 confusable and random negatives;
* :mod:`.context` -- what the engine, its report and its checks share (the run context, the
  per-layer results, layer and transport loading);
* :mod:`.engine` -- the streaming stage over every layer of the hidden-state store;
* :mod:`.report` -- its outputs under ``metrics/``;
* :mod:`.sanity` -- the §18 sanity-check primitives, tolerances and one-line summaries;
* :mod:`.checks` -- the §18 checks run on an internal-metrics run;
* :mod:`.coverage` -- which families are complete for a fact;
* :mod:`.synthetic` -- writers of synthetic benchmarks, hidden-state stores and J-lens
  transports with planted states (tests and benchmarks).
"""

from fks.metrics.internal.kernels import (
    compute_iss_for_fact,
    cross_condition_top1,
    family_centroid,
    internal_part,
    l2_normalize,
    run_internal_metrics,
)

__all__ = [
    "l2_normalize",
    "family_centroid",
    "compute_iss_for_fact",
    "cross_condition_top1",
    "run_internal_metrics",
    "internal_part",
]
