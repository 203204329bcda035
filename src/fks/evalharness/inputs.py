"""Input records of the EvalHarness: what the system under test outputs, and the gold annotation.

Both are read from JSONL (one JSON object per line), keyed by ``case_id``:

* **cases** -- one :class:`CaseRecord` per case: ``{"case_id", "result", "harness"}``.
  ``result`` holds the six StructuredCognitionResult fields the formula table reads
  (``causal_graph``, ``phase_evidence``, ``regulation_status``, ``applicability_flags``,
  ``posterior``, ``s1``); ``harness`` holds the outputs the table reads *beside* S (M1.3
  attributes, source ranking, bias labels, historical analogues, cross-market comparison, risk
  signals, risk budget).
* **gold** -- one :class:`GoldRecord` per case: the bucket label the harness issues (§7: the
  system under test may not report its own bucket, so :class:`CaseRecord` has no such field and
  rejects one), annotation metadata, and a gold section mirroring each prediction section.

Rules shared by every model here:

* unknown fields are rejected (``extra="forbid"``), numbers must be finite;
* every section is optional. A **missing prediction** section is scored as an empty prediction
  (so omitting an answer never escapes scoring); a **missing gold** section means "not
  annotated", and the dimensions that need it are reported as ``None`` with a flag;
* free-text labels (node labels, scene names, groups ...) are compared after
  :func:`fks.text.normalize` (NFKC, casefold, no diacritics, collapsed spaces).

Dimension -> sections read (prediction side, gold side):

====  ==================================================================================
D1    ``result.causal_graph`` nodes/edges + ``harness.m13_attributes``
D2    ``harness.source_alignment`` + ``result.regulation_status``
D3    ``result.phase_evidence``
D4    ``result.causal_graph`` (nodes, edges, edge.form, scenes, reverse_forces, endogeneity);
      gold adds ``key_patterns``
D5    ``result.applicability_flags``
D6    ``harness.bias_labels`` + ``result.posterior``; gold posterior holds expert intervals
D7    ``result.s1``
D8    ``harness.history_comparison``
D9    ``harness.cross_market``; gold names the compared buckets
D10   ``harness.risk_signals``
D11   ``harness.risk_budget`` + ``result.causal_graph`` (correlation_regime,
      unbalanced_loop_warnings)
====  ==================================================================================
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "BucketLabel",
    "ApplicabilityLevel",
    "S1Mode",
    "SharedBookForm",
    "Axis",
    "GraphNode",
    "GraphEdge",
    "CausalGraph",
    "PatternGraph",
    "GoldCausalGraph",
    "PhaseEvidence",
    "FrictionLayer",
    "RegulationStatus",
    "ApplicabilityEntry",
    "ApplicabilityFlags",
    "PosteriorMode",
    "Posterior",
    "GoldPosterior",
    "S1",
    "ExternalSource",
    "GoldS1",
    "MCABucket",
    "StructuredCognitionResult",
    "GoldCognitionResult",
    "M13Attributes",
    "GoldM13Attributes",
    "SourceAssessment",
    "SourceAlignment",
    "BiasLabel",
    "BiasLabels",
    "GoldBiasLabels",
    "HistoryComparison",
    "GoldHistoryComparison",
    "CrossMarketLink",
    "CrossMarket",
    "GoldCrossMarket",
    "RiskSignals",
    "GoldRiskSignals",
    "RiskBudget",
    "HarnessOutputs",
    "GoldHarnessOutputs",
    "DoubleAnnotation",
    "CaseRecord",
    "GoldRecord",
    "M13_CLOSED_FIELDS",
    "M13_OPEN_FIELDS",
    "POLICY_FIELDS",
    "CROSS_MARKET_EDGE",
]

BucketLabel = Literal["B1", "B2", "B3", "B4", "B5a", "B5b", "B6", "B7"]
#: D5 three-state applicability level.
ApplicabilityLevel = Literal["applicable", "partial", "not-applicable"]
#: D7 the five S1 narrative-number modes.
S1Mode = Literal[
    "a-far-extrapolation",
    "b-source-missing",
    "c-narrative-data-detachment",
    "d-unit-accounting-incompatible",
    "positive-coupling",
]
#: D4 shared-book forms of ``edge.form``.
SharedBookForm = Literal[
    "acute-liquidity", "structural-holder-rotation", "policy-credit", "a-share-retail-acute"
]
#: The six MCA axes of §3.1.
Axis = Literal["L", "D", "F", "N", "C", "I"]
TaskId = Literal["A", "B", "C", "D", "D1_open", "D7_external"]

#: ``edge_type`` of a cross-market mapping edge (weighted x1.5 in D1's Acc_rel).
CROSS_MARKET_EDGE = "cross-market-mapping"
#: D1 M1.3 closed-class fields (always in the Hit_M1.3 denominator when annotated).
M13_CLOSED_FIELDS: tuple[str, ...] = (
    "holder_structure",
    "real_economy_node",
    "data_availability_grade",
)
#: D1 M1.3 open-class fields (in the denominator only with >= 2 experts at kappa >= 0.7).
M13_OPEN_FIELDS: tuple[str, ...] = (
    "business_model",
    "generic_strategy",
    "policy_reaction_function",
)
#: D2 the four policy-semantics fields of ``regulation_status.friction_layer``.
POLICY_FIELDS: tuple[str, ...] = (
    "wording_shift",
    "same_stage_spec",
    "timing_rarity",
    "counterparty_objective",
)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# ------------------------------------------------------------------------------ causal graph
class GraphNode(_In):
    """A causal-graph node."""

    id: str = Field(min_length=1, description="node id, referenced by edges")
    label: str = Field(min_length=1, description="the concept; the matching key (normalised)")


class GraphEdge(_In):
    """A directed causal-graph edge between two node ids."""

    source: str = Field(min_length=1, description="id of the cause node")
    target: str = Field(min_length=1, description="id of the effect node")
    edge_type: str = Field(
        min_length=1, description="relation type, e.g. 'causal' or 'cross-market-mapping'"
    )
    form: SharedBookForm | None = Field(None, description="D4 shared-book form, when one applies")


def _check_graph(nodes: list[GraphNode], edges: list[GraphEdge]) -> None:
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"duplicate node id {dup!r}")
    known = set(ids)
    for k, e in enumerate(edges):
        for end in (e.source, e.target):
            if end not in known:
                raise ValueError(f"edges[{k}] refers to unknown node id {end!r}")


class CausalGraph(_In):
    """``S.causal_graph``: nodes, typed edges and the lists D4/D11 grade."""

    nodes: list[GraphNode] = Field(default_factory=list, description="D1 entities, D4 F1_node")
    edges: list[GraphEdge] = Field(
        default_factory=list, description="D1 Acc_rel, D4 F1_edge/SubIso/Acc_form"
    )
    scenes: list[str] = Field(default_factory=list, description="D4 scenario hits (F1_scene)")
    reverse_forces: list[str] = Field(default_factory=list, description="D4 Recall_reverse")
    endogeneity: list[str] = Field(
        default_factory=list, description="D4 endogenous loops (counted in Recall_reverse)"
    )
    correlation_regime: list[str] = Field(
        default_factory=list, description="D11 correlation regimes (Recall_regime)"
    )
    unbalanced_loop_warnings: list[str] = Field(
        default_factory=list, description="D11 loop warnings (counted in Recall_regime)"
    )

    @model_validator(mode="after")
    def _edges_known(self) -> CausalGraph:
        _check_graph(self.nodes, self.edges)
        return self


class PatternGraph(_In):
    """A D4 key subgraph pattern (e.g. policy ignition -> liquidity absorption -> reflexivity).

    It is present in a predicted graph when it maps into it with labels and edge types kept.
    """

    name: str = Field(min_length=1, description="pattern name, for reports")
    nodes: list[GraphNode] = Field(min_length=1, description="pattern nodes (labels matched)")
    edges: list[GraphEdge] = Field(
        default_factory=list, description="pattern edges (types matched)"
    )

    @model_validator(mode="after")
    def _edges_known(self) -> PatternGraph:
        _check_graph(self.nodes, self.edges)
        return self


class GoldCausalGraph(CausalGraph):
    """Gold ``causal_graph``, plus the key patterns P_gold of D4's SubIso."""

    key_patterns: list[PatternGraph] = Field(
        default_factory=list, description="D4 P_gold; SubIso is undefined when empty"
    )


