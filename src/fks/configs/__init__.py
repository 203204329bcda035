"""Packaged default configuration and its pydantic validation.

Four YAML files mirror the published benchmark's ``configs/``:

* ``metrics.yaml``         -- metric hyper-parameters (:class:`MetricsConfig`)
* ``models.yaml``          -- decoding protocol, model registry, judge (:class:`ModelsConfig`)
* ``relations.yaml``       -- the relation registry and its switches (:class:`RelationsConfig`)
* ``eval_conditions.yaml`` -- the eight condition families (:class:`ConditionsConfig`)

A user overrides any of them with ``fks --config PATH`` (a YAML file named like one of the four,
or a folder holding some of them). Overrides are deep-merged onto the defaults: a mapping key
replaces the default key, a list replaces the whole default list. Everything is validated at load;
a bad value raises :class:`~fks.errors.FksInputError` naming the file and field.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from fks.errors import FksInputError
from fks.io import read_yaml

__all__ = [
    "current",
    "use_overrides",
    "deep_merge",
    "FAMILIES",
    "MetricsConfig",
    "ModelsConfig",
    "GenerationConfig",
    "ModelEntry",
    "RelationsConfig",
    "RelationSpec",
    "ConditionsConfig",
    "FamilySpec",
    "ConfigSet",
    "load_configs",
    "CONFIG_NAMES",
]

#: The eight condition families, in the canonical order used for tables.
FAMILIES: tuple[str, ...] = (
    "anchor",
    "paraphrase",
    "format",
    "context",
    "multilingual",
    "reverse",
    "recognition",
    "reverse_illposed",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------------- metrics.yaml
class WhiteningConfig(_Strict):
    """Spec §7.5 whitening: PCA to ``min(pca_max_dim, d)`` or shrinkage covariance."""

    method: Literal["pca", "shrinkage"] = "pca"
    pca_max_dim: int = Field(512, ge=1)
    shrinkage_lambda: float = Field(0.1, ge=0.0, le=1.0)
    seed: int = 20260101
    #: fit on ``RUN/reference/`` (the parent benchmark's main queries) when a run has one
    #: (:mod:`fks.metrics.internal.reference`); false: on the run's own main queries
    reference: bool = True


class BootstrapConfig(_Strict):
    """Spec §14.1 relation-clustered bootstrap."""

    n_resamples: int = Field(1000, ge=1)
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    seed: int = 20260101


class NegativesConfig(_Strict):
    """Spec §7.8 same-relation negatives, sampled once and stored."""

    max_per_fact: int = Field(100, ge=1)
    seed: int = 20260101


class SanityConfig(_Strict):
    """Spec §18 sanity checks: margins and tolerances (``fks.metrics.internal.sanity``).

    Where a rule compares two figures, the tolerance is the relation-clustered bootstrap
    interval of their per-fact difference (``bootstrap.n_resamples``, ``confidence``); the
    margins below are added on top of it.
    """

    null_abs: float = Field(0.05, ge=0.0)
    label_shuffle_margin: float = Field(0.01, ge=0.0)
    negatives_margin: float = Field(0.0, ge=0.0)
    min_cosine: float = Field(0.5 ** 0.5, ge=0.0, le=1.0)
    min_transport_diff: float = Field(1e-4, ge=0.0)
    duplicate_sample: int = Field(32, ge=0)


class MetricsConfig(_Strict):
    """``metrics.yaml``."""

    main_families: list[str]
    layer_window_min_frac: float = Field(0.4, ge=0.0, le=1.0)
    whitening: WhiteningConfig = WhiteningConfig()
    tau_b: float = Field(0.8, gt=0.0, le=1.0)
    tau_b_sensitivity: list[float] = [0.7, 0.9]
    bootstrap: BootstrapConfig = BootstrapConfig()
    negatives: NegativesConfig = NegativesConfig()
    sanity: SanityConfig = SanityConfig()
    kts_geo_min_facts: int = Field(5, ge=2)
    eps: float = Field(1e-12, gt=0.0)
    coverage_modes: list[Literal["complete_family", "full_set"]] = ["complete_family", "full_set"]

    @field_validator("main_families")
    @classmethod
    def _families_known(cls, value: list[str]) -> list[str]:
        # a field validator (not a model validator) so the error names main_families
        unknown = [f for f in value if f not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
        if not value:
            raise ValueError("main_families is empty")
        return value


# ------------------------------------------------------------------------------ models.yaml
class GenerationConfig(_Strict):
    """The frozen decoding protocol (README, "The decoding protocol is part of the benchmark")."""

    do_sample: bool = False
    num_beams: int = 1
    temperature: float = 0.0
    max_new_tokens: int = Field(24, ge=1)
    max_prompt_len: int = Field(192, ge=8)
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    use_chat_template: bool = False
    seed: int = 20260101


class ModelEntry(_Strict):
    """One model of the registry."""

    name: str
    path: str
    n_layers: int = Field(ge=1)
    d_model: int = Field(ge=1)
    revision: str | None = None
    filter_model: bool = False


class JudgeEntry(_Strict):
    """The LLM judge recorded in the manifest."""

    name: str
    revision: str = "main"
    temperature: float = 0.0
    known_bias: str | None = None
    #: seconds one judge call may take (``hf:``: per batch, transformers' ``max_time``;
    #: ``openai:``: per request); a call over budget is a counted ``REVIEW_REQUIRED``
    timeout_s: float = Field(default=300.0, gt=0)
    #: prompts per judge call
    batch_size: int = Field(default=16, ge=1)


class AuxiliaryModels(_Strict):
    """Models that are used but never evaluated."""

    judge: JudgeEntry


class ModelsConfig(_Strict):
    """``models.yaml``."""

    generation: GenerationConfig
    models: list[ModelEntry] = []
    auxiliary_models: AuxiliaryModels

    def find(self, name: str) -> ModelEntry | None:
        """Return the registry entry called ``name``, or None."""
        return next((m for m in self.models if m.name == name), None)


# --------------------------------------------------------------------------- relations.yaml
class RelationSpec(_Strict):
    """One relation of the registry (see the header of ``relations.yaml``)."""

    source_relations: list[str] = Field(min_length=1)
    answer_type: str
    answer_granularity: Literal["entity", "year", "date", "number"] = "entity"
    functional: bool = True
    direction: Literal["forward", "inverse"] = "forward"
    inverse_of: str | None = None
    spec_6_2_flag: bool = False
    anchor: str
    reverse: list[str] = Field(min_length=1)
    #: extra English cloze paraphrases ({subject}, answer slot last and removed) that the
    #: builder adds to the source's patterns (for relations with too few ``[Y]``-last ones)
    paraphrases: list[str] = []
    #: the object determines the subject in the world (capital <-> country), so a reverse
    #: question can be well posed; false: every reverse question is ill-posed (reverse_illposed)
    reversible: bool = False
    #: false leaves the relation out of ``fks data build`` by default (noisy or copy-dominated
    #: relations, see ``relations.yaml``); an override file setting it true brings it back
    default_build: bool = True

    @model_validator(mode="after")
    def _templates(self) -> RelationSpec:
        if "{subject}" not in self.anchor:
            raise ValueError("anchor must contain {subject}")
        for t in self.paraphrases:
            if "{subject}" not in t or "{object}" in t:
                raise ValueError(f"paraphrase template {t!r} must contain {{subject}} only")
        for t in self.reverse:
            if "{object}" not in t:
                raise ValueError(f"reverse template {t!r} must contain {{object}}")
        if (self.direction == "inverse") != (self.inverse_of is not None):
            raise ValueError("direction: inverse requires inverse_of, and only it")
        return self


class RelationsConfig(_Strict):
    """``relations.yaml``."""

    drop_spec_6_2_flagged: bool = False
    normalize_inverse_direction: bool = False
    relations: dict[str, RelationSpec]

    @model_validator(mode="after")
    def _inverse_known(self) -> RelationsConfig:
        for rid, spec in self.relations.items():
            if spec.inverse_of is not None and spec.inverse_of not in self.relations:
                raise ValueError(
                    f"relations.{rid}.inverse_of: unknown relation {spec.inverse_of!r}"
                )
        return self

    def by_source(self) -> dict[str, str]:
        """Map a Wikidata property (``P36``) to its relation_id."""
        return {p: rid for rid, spec in self.relations.items() for p in spec.source_relations}


# --------------------------------------------------------------------- eval_conditions.yaml
Role = Literal["main", "reverse", "recognition", "diagnostic"]


class FamilySpec(_Strict):
    """One condition family: its role, target slot and the booleans derived from them."""

    role: Role
    target_slot: Literal["object", "subject"]
    is_well_posed: bool
    is_assisted: bool

    def flags(self) -> dict[str, bool]:
        """Return the three booleans every query row must carry, derived from ``role``."""
        return {
            "use_for_main_forward": self.role == "main",
            "use_for_reverse_analysis": self.role == "reverse",
            "use_for_recognition_analysis": self.role == "recognition",
        }


class ExpectedCounts(_Strict):
    """Expected fact and per-family query counts."""

    n_facts: int = Field(ge=0)
    queries: dict[str, int]


class Deviation(_Strict):
    """An accepted, documented deviation from the expected counts."""

    id: str
    family: str
    delta: int
    reason: str


class ConditionsConfig(_Strict):
    """``eval_conditions.yaml``."""

    families: dict[str, FamilySpec]
    expected_counts: ExpectedCounts | None = None
    accepted_deviations: list[Deviation] = []

    @field_validator("families")
    @classmethod
    def _all_families(cls, value: dict[str, FamilySpec]) -> dict[str, FamilySpec]:
        # a field validator (not a model validator) so the error names families
        if set(value) != set(FAMILIES):
            missing = sorted(set(FAMILIES) - set(value))
            extra = sorted(set(value) - set(FAMILIES))
            raise ValueError(
                f"families must be exactly the eight; missing {missing}, extra {extra}")
        return value

    def main_forward(self) -> list[str]:
        """Families whose role is ``main``, in canonical order."""
        return [f for f in FAMILIES if self.families[f].role == "main"]


# ---------------------------------------------------------------------------------- loading
CONFIG_NAMES: dict[str, type[BaseModel]] = {
    "metrics": MetricsConfig,
    "models": ModelsConfig,
    "relations": RelationsConfig,
    "eval_conditions": ConditionsConfig,
}


class ConfigSet(BaseModel):
    """The four validated configs, plus where each came from."""

    model_config = ConfigDict(frozen=True)

    metrics: MetricsConfig
    models: ModelsConfig
    relations: RelationsConfig
    eval_conditions: ConditionsConfig
    sources: dict[str, list[str]]

    def snapshot(self) -> dict[str, Any]:
        """Return a JSON-able copy of every value in force, for run manifests."""
        return {
            name: getattr(self, name).model_dump(mode="json") for name in CONFIG_NAMES
        } | {"sources": self.sources}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in: nested mappings merge, other values replace."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _override_files(paths: list[Path]) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {name: [] for name in CONFIG_NAMES}
    for p in paths:
        if p.is_dir():
            hits = [p / f"{n}.yaml" for n in CONFIG_NAMES if (p / f"{n}.yaml").is_file()]
            if not hits:
                raise FksInputError(
                    f"no config file in folder; expected one of {', '.join(CONFIG_NAMES)}.yaml",
                    path=p,
                )
            for h in hits:
                found[h.stem].append(h)
        elif p.is_file():
            if p.stem not in CONFIG_NAMES:
                raise FksInputError(
                    f"config file name must be one of {', '.join(CONFIG_NAMES)} (.yaml); "
                    f"found {p.name!r}",
                    path=p,
                )
            found[p.stem].append(p)
        else:
            raise FksInputError("config path not found", path=p)
    return found


def _sets(override: Any, loc: tuple[Any, ...]) -> bool:
    """Say whether ``override`` sets the value at ``loc`` (or a list or scalar holding it)."""
    for key in loc:
        if not isinstance(override, dict):
            return True  # a list or scalar above ``loc`` replaced the default wholesale
        if key not in override:
            return False
        override = override[key]
    return True


def _blame(applied: list[tuple[Path, dict[str, Any]]], loc: tuple[Any, ...]) -> Path | None:
    """Find the last override file that set the value at ``loc``, else the last applied."""
    for path, override in reversed(applied):
        if _sets(override, loc):
            return path
    return applied[-1][0] if applied else None


def load_configs(overrides: list[str | Path] | None = None) -> ConfigSet:
    """Load the packaged defaults, deep-merge ``overrides`` and validate all four configs.

    Raises:
        FksInputError: an override file is misnamed, is not valid YAML, or a value fails
            validation (the message names the file and the field).
    """
    files = _override_files([Path(p) for p in overrides or []])
    loaded: dict[str, Any] = {}
    sources: dict[str, list[str]] = {}
    pkg = resources.files("fks.configs")
    for name, model in CONFIG_NAMES.items():
        default_res = pkg / f"{name}.yaml"
        with resources.as_file(default_res) as default_path:
            data = read_yaml(default_path)
        chain = [f"fks:configs/{name}.yaml"]
        applied: list[tuple[Path, dict[str, Any]]] = []
        for path in files[name]:
            over = read_yaml(path)
            if over is None:
                continue
            if not isinstance(over, dict):
                raise FksInputError("expected a YAML mapping at top level", path=path)
            data = deep_merge(data, over)
            chain.append(str(path))
            applied.append((path, over))
        try:
            loaded[name] = model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = tuple(first.get("loc", ()))
            field = ".".join(str(x) for x in loc)
            raise FksInputError(
                first.get("msg", "invalid value"),
                path=_blame(applied, loc) or f"fks:configs/{name}.yaml",
                field=field or None,
            ) from None
        sources[name] = chain
    return ConfigSet(**loaded, sources=sources)


# ====================================================================== the configs in force
_current: dict[str, Any] = {"overrides": [], "configs": None}


def use_overrides(overrides: list[str | Path] | None = None) -> None:
    """Set the ``--config`` override files of this invocation; :func:`current` loads them.

    The root ``fks`` command calls it once per invocation, so stage CLIs read their configs with
    :func:`current` instead of importing the command line (:mod:`fks.cli`).
    """
    _current["overrides"] = list(overrides or [])
    _current["configs"] = None


def current() -> ConfigSet:
    """Return the configs in force for this invocation (defaults merged with ``--config``).

    Loaded on first use and kept until the next :func:`use_overrides`.
    """
    if _current["configs"] is None:
        _current["configs"] = load_configs(_current["overrides"])
    return _current["configs"]
