"""Calibration and uncertainty (``calibration_and_uncertainty.zh.md``).

The public surface; the implementation lives in private modules:

* kernels (``_calibration_core``): :func:`calibration_summary` (the text's reference function:
  equal-width ECE with ``torch.bucketize`` bins, Brier, tie-aware risk-coverage), NLL with its
  clipping threshold, reliability tables (equal-width / equal-mass ECE, per-bin counts and
  Wilson intervals), AURC and risk at preset coverages, :func:`calibration_report`;
* fact-clustered bootstrap intervals (``_calibration_boot``), on the shared bootstrap core;
* recalibration (``_calibration_recal``): temperature scaling and isotonic regression, fitted
  on a hash-based dev split of facts and reported on the test split only;
* verbalized confidence (``_calibration_verbalized``): the frozen elicitation prompt, the strict
  parser, and the resumable elicitation pass through a generation backend;
* semantic entropy (``_semantic_entropy``): seeded temperature sampling
  (``fks calibrate sample``), alias-judge clustering, plug-in / Miller-Madow entropy;
* the stage (``_calibration_run``): ``fks calibrate RUN`` -- sources x event x readings with
  coverage accounting, slices, outputs.

Importing this module does not import torch; torch tensors are still accepted as inputs.
"""

from fks.metrics._calibration_boot import fact_clustered_intervals
from fks.metrics._calibration_core import (
    DEFAULT_NLL_EPS,
    EMPTY_BIN_POLICY,
    as_observations,
    aurc,
    brier_score,
    bucketize_equal_width,
    calibration_report,
    calibration_summary,
    equal_mass_edges,
    equal_width_boundaries,
    nll_score,
    reliability_table,
    risk_at_coverage,
    risk_coverage_curve,
    wilson_interval,
)
from fks.metrics._calibration_recal import (
    SPLIT_SALT,
    apply_isotonic,
    apply_temperature,
    fit_isotonic,
    fit_temperature,
    recalibration_report,
    split_of_fact,
)
from fks.metrics._calibration_run import (
    OUTCOMES,
    SOURCES,
    CalibrationSettings,
    classify_outcome,
    load_run,
    logprob_confidences,
    run_calibration,
)
from fks.metrics._calibration_verbalized import (
    ELICITATION_MAX_NEW_TOKENS,
    ELICITATION_TEMPLATE,
    ELICITATION_VERSION,
    PARSE_STATUSES,
    VerbalizedRecord,
    build_elicitation_prompt,
    elicit_verbalized,
    parse_verbalized_confidence,
)
from fks.metrics._semantic_entropy import (
    cluster_assignment_entropy,
    sample_answers,
    semantic_entropy,
)

__all__ = [
    "DEFAULT_NLL_EPS",
    "EMPTY_BIN_POLICY",
    "ELICITATION_MAX_NEW_TOKENS",
    "ELICITATION_TEMPLATE",
    "ELICITATION_VERSION",
    "OUTCOMES",
    "PARSE_STATUSES",
    "SOURCES",
    "SPLIT_SALT",
    "CalibrationSettings",
    "VerbalizedRecord",
    "apply_isotonic",
    "apply_temperature",
    "as_observations",
    "aurc",
    "brier_score",
    "bucketize_equal_width",
    "build_elicitation_prompt",
    "calibration_report",
    "calibration_summary",
    "classify_outcome",
    "cluster_assignment_entropy",
    "elicit_verbalized",
    "equal_mass_edges",
    "equal_width_boundaries",
    "fact_clustered_intervals",
    "fit_isotonic",
    "fit_temperature",
    "load_run",
    "logprob_confidences",
    "nll_score",
    "parse_verbalized_confidence",
    "recalibration_report",
    "reliability_table",
    "risk_at_coverage",
    "risk_coverage_curve",
    "run_calibration",
    "sample_answers",
    "semantic_entropy",
    "split_of_fact",
    "wilson_interval",
]