# ---------------------------------------------------------------------------- phase evidence
#: the largest lead/lag a phase-matrix cell may hold: integers up to 2**53 are exact in float64,
#: where D3's MAE is computed (an error past ``d3_mae_max_quarters`` already scores 0, so the
#: bound only refuses cells no float holds, such as 10**400, which would overflow)
PHASE_CELL_MAX = 2**53
PhaseCell = Annotated[int, Field(ge=-PHASE_CELL_MAX, le=PHASE_CELL_MAX)]


class PhaseEvidence(_In):
    """``S.phase_evidence`` (D3)."""

    clocks: dict[str, str] = Field(
        default_factory=dict, description="clock id (e.g. 'M3.t1') -> phase label (Acc_clock)"
    )
    phase_matrix: dict[str, dict[str, PhaseCell]] = Field(
        default_factory=dict,
        description="clock i -> clock j -> lead/lag in whole quarters (the MAE cells)",
    )
    contradictions: list[str] = Field(
        default_factory=list, description="cross-clock contradictions (Recall_contradict)"
    )


# ------------------------------------------------------------------------ regulation status
class FrictionLayer(_In):
    """``S.regulation_status.friction_layer``: the four decoded policy-semantics fields (D2)."""

    wording_shift: str | None = Field(None, description="措辞跃迁, wording shift")
    same_stage_spec: str | None = Field(None, description="同台规格, same-stage specification")
    timing_rarity: str | None = Field(None, description="时点罕见性, rarity of the timing")
    counterparty_objective: str | None = Field(
        None, description="对手方目标函数, counterparty objective"
    )


