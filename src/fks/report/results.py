"""``RUN/results.json``: one run's results in a documented, versioned schema for other tools.

:class:`Results` (pydantic, extra fields forbidden) is the one source of the schema: ``fks
results schema`` prints its JSON schema, and the README's "results.json" section lists its
fields (a test keeps the two in step). :func:`build_results` reads a run directory with the
report's own readers (:func:`fks.report.inputs.load_run` and
:func:`fks.report.headline.headline_figures`); :func:`write_results` writes the file. The
report stage (:func:`fks.report.build.build_report`) writes it for every run it reports, so
``fks run`` and ``fks demo`` leave one in each run directory; their ``--json`` prints it on
stdout.

* ``run`` (:class:`RunDetails`): model, weights sha256, benchmark checksum, backend, dtype,
  batch size, prompt version, judge and fks version, from ``evaluation_manifest.json``;
* ``bootstrap`` and ``figures``: the headline figures with their 95 % relation-clustered
  bootstrap intervals (``metrics/bootstrap_intervals.json``, all facts; the fact-level figures
  in the first coverage mode, KTS in ``full_set``, as ``fks run`` prints them), the unwhitened
  forms beside them;
* ``calibration``: per reading and confidence source, the figures over the answered rows with
  a valid confidence, with their fact-clustered intervals;
* ``sanity``: the §18 checks, each with its status and its two headline numbers.

Nothing is filled in: a value the run does not have is null, and the reason sits beside it
(``Figure.reason``, ``RunDetails.missing``, ``status: not_run`` with ``reason``); the models
refuse a null without one.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fks import __version__
from fks.generate.manifest import MANIFEST_NAME
from fks.io import atomic_write_text
from fks.report.inputs import FILES, METRICS_DIR, RunData, benchmark_checksum, load_run

__all__ = ["SCHEMA_VERSION", "RESULTS_NAME", "Figure", "Figures", "BootstrapInfo",
           "RunDetails", "CalibrationSource", "Calibration", "SanityCheck", "Sanity", "Results",
           "Delta", "ComparedRun", "Comparison", "run_details", "build_results",
           "write_results", "results_path"]

log = logging.getLogger(__name__)

#: bump on a change that breaks a reader (a field renamed, removed or retyped)
SCHEMA_VERSION = 1
RESULTS_NAME = "results.json"
INTERVALS = f"{METRICS_DIR}/bootstrap_intervals.json"
CALIBRATION = f"{METRICS_DIR}/{FILES['calibration']}"
SANITY = f"{METRICS_DIR}/{FILES['sanity']}"
KTS_SUMMARY = f"{METRICS_DIR}/{FILES['kts_summary']}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ================================================================================= figures
class Figure(_Strict):
    """One figure: its point, 95 % interval and fact set, or why any of them is null."""

    point: float | None = Field(None, description="the figure (null: see reason)")
    low: float | None = Field(None, description="lower bound of the interval")
    high: float | None = Field(None, description="upper bound of the interval")
    n_facts: int | None = Field(None, description="facts behind the figure")
    n_relations: int | None = Field(None, description="relations behind the figure")
    coverage_mode: str | None = Field(None, description="complete_family or full_set")
    source: str = Field(description="the file it was read from, relative to RUN")
    reason: str | None = Field(None, description="why the point or the interval is null")

    @model_validator(mode="after")
    def _explained(self) -> Figure:
        if (self.point is None or self.low is None or self.high is None) and not self.reason:
            raise ValueError("a figure without a point or an interval needs a reason")
        return self


#: figure -> (bootstrap key or None, description); KTS figures are read in the pair-shared mode
_FIGURES: dict[str, tuple[str | None, str]] = {
    "anchor_accuracy": ("anchor_accuracy", "anchor accuracy (K_m): share of facts whose anchor "
                        "query is answered correctly"),
    "bcs": ("bcs", "Behavioural Consistency Score (§4), fact mean"),
    "bes": ("bes", "Behavioural Entropy Stability (§5), fact mean"),
    "scr": ("scr", "behaviour class share: Stable Correct (§6, fixed fact set)"),
    "swr": ("swr", "behaviour class share: Stable Wrong"),
    "sar": ("sar", "behaviour class share: Stable Abstention"),
    "ur": ("ur", "behaviour class share: Unstable"),
    "iss": ("iss", "Internal Stability Score (§7), raw (never clipped), whitened"),
    "iss_unwhitened": ("iss_unwhitened", "ISS of the same states without whitening"),
    "kts_geo": ("kts_geo", "KTS-Geo summary (rho + 1) / 2 (§8), each pair on its shared facts"),
    "kts_geo_raw_spearman": ("kts_geo_raw_spearman", "KTS-Geo as the raw Spearman rho"),
    "kts_id": ("kts_id", "KTS-ID, chance-corrected and clipped to [0, 1] (§9)"),
    "kts": ("kts", "KTS composite (harmonic mean of KTS-Geo and KTS-ID, §10)"),
    "kts_unwhitened": (None, "KTS composite without whitening (a point: no interval)"),
    "kts_id_unwhitened": (None, "KTS-ID without whitening (a point: no interval)"),
    "kts_geo_raw_spearman_unwhitened": (None, "KTS-Geo raw Spearman without whitening (a "
                                              "point: no interval)"),
}
_BEHAVIOUR = ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur")
_KTS = ("kts_geo", "kts_geo_raw_spearman", "kts_id", "kts")


class Figures(_Strict):
    """The headline figures (all facts), each a :class:`Figure`."""

    anchor_accuracy: Figure = Field(description=_FIGURES["anchor_accuracy"][1])
    bcs: Figure = Field(description=_FIGURES["bcs"][1])
    bes: Figure = Field(description=_FIGURES["bes"][1])
    scr: Figure = Field(description=_FIGURES["scr"][1])
    swr: Figure = Field(description=_FIGURES["swr"][1])
    sar: Figure = Field(description=_FIGURES["sar"][1])
    ur: Figure = Field(description=_FIGURES["ur"][1])
    iss: Figure = Field(description=_FIGURES["iss"][1])
    iss_unwhitened: Figure = Field(description=_FIGURES["iss_unwhitened"][1])
    kts_geo: Figure = Field(description=_FIGURES["kts_geo"][1])
    kts_geo_raw_spearman: Figure = Field(description=_FIGURES["kts_geo_raw_spearman"][1])
    kts_id: Figure = Field(description=_FIGURES["kts_id"][1])
    kts: Figure = Field(description=_FIGURES["kts"][1])
    kts_unwhitened: Figure = Field(description=_FIGURES["kts_unwhitened"][1])
    kts_id_unwhitened: Figure = Field(description=_FIGURES["kts_id_unwhitened"][1])
    kts_geo_raw_spearman_unwhitened: Figure = Field(
        description=_FIGURES["kts_geo_raw_spearman_unwhitened"][1])


class BootstrapInfo(_Strict):
    """How the intervals of :class:`Figures` were made (or why there are none)."""

    status: Literal["ok", "not_run"]
    reason: str | None = None
    coverage_mode: str | None = Field(None, description="mode of the fact-level figures")
    kts_coverage_mode: str | None = Field(None, description="mode of the KTS figures")
    subset: Literal["all"] = "all"
    n_facts: int | None = None
    n_relations: int | None = None
    confidence: float | None = None
    n_resamples: int | None = None
    seed: int | None = None
    kts_bootstrapped: bool | None = None
    method: str | None = None


# ============================================================================= run details
class RunDetails(_Strict):
    """Who made the run and how, from ``evaluation_manifest.json``.

    Every null field but ``imported_from`` is named in ``missing`` with its reason.
    """

    model: str | None = Field(None, description="model name (the run folder's)")
    model_path: str | None = Field(None, description="local folder, hub id, GGUF or served name")
    revision: str | None = Field(None, description="hub revision of the model")
    weights_sha256: str | None = Field(None, description="sha256 over the weight files")
    tokenizer_sha256: str | None = None
    benchmark_checksum: str | None = None
    benchmark_path: str | None = None
    benchmark_n_facts: int | None = None
    benchmark_n_queries: int | None = None
    backend: str | None = Field(None, description="hf, vllm, openai, or the imported tool")
    device: str | None = None
    dtype: str | None = Field(None, description="the dtype the model ran in")
    batch_size: int | None = Field(None, description="prompts per generation batch")
    kernels: str | None = Field(None, description="torch version, threads, CPU ISA, oneDNN and "
                                                   "float32 matmul precision of generation")
    prompt_version: str | None = None
    judge: str | None = Field(None, description="judge name")
    judge_revision: str | None = None
    judge_kind: str | None = None
    fks_version: str | None = Field(None, description="the fks that generated the run")
    imported_from: str | None = Field(None, description="the tool whose log was imported "
                                                        "(null: generated by fks)")
    missing: dict[str, str] = Field(default_factory=dict,
                                    description="null field -> why it is null")

    @model_validator(mode="after")
    def _explained(self) -> RunDetails:
        silent = [k for k in type(self).model_fields if k not in ("missing", "imported_from")
                  and getattr(self, k) is None and not self.missing.get(k)]
        if silent:
            raise ValueError(f"null without a reason in missing: {', '.join(silent)}")
        return self


def _dig(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _why_missing(name: str, manifest: dict[str, Any]) -> str:
    """Say why a run detail is null, from what the manifest says about the run."""
    stages = manifest.get("stages") or {}
    backend = _dig(manifest, "backend.backend")
    tool = _dig(stages, "generate.imported.tool")
    if not stages.get("generate") and not manifest.get("model"):
        return f"no generation recorded in {MANIFEST_NAME}"
    if name.startswith("judge"):
        return ("the judge stage has not run" if not stages.get("judge")
                else f"not recorded in stages.judge of {MANIFEST_NAME}")
    if name == "revision":
        return "no revision recorded (a local folder, a served model or the default branch)"
    if name in ("weights_sha256", "tokenizer_sha256", "dtype", "device"):
        if backend == "openai":
            return ("the openai backend serves the model over HTTP: fks sees no weights, "
                    "tokenizer, dtype or device")
        if tool:
            return (f"generations imported from {tool}, which does not report it"
                    + ("; no hidden-state stage has bound the weights yet"
                       if name == "weights_sha256" else ""))
    if name == "kernels" and (backend == "openai" or tool):
        return "the generating server or tool does not report its kernel settings"
    if name == "batch_size" and tool:
        return f"generations imported from {tool}: the batching was {tool}'s"
    return f"not recorded in {MANIFEST_NAME}"


def _kernels(k: Any) -> str | None:
    """One line of the backend's kernel settings (``fks.generate.backends.hf.kernel_settings``)."""
    if not isinstance(k, dict):
        return None
    return ", ".join(str(x) for x in (
        f"torch {k.get('torch')}", f"{k.get('threads')} threads", k.get("cpu_capability"),
        "oneDNN" if k.get("mkldnn") else "no oneDNN",
        f"fp32 matmul {k.get('float32_matmul_precision')}",
        f"log-probs {k['logprob_kernel']}" if k.get("logprob_kernel") else None,
        f"greedy loop {k['decode_loop']}" if k.get("decode_loop") else None,
        f"linear {k['linear']}" if k.get("linear") else None,
        f"{k['workers']} workers" if k.get("workers") else None) if x)


