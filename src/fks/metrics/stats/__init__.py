"""Shared statistics of the metrics stage.

Modules of this package:

* :mod:`.agreement` -- agreement statistics (:func:`cohen_kappa`,
  :func:`krippendorff_alpha_nominal`), re-exported here;
* :mod:`.bootstrap` -- the percentile bootstrap and its seeded resampling;
* :mod:`.clustered_bootstrap` -- the fact-clustered bootstrap of spec §16.1 figures;
* :mod:`.compare` -- paired comparison of two runs' estimates.
"""

from fks.metrics.stats.agreement import (
    UndefinedStatisticWarning,
    cohen_kappa,
    krippendorff_alpha_nominal,
)

__all__ = ["cohen_kappa", "krippendorff_alpha_nominal", "UndefinedStatisticWarning"]