class RegulationStatus(_In):
    """``S.regulation_status`` (D2)."""

    friction_layer: FrictionLayer = Field(default_factory=FrictionLayer)
    regulatory_uncertainty: float = Field(
        0.0, ge=0.0, description="M2.4 activity; > 0 in an N1 bucket costs D2 0.1"
    )


# ---------------------------------------------------------------------- applicability flags
class ApplicabilityEntry(_In):
    """One law family of ``S.applicability_flags`` (D5)."""

    level: ApplicabilityLevel = Field(description="three-state applicability (Acc_appl)")
    values: dict[str, float] = Field(
        default_factory=dict,
        description="valuation: point estimates (MAPE); factor: scores whose order is graded "
        "by Kendall tau",
    )


class ApplicabilityFlags(_In):
    """``S.applicability_flags`` (D5)."""

    valuation: ApplicabilityEntry | None = None
    factor: ApplicabilityEntry | None = None
    derivatives: ApplicabilityEntry | None = None
    pe_items: list[str] = Field(
        default_factory=list,
        description="the table's Recall_PE items (the abbreviation is not expanded in the spec)",
    )


# -------------------------------------------------------------------------------- posterior
class PosteriorMode(_In):
    """One mode of a bimodal posterior."""

    value: float = Field(description="location of the mode")
    weight: float = Field(ge=0.0, le=1.0, description="probability mass of the mode")


class Posterior(_In):
    """``S.posterior`` (D6 bimodal check)."""

    mode_a: PosteriorMode | None = None
    mode_b: PosteriorMode | None = None