def run_details(run_dir: str | Path, manifest: dict[str, Any], *, model: str | None = None
                ) -> RunDetails:
    """Read :class:`RunDetails` from a run's manifest (``model``: the name the metrics used).

    Raises:
        FksInputError: two stages recorded different benchmark checksums.
    """
    from fks.provenance import bound_weights

    stages = manifest.get("stages") or {}
    judge = (stages.get("judge") or {}).get("judge") or {}
    values: dict[str, Any] = {
        "model": _dig(manifest, "model.name") or model,
        "model_path": _dig(manifest, "model.path"),
        "revision": _dig(manifest, "backend.revision"),
        "weights_sha256": bound_weights(manifest)[0],
        "tokenizer_sha256": manifest.get("tokenizer_sha256")
        or _dig(manifest, "backend.tokenizer_sha256"),
        "benchmark_checksum": benchmark_checksum(Path(run_dir), manifest),
        "benchmark_path": _dig(manifest, "benchmark.path") or _dig(manifest, "benchmark.root"),
        "benchmark_n_facts": _dig(manifest, "benchmark.n_facts"),
        "benchmark_n_queries": _dig(manifest, "benchmark.n_queries"),
        "backend": _dig(manifest, "backend.backend"),
        "device": _dig(manifest, "backend.device"),
        "dtype": _dig(manifest, "backend.dtype") or _dig(manifest, "generation_config.dtype_used"),
        "batch_size": _dig(stages, "generate.batch_size"),
        "kernels": _kernels(_dig(manifest, "backend.kernels")),
        "prompt_version": manifest.get("prompt_version"),
        "judge": judge.get("name") or _dig(stages, "judge.name"),
        "judge_revision": judge.get("revision") or _dig(stages, "judge.revision"),
        "judge_kind": judge.get("kind"),
        "fks_version": manifest.get("fks_version"),
        "imported_from": _dig(stages, "generate.imported.tool"),
    }
    values = {k: (str(v) if isinstance(v, int | float) and k not in (
        "benchmark_n_facts", "benchmark_n_queries", "batch_size") else v)
              for k, v in values.items()}
    missing = {k: _why_missing(k, manifest) for k, v in values.items()
               if v is None and k != "imported_from"}
    return RunDetails(**values, missing=missing)


