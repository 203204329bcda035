"""Calibration and uncertainty (``calibration_and_uncertainty.zh.md``).

The public surface; the implementation lives in the modules of this package:

* kernels (:mod:`.core`): :func:`calibration_summary` (the text's reference function:
  equal-width ECE with ``torch.bucketize`` bins, Brier, tie-aware risk-coverage), NLL with its
  clipping threshold, reliability tables (equal-width / equal-mass-by-rank ECE, per-bin counts
  and fact-clustered intervals), AURC and risk at preset coverages in a named coverage view
  (:data:`COVERAGE_VIEWS`: confidence / end-to-end), :func:`calibration_report`;
* fact-clustered intervals (:mod:`.bootstrap`): bootstrap of the figures, per-bin Wilson at
  the effective number of facts, paired differences (source vs source, recalibrated vs raw);
* answer-span probability (:mod:`.span`): the tokens of the judge's answer span;
* recalibration (:mod:`.recalibration`): temperature scaling and isotonic regression, fitted
  on a hash-based dev split of facts and reported on the test split only;
* verbalized confidence (:mod:`.verbalized`): the frozen elicitation prompts (two
  wordings x two orders x English / the query's language), the strict parser, and the
  resumable elicitation pass through a generation backend;
* semantic entropy (:mod:`.semantic_entropy`): seeded temperature sampling with each sample's
  log-probability (``fks calibrate sample``), alias-judge clustering, P(c|x) by log-prob and
  by count, the greedy cluster's P(c*|x);
* the stage (:mod:`.run`): ``fks calibrate RUN`` -- sources x event x readings with
  coverage accounting in both coverage views, slices, provenance, outputs.

Importing this module does not import torch; torch tensors are still accepted as inputs.
"""

from fks.metrics.calibration.bootstrap import (
    fact_clustered_intervals,
    paired_difference_intervals,
    per_bin_accuracy_intervals,
)
from fks.metrics.calibration.core import (
    COVERAGE_VIEWS,
    DEFAULT_NLL_EPS,
    EMPTY_BIN_POLICY,
    as_observations,
    aurc,
    brier_score,
    bucketize_equal_width,
    calibration_report,
    calibration_summary,
    equal_mass_bins,
    equal_mass_edges,
    equal_width_boundaries,
    nll_score,
    reliability_table,
    risk_at_coverage,
    risk_coverage_curve,
    wilson_interval,
)
from fks.metrics.calibration.recalibration import (
    SPLIT_SALT,
    apply_isotonic,
    apply_temperature,
    fit_isotonic,
    fit_temperature,
    recalibration_report,
    split_of_fact,
)
from fks.metrics.calibration.run import (
    OUTCOMES,
    SOURCES,
    CalibrationSettings,
    classify_outcome,
    load_run,
    logprob_confidences,
    run_calibration,
)
from fks.metrics.calibration.semantic_entropy import (
    SE_SOURCES,
    cluster_assignment_entropy,
    cluster_probabilities,
    sample_answers,
    semantic_entropy,
)
from fks.metrics.calibration.span import SPAN_SOURCES, span_probabilities
from fks.metrics.calibration.verbalized import (
    ASK_TEMPLATES,
    ELICITATION_MAX_NEW_TOKENS,
    ELICITATION_TEMPLATE,
    ELICITATION_VERSION,
    PARSE_STATUSES,
    PRIMARY_VARIANT,
    VARIANTS,
    VerbalizedRecord,
    build_elicitation_prompt,
    build_variant_prompt,
    elicit_verbalized,
    parse_verbalized_confidence,
)

__all__ = [
    "ASK_TEMPLATES",
    "COVERAGE_VIEWS",
    "DEFAULT_NLL_EPS",
    "PRIMARY_VARIANT",
    "SE_SOURCES",
    "SPAN_SOURCES",
    "VARIANTS",
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
    "build_variant_prompt",
    "cluster_probabilities",
    "equal_mass_bins",
    "paired_difference_intervals",
    "per_bin_accuracy_intervals",
    "span_probabilities",
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