class GoldPosterior(_In):
    """Gold for D6's bimodal check: expert intervals for the distance between the two modes."""

    expert_intervals: list[tuple[float, float]] = Field(
        min_length=1,
        description="one [low, high] per expert for |value_a - value_b|; >= 2 experts with "
        "IoU >= 0.8 are needed, else Acc_bimodal is undefined",
    )

    @model_validator(mode="after")
    def _ordered(self) -> GoldPosterior:
        for k, (lo, hi) in enumerate(self.expert_intervals):
            if lo > hi:
                raise ValueError(f"expert_intervals[{k}]: low {lo} > high {hi}")
        return self


# ---------------------------------------------------------------------------------------- S1
class S1(_In):
    """``S.s1`` (D7)."""

    s1_mode: list[S1Mode] = Field(
        default_factory=list, description="the modes present (multi-label; first = primary)"
    )
    coupling_direction: Literal["positive", "negative", "none"] | None = Field(
        None, description="read for the report only; D7's formula does not grade it"
    )
    coupling_strength: float | None = Field(
        None, description="graded by Spearman against the external label, within a bucket"
    )
    backtrigger: list[Literal["M5", "M6", "M7"]] = Field(
        default_factory=list, description="modules the S1 result triggers back (Hit_backtrig)"
    )


class ExternalSource(_In):
    """One external answer source of a D7 gold label.

    §7: "外部信源占位字符串 -> 必含可验证 URL + 时间戳 + 关键字段抽取". A bare name
    (``"Damodaran"``) is a placeholder and is rejected: a source needs a verifiable ``url``
    (http/https), the ``retrieved_at`` timestamp (ISO 8601) and at least one extracted
    ``key_fields`` entry (e.g. ``{"implied_erp": "4.6%"}``).
    """

    name: str = Field(min_length=1, description="e.g. Damodaran, Marks, Stratechery")
    url: AnyHttpUrl
    retrieved_at: datetime
    key_fields: dict[str, str] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_placeholder(cls, data: Any) -> Any:
        if isinstance(data, str):
            raise ValueError(
                f"placeholder string {data!r}: an external source needs name, url, "
                "retrieved_at and key_fields (§7)"
            )
        return data


class GoldS1(_In):
    """Gold ``s1`` (D7); >= 1 external answer source per case (§1 D7).

    ``s1_mode``, ``coupling_strength`` and ``backtrigger`` are the external labels (from
    ``external_sources``, so every annotated case has at least one external answer: a row
    without a source is rejected as bad input). ``self_s1_mode`` is the optional self label
    used only for the D7 pool admission (see :func:`fks.evalharness.iaa.d7_pool_admission`).
    """

    s1_mode: list[S1Mode] = Field(default_factory=list)
    coupling_strength: float | None = Field(None, description="the external label")
    backtrigger: list[Literal["M5", "M6", "M7"]] = Field(default_factory=list)
    external_sources: list[ExternalSource] = Field(
        min_length=1,
        description="verifiable sources (Damodaran, Marks, Stratechery, FT Alphaville, NYU Stern)",
    )
    self_s1_mode: S1Mode | None = Field(
        None,
        description="the project's own (self) label of the primary mode, set on the 14 "
        "self-annotated cases; compared with the external primary mode ``s1_mode[0]`` for the "
        "§1 D7 pool admission (cross-IAA kappa >= the D7_external threshold)",
    )


class StructuredCognitionResult(_In):
    """The six StructuredCognitionResult (contract 1.1) fields the formula table reads."""

    causal_graph: CausalGraph | None = None
    phase_evidence: PhaseEvidence | None = None
    regulation_status: RegulationStatus | None = None
    applicability_flags: ApplicabilityFlags | None = None
    posterior: Posterior | None = None
    s1: S1 | None = None