# ============================================================================ calibration
class CalibrationSource(_Strict):
    """One confidence source of one reading, in the confidence-coverage view.

    The view: answered rows with a valid confidence. ``figures`` is null, with ``reason``,
    when the source is not available.
    """

    available: bool
    reason: str | None = None
    n: int | None = Field(None, description="rows with a valid (confidence, outcome) pair")
    n_facts: int | None = None
    confidence_coverage: float | None = None
    end_to_end_coverage: float | None = None
    figures: dict[str, Figure] | None = Field(
        None, description="accuracy, mean_confidence, ece_equal_width, brier, nll, aurc")

    @model_validator(mode="after")
    def _explained(self) -> CalibrationSource:
        if self.figures is None and not self.reason:
            raise ValueError("a source without figures needs a reason")
        return self


class Calibration(_Strict):
    """``metrics/calibration_summary.json``: readings -> sources (or why there is none)."""

    status: Literal["ok", "not_run"]
    reason: str | None = None
    bins: int | None = Field(None, description="K of the equal-width ECE")
    readings: dict[str, dict[str, CalibrationSource]] = Field(default_factory=dict)


#: calibration figures reported per source (the confidence-coverage view)
CALIBRATION_FIGURES = ("accuracy", "mean_confidence", "ece_equal_width", "brier", "nll", "aurc")


def _calibration_figure(fig: dict[str, Any], intervals: dict[str, Any], name: str,
                        ) -> Figure:
    value = fig.get(name)
    if isinstance(value, dict):  # nll: {"nll", "clip_eps", "n_clipped"}
        value = value.get(name)
    point = float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None
    reason = None
    low = high = None
    if intervals.get("status", "ok") != "ok":
        reason = f"no interval: {intervals.get('reason') or intervals.get('status')}"
    elif isinstance(intervals.get(name), dict):
        low, high = intervals[name].get("low"), intervals[name].get("high")
        if low is None or high is None:
            reason = "no interval: no defined replicate"
    else:
        reason = "no interval computed for this figure"
    if point is None:
        reason = f"{name} not in the calibration summary" + (f"; {reason}" if reason else "")
    return Figure(point=point, low=low, high=high, n_facts=fig.get("n_facts"),
                  source=CALIBRATION, reason=reason)


def _calibration(cal: dict[str, Any] | None) -> Calibration:
    if cal is None:
        return Calibration(status="not_run", reason=f"{CALIBRATION} absent (run `fks calibrate "
                                                    "RUN`)")
    readings: dict[str, dict[str, CalibrationSource]] = {}
    for reading, rd in (cal.get("readings") or {}).items():
        out = readings[reading] = {}
        for src, block in ((rd or {}).get("sources") or {}).items():
            if not isinstance(block, dict):
                continue
            fig = block.get("figures") if block.get("available") else None
            cov = block.get("coverage") or {}
            if not isinstance(fig, dict):
                out[src] = CalibrationSource(
                    available=bool(block.get("available")),
                    reason=str(block.get("reason") or "no figures"),
                    confidence_coverage=cov.get("confidence_coverage", cov.get("coverage")),
                    end_to_end_coverage=cov.get("end_to_end_coverage"))
                continue
            intervals = block.get("intervals") or {}
            out[src] = CalibrationSource(
                available=True, n=fig.get("n"), n_facts=fig.get("n_facts"),
                confidence_coverage=cov.get("confidence_coverage", cov.get("coverage")),
                end_to_end_coverage=cov.get("end_to_end_coverage"),
                figures={name: _calibration_figure(fig, intervals, name)
                         for name in CALIBRATION_FIGURES})
    return Calibration(status="ok", bins=_dig(cal, "settings.bins"), readings=readings)