class GoldCognitionResult(_In):
    """Gold sections mirroring :class:`StructuredCognitionResult`."""

    causal_graph: GoldCausalGraph | None = None
    phase_evidence: PhaseEvidence | None = None
    regulation_status: RegulationStatus | None = None
    applicability_flags: ApplicabilityFlags | None = None
    posterior: GoldPosterior | None = None
    s1: GoldS1 | None = None

    @model_validator(mode="after")
    def _valuation_nonzero(self) -> GoldCognitionResult:
        flags = self.applicability_flags
        if flags is not None and flags.valuation is not None:
            zero = [k for k, v in flags.valuation.values.items() if v == 0]
            if zero:
                raise ValueError(f"gold valuation value {zero[0]!r} is 0 (MAPE divides by it)")
        return self


# -------------------------------------------------------------------- outputs beside S (M1.3 ...)
class M13Attributes(_In):
    """M1.3 ontology attributes (D1 Hit_M1.3): three closed-class, three open-class fields."""

    holder_structure: str | None = Field(None, description="closed: 持有人结构")
    real_economy_node: str | None = Field(None, description="closed: 实体经济网络节点")
    data_availability_grade: str | None = Field(None, description="closed: 数据可得性等级")
    business_model: str | None = Field(None, description="open: 商业模式")
    generic_strategy: str | None = Field(None, description="open: 通用战略")
    policy_reaction_function: str | None = Field(None, description="open: 政策反应函数")


class GoldM13Attributes(M13Attributes):
    """Gold M1.3 attributes; a field left ``None`` is not graded."""

    open_fields_n_experts: int = Field(
        1, ge=1, description="experts who labelled the open fields independently"
    )
    open_fields_kappa: float | None = Field(
        None, ge=-1.0, le=1.0, description="their Cohen's kappa (open fields count at >= 0.7)"
    )


class SourceAssessment(_In):
    """One information source and how reliable the system judges it (D2)."""

    source_id: str = Field(min_length=1)
    reliability: float = Field(description="ranking score, higher = more reliable (rho_s)")
    account_reliable: bool | None = Field(None, description="account axis (F1_dual)")
    channel_reliable: bool | None = Field(None, description="channel axis (F1_dual)")
    url: str | None = Field(None, description="verifiable URL (§7), reported only")
    timestamp: str | None = Field(None, description="retrieval time (§7), reported only")


class SourceAlignment(_In):
    """Source ranking and homogenised groups (D2 rho_s', Recall_div, F1_dual)."""

    sources: list[SourceAssessment] = Field(default_factory=list)
    homogeneous_groups: list[str] = Field(
        default_factory=list, description="source groups identified as homogenised"
    )

    @model_validator(mode="after")
    def _unique(self) -> SourceAlignment:
        ids = [s.source_id for s in self.sources]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate source_id")
        return self


class BiasLabel(_In):
    """A predicted bias label with its confidence (D6 F1 and ECE)."""

    label: str = Field(min_length=1)
    confidence: float | None = Field(None, ge=0.0, le=1.0, description="P(label is right)")


class BiasLabels(_In):
    """Predicted M7a / M7b bias labels (D6)."""

    m7a: list[BiasLabel] = Field(default_factory=list)
    m7b: list[BiasLabel] = Field(default_factory=list)


class GoldBiasLabels(_In):
    """Gold M7a / M7b bias label sets (D6)."""

    m7a: list[str] = Field(default_factory=list)
    m7b: list[str] = Field(default_factory=list)


class HistoryComparison(_In):
    """Historical analogues (D8)."""

    selected: list[str] = Field(
        default_factory=list, description="chosen analogue case ids, best first (Acc_select)"
    )
    analogue_scores: dict[str, float] = Field(
        default_factory=dict, description="similarity per candidate (rho_s)"
    )
    similarities: list[str] = Field(default_factory=list, description="same points (F1_same_diff)")
    differences: list[str] = Field(default_factory=list, description="different points")
    rejected: list[str] = Field(
        default_factory=list, description="analogues rejected as misleading (Acc_wrong)"
    )