# ================================================================================= sanity
class SanityCheck(_Strict):
    """One §18 check: its status, its two headline numbers and its criteria."""

    status: str = Field(description="pass, fail or not_applicable")
    figures: dict[str, float | None] = Field(
        default_factory=dict, description="the check's headline numbers by label (e.g. "
                                          "'ISS real', 'shuffled')")
    criteria: dict[str, Any] = Field(default_factory=dict)


class Sanity(_Strict):
    """``metrics/sanity_checks.json`` (§18), or why there is none."""

    status: Literal["pass", "fail", "not_applicable", "not_run"]
    reason: str | None = None
    layer: int | None = None
    selection: str | None = None
    n_pass: int = 0
    n_fail: int = 0
    n_not_applicable: int = 0
    failed: list[str] = Field(default_factory=list)
    checks: dict[str, SanityCheck] = Field(default_factory=dict)


def _headline_numbers(head: Any) -> dict[str, float | None]:
    """``["ISS real", 0.4, "shuffled", 0.1]`` -> ``{"ISS real": 0.4, "shuffled": 0.1}``."""
    out: dict[str, float | None] = {}
    if isinstance(head, list):
        for label, value in zip(head[::2], head[1::2], strict=False):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            out[str(label)] = float(value) if ok else None
    return out


def _sanity(sanity: dict[str, Any] | None, manifest: dict[str, Any]) -> Sanity:
    from fks.metrics.internal.sanity import summarize_checks

    if not sanity or not isinstance(sanity.get("checks"), dict):
        return Sanity(status="not_run", reason=_internal_absent(manifest, SANITY))
    checks = {n: c for n, c in sanity["checks"].items() if isinstance(c, dict)}
    summ = summarize_checks({n: {"status": str(c.get("status"))} for n, c in checks.items()})
    status = ("fail" if summ["failed"] else "pass" if summ["n_pass"] else "not_applicable")
    return Sanity(
        status=status, layer=sanity.get("layer"), selection=sanity.get("selection"),
        n_pass=summ["n_pass"], n_fail=summ["n_fail"], n_not_applicable=summ["n_not_applicable"],
        failed=summ["failed"],
        checks={n: SanityCheck(status=str(c.get("status", "unknown")),
                               figures=_headline_numbers(c.get("headline")),
                               criteria=dict(c.get("criteria") or {}))
                for n, c in checks.items()})