class GoldHistoryComparison(_In):
    """Gold for D8."""

    comparison_type: Literal["cross_period_same_bucket", "cross_bucket_same_period"] = Field(
        description="the two D8 sample types, reported apart"
    )
    acceptable: list[str] = Field(min_length=1, description="analogues a correct choice may pick")
    analogue_scores: dict[str, float] = Field(default_factory=dict)
    similarities: list[str] = Field(default_factory=list)
    differences: list[str] = Field(default_factory=list)
    misleading: list[str] = Field(
        default_factory=list, description="tempting but wrong analogues (Acc_wrong)"
    )


class CrossMarketLink(_In):
    """A cross-market mapping link (D9)."""

    source_market: str = Field(min_length=1)
    target_market: str = Field(min_length=1)
    channel: str = Field(min_length=1, description="transmission channel; macro-F1 class")


class CrossMarket(_In):
    """Cross-market comparison (D9)."""

    links: list[CrossMarketLink] = Field(default_factory=list)
    differences: list[str] = Field(default_factory=list, description="F1_diff")
    mca_axis_differences: list[Axis] = Field(
        default_factory=list, description="MCA axes on which the compared buckets differ (Acc_mca)"
    )
    spread_direction: Literal["widen", "narrow", "stable"] | None = Field(
        None, description="Acc_spread"
    )


class GoldCrossMarket(_In):
    """Gold for D9: the buckets compared (issued by the harness) and the expected answers.

    The MCA axes on which the buckets differ are derived from ``harness.yaml``, not annotated.
    """

    compared_buckets: list[BucketLabel] = Field(
        min_length=1, description="buckets the case compares with (its own is added)"
    )
    links: list[CrossMarketLink] = Field(default_factory=list)
    differences: list[str] = Field(default_factory=list)
    spread_direction: Literal["widen", "narrow", "stable"] | None = None


class RiskSignals(_In):
    """Data reliability and risk signals (D10)."""

    reliability_grade: str | None = Field(None, description="Acc_grade")
    signals: list[str] = Field(
        default_factory=list, description="signal classes flagged (harness.yaml lists five)"
    )


class GoldRiskSignals(RiskSignals):
    """Gold for D10."""

    healthy_control: bool = Field(False, description="a healthy control case (no signal)")
    post_fraud: bool = Field(False, description="a case later shown to be fraudulent")

    @model_validator(mode="after")
    def _healthy_has_no_signal(self) -> GoldRiskSignals:
        if self.healthy_control and self.signals:
            raise ValueError("a healthy control case cannot carry gold risk signals")
        return self


class RiskBudget(_In):
    """Risk budget and portfolio layer (D11)."""

    mrc: dict[str, float] = Field(
        default_factory=dict, description="marginal risk contribution per asset (MAPE_MRC)"
    )
    budget: dict[str, float] = Field(
        default_factory=dict, description="risk budget per asset (normalised to a distribution)"
    )
    dominant_factor: str | None = Field(None, description="Acc_factor")

    @field_validator("budget")
    @classmethod
    def _budget_nonnegative(cls, budget: dict[str, float]) -> dict[str, float]:
        neg = [k for k, v in budget.items() if v < 0]
        if neg:
            raise ValueError(f"budget[{neg[0]!r}] is negative")
        # issue 28: D11 normalises the budget by its total; a total past the float range
        # (e.g. two entries of 1e308) is infinite in effect, and refused like any non-finite
        # number (it used to normalise to zeros and earn the perfect KL term)
        if not math.isfinite(sum(budget.values())):
            raise ValueError("budget values sum past the float range (non-finite in effect)")
        return budget


class HarnessOutputs(_In):
    """Outputs of the system under test that the formula table reads beside the six S fields."""

    m13_attributes: M13Attributes | None = None
    source_alignment: SourceAlignment | None = None
    bias_labels: BiasLabels | None = None
    history_comparison: HistoryComparison | None = None
    cross_market: CrossMarket | None = None
    risk_signals: RiskSignals | None = None
    risk_budget: RiskBudget | None = None