# ================================================================================ figures
def _internal_absent(manifest: dict[str, Any], what: str) -> str:
    if _dig(manifest, "backend.backend") == "openai":
        return ("no hidden states: the openai backend serves the model over HTTP, so extract, "
                "jlens and the internal metrics (ISS, KTS, sanity checks) do not run")
    return f"{what} absent: the internal metrics have not run (`fks metrics RUN --part internal`)"


def _stage_reason(key: str, data: RunData) -> str | None:
    """Why a figure cannot exist in this run (its stage did not run or withheld it), or None."""
    if key in _BEHAVIOUR:
        if data.behavior_summary is None and not (data.metrics_dir
                                                  / FILES["behavior_per_fact"]).is_file():
            return (f"{METRICS_DIR}/{FILES['behavior_per_fact']} absent: the behavioural "
                    "metrics have not run (`fks metrics RUN --part behavior`)")
        return None
    summary, name = ((data.iss_summary, FILES["iss_summary"]) if key.startswith("iss")
                     else (data.kts_summary, FILES["kts_summary"]))
    if summary is None:
        return _internal_absent(data.manifest, f"{METRICS_DIR}/{name}")
    if "unwhitened" in key:
        return None
    undefined = summary.get("iss_undefined_reason" if key.startswith("iss")
                            else "kts_undefined_reason")
    return f"withheld by the internal metrics: {undefined}" if undefined else None


def _bootstrap_figure(key: str, head: dict[str, Any], doc_kts: bool | None) -> Figure:
    mode = head["kts_mode"] if key in _KTS else head["mode"]
    rec = head["figures"].get(key)
    if rec is None:
        return Figure(source=INTERVALS, coverage_mode=mode,
                      reason=f"not in {INTERVALS} ({mode}, all facts): no fact of that set "
                             "has a value (e.g. every fact unscorable)")
    reason = None
    if rec.get("point") is None:
        reason = "undefined on this fact set"
    elif rec.get("low") is None or rec.get("high") is None:
        reason = ("no interval: KTS is not bootstrapped (--no-kts-bootstrap), point only"
                  if key in _KTS and doc_kts is False else
                  f"no interval: {rec.get('n_valid_resamples', 0)} defined replicates")
    return Figure(point=rec.get("point"), low=rec.get("low"), high=rec.get("high"),
                  n_facts=rec.get("n_facts"), n_relations=rec.get("n_relations"),
                  coverage_mode=rec.get("coverage_mode", mode), source=INTERVALS, reason=reason)


def _kts_unwhitened(key: str, data: RunData) -> Figure:
    src = _FIGURES[key][0] or key.removesuffix("_unwhitened")
    value = _dig(data.kts_summary, f"unwhitened.{src}")
    sel = _dig(data.kts_summary, "kts_headline.selection")
    mode = sel.split("/")[1] if isinstance(sel, str) and sel.count("/") == 2 else None
    if value is None:
        return Figure(source=KTS_SUMMARY, coverage_mode=mode,
                      reason=f"unwhitened.{src} is null in {KTS_SUMMARY} (undefined)")
    return Figure(point=float(value), source=KTS_SUMMARY, coverage_mode=mode,
                  reason="no interval: the unwhitened KTS is a point (window mean of the "
                         "headline pair average)")


def _figures(data: RunData, head: dict[str, Any], doc_kts: bool | None) -> Figures:
    out: dict[str, Figure] = {}
    for key, (boot_key, _) in _FIGURES.items():
        why = _stage_reason(key, data)
        if why is not None:
            out[key] = Figure(source=INTERVALS if boot_key else KTS_SUMMARY, reason=why)
        elif boot_key is None:
            out[key] = _kts_unwhitened(key, data)
        elif not head["mode"]:
            out[key] = Figure(source=INTERVALS, reason=f"{INTERVALS} absent: the bootstrap has "
                                                       "not run (`fks report RUN`)")
        else:
            out[key] = _bootstrap_figure(boot_key, head, doc_kts)
    return Figures(**out)