class GoldHarnessOutputs(_In):
    """Gold sections mirroring :class:`HarnessOutputs`."""

    m13_attributes: GoldM13Attributes | None = None
    source_alignment: SourceAlignment | None = None
    bias_labels: GoldBiasLabels | None = None
    history_comparison: GoldHistoryComparison | None = None
    cross_market: GoldCrossMarket | None = None
    risk_signals: GoldRiskSignals | None = None
    risk_budget: RiskBudget | None = None

    @model_validator(mode="after")
    def _mrc_nonzero(self) -> GoldHarnessOutputs:
        rb = self.risk_budget
        if rb is not None:
            zero = [k for k, v in rb.mrc.items() if v == 0]
            if zero:
                raise ValueError(f"gold mrc {zero[0]!r} is 0 (MAPE divides by it)")
            if rb.budget and sum(rb.budget.values()) <= 0:
                raise ValueError("gold budget sums to 0")
        return self


class DoubleAnnotation(_In):
    """One item labelled by two annotators (and a third after a mini-review), §5."""

    task_id: TaskId = Field(description="SLA task A-D, D1 open fields, or D7 external labels")
    item: str = Field("", description="what was labelled (field name, point), for audit")
    label_a: str = Field(min_length=1)
    label_b: str = Field(min_length=1)
    label_c: str | None = Field(None, description="third annotator (mini-review 2:1 vote)")


# -------------------------------------------------------------------------------- the records
class CaseRecord(_In):
    """One line of the cases file: the system's output for one case."""

    case_id: str = Field(min_length=1)
    result: StructuredCognitionResult = Field(default_factory=StructuredCognitionResult)
    harness: HarnessOutputs = Field(default_factory=HarnessOutputs)


class MCABucket(_In):
    """§8.1 ``MCABucket``: the harness-issued bucket metadata of a case (never self-reported).

    ``axis_1`` .. ``axis_7`` hold the MCA axis positions (e.g. ``"L1"``, ``"F1-F2"``; v1 uses six
    axes, the seventh is optional), ``worst_axis`` names the weakest one, ``tag_version`` the
    tagging version. On a gold row its ``bucket_label`` must equal the row's ``bucket_label``.
    """

    axis_1: str | None = None
    axis_2: str | None = None
    axis_3: str | None = None
    axis_4: str | None = None
    axis_5: str | None = None
    axis_6: str | None = None
    axis_7: str | None = None
    bucket_label: BucketLabel
    worst_axis: str | None = None
    tag_version: str = Field(min_length=1)


class GoldRecord(_In):
    """One line of the gold file: the harness-issued bucket and the annotations of one case."""

    case_id: str = Field(min_length=1)
    bucket_label: BucketLabel = Field(description="issued by the harness (§7), never self-reported")
    self_annotated_anchor: bool = Field(
        False, description="one of the 14 self-annotated cases placed 10/3/1 (§4.1)"
    )
    bucket_anchor: bool = Field(
        False,
        description="a §3.2 expert-consensus anchor of its bucket (kappa >= 0.7); the median "
        "score of a bucket's anchors is its full-mark reference",
    )
    iaa_kappa: float | None = Field(
        None, ge=-1.0, le=1.0, description="kappa of the annotation behind this row (reported)"
    )
    double_annotations: list[DoubleAnnotation] = Field(
        default_factory=list, description="items for the §5 IAA reports, in annotation order"
    )
    mca_bucket: MCABucket | None = Field(
        None, description="§8.1 bucket metadata issued by the harness (optional)"
    )
    result: GoldCognitionResult = Field(default_factory=GoldCognitionResult)
    harness: GoldHarnessOutputs = Field(default_factory=GoldHarnessOutputs)

    @model_validator(mode="after")
    def _bucket_agrees(self) -> GoldRecord:
        if self.mca_bucket is not None and self.mca_bucket.bucket_label != self.bucket_label:
            raise ValueError(
                f"mca_bucket.bucket_label {self.mca_bucket.bucket_label} differs from "
                f"bucket_label {self.bucket_label}"
            )
        return self