def _bootstrap_info(run_dir: Path, head: dict[str, Any]) -> tuple[BootstrapInfo, bool | None]:
    from fks.io import read_json

    path = run_dir / INTERVALS
    if not head["mode"]:
        why = (f"{INTERVALS} absent: the bootstrap has not run" if not path.is_file()
               else f"{INTERVALS} has no coverage mode (no per-fact metric file)")
        return BootstrapInfo(status="not_run", reason=why), None
    doc = read_json(path)
    return BootstrapInfo(
        status="ok", coverage_mode=head["mode"], kts_coverage_mode=head["kts_mode"],
        n_facts=head["n_facts"], n_relations=head["n_relations"],
        confidence=doc.get("confidence"), n_resamples=doc.get("n_resamples"),
        seed=doc.get("seed"), kts_bootstrapped=doc.get("kts_bootstrap"),
        method=doc.get("method")), doc.get("kts_bootstrap")


# =============================================================================== results
class Results(_Strict):
    """``RUN/results.json`` (see the module docstring and the README's "results.json")."""

    schema_version: Literal[1] = SCHEMA_VERSION
    fks_version: str = Field(description="the fks that wrote this file")
    created_at: str
    run_dir: str
    run: RunDetails
    bootstrap: BootstrapInfo
    figures: Figures
    calibration: Calibration
    sanity: Sanity


def build_results(run_dir: str | Path, *, data: RunData | None = None) -> Results:
    """Read a run directory into :class:`Results` (nothing is written).

    Args:
        run_dir: the run directory.
        data: the run as :func:`~fks.report.inputs.load_run` read it, when the caller has it.

    Raises:
        FksInputError: the directory is missing or one of its files is malformed.
    """
    from fks.report.headline import headline_figures

    run_dir = Path(run_dir)
    data = data or load_run(run_dir)
    head = headline_figures(run_dir, keys=[k for k, (b, _) in _FIGURES.items() if b])
    info, kts_boot = _bootstrap_info(run_dir, head)
    return Results(
        fks_version=__version__, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        run_dir=str(run_dir), run=run_details(run_dir, data.manifest, model=data.model),
        bootstrap=info, figures=_figures(data, head, kts_boot),
        calibration=_calibration(data.calibration), sanity=_sanity(data.sanity, data.manifest))


def results_path(run_dir: str | Path) -> Path:
    """``RUN/results.json``."""
    return Path(run_dir) / RESULTS_NAME


def write_results(run_dir: str | Path, *, data: RunData | None = None,
                  results: Results | None = None) -> Path:
    """Write ``RUN/results.json`` (built by :func:`build_results` unless given); return it."""
    results = results or build_results(run_dir, data=data)
    path = results_path(run_dir)
    atomic_write_text(path, results.model_dump_json(indent=2) + "\n")
    log.debug("wrote %s", path)
    return path


# ============================================================================ comparison
class Delta(BaseModel):
    """``A - B`` of one figure with its paired interval (spec §14.2)."""

    model_config = ConfigDict(extra="allow")

    point: float | None = Field(description="A - B (null: a figure undefined)")
    low: float | None
    high: float | None
    a: float | None = None
    b: float | None = None
    n_valid_resamples: int | None = None


class ComparedRun(_Strict):
    """One side of a comparison."""

    role: Literal["a", "b"]
    model: str
    run_dir: str
    details: RunDetails


class Comparison(_Strict):
    """What ``fks compare A B --json`` prints (and ``--out`` writes)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    fks_version: str = __version__
    model_a: str
    model_b: str
    run_a: str
    run_b: str
    runs: list[ComparedRun]
    benchmark_checksum: str
    delta: Literal["A - B"] = "A - B"
    settings: dict[str, Any]
    method: str
    coverage_modes: dict[str, dict[str, dict[str, Delta]]] = Field(
        description="coverage mode -> subset (all, real, copy) -> figure -> Delta")
    created_at: str
