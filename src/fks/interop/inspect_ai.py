r"""fks inside Inspect AI: ``fks export inspect`` and ``fks import inspect``.

Export writes plain files (Inspect is not needed to write them)::

    OUT/fks_stability.py       the task: one sample per query, generate(), fks's greedy config
    OUT/fks_samples.jsonl      one row per query: query_id, ..., prompt, prompt_version
    OUT/hf_model_config.yaml   model args for Inspect's hf provider (see below)

Run it with Inspect's Hugging Face provider on a local folder or hub id::

    inspect eval OUT/fks_stability.py --model hf/NAME -M model_path=MODEL \
        --model-config OUT/hf_model_config.yaml --log-dir LOGS

and import the ``LOGS/*.eval`` file it writes.

How the protocol maps onto Inspect:

* prompt: each sample's input is :func:`fks.generate.prompts.build_prompt`'s string. Inspect
  sends it as one user message, and its hf provider renders messages with the tokenizer's chat
  template, or, without one, as ``"user: {prompt}\n"``; neither is fks's prompt. So
  ``hf_model_config.yaml`` sets ``chat_template`` to the identity template
  (:data:`IDENTITY_TEMPLATE`: the message text, nothing else) and ``do_sample: false`` (the
  provider samples by default). The import refuses an ``hf/`` log run without both;
* tokens: the provider tokenises with the tokenizer's own special tokens, as fks does;
* greedy: the task's ``GenerateConfig(temperature=0.0, max_tokens=24, seed=...)``;
* stop: no stop strings; generation stops at EOS, as in fks;
* prompt cut: the provider does not cut prompts; fks cuts at 192 tokens (``prompt_truncated``),
  so a prompt longer than 192 tokens can differ;
* decoding: the provider decodes with ``clean_up_tokenization_spaces=False``; fks uses the
  tokenizer's setting, which transformers 5 ignores for BPE tokenizers, so only a non-BPE
  tokenizer configured with clean-up (rare among causal LMs) can make the texts differ;
* other providers (OpenAI-compatible servers, vLLM, ...) apply their own chat formatting that
  the log does not show; their logs are imported with ``prompt_rendering: unverified`` in the
  manifest and a warning;
* the scorer ``answered`` is only the share of non-empty answers.

Import reads the log with :func:`inspect_ai.log.read_eval_log` (needs ``fks[inspect]``) and
checks: the task name, the prompt version (task and every sample), each sample's input and the
user message sent against fks's prompt (byte for byte), the greedy config, the hf provider's
model args, then the sample ids against the benchmark. Errors name the log, the sample's
position (as the line) and the field.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fks.configs import ConfigSet
from fks.data.load import Benchmark
from fks.errors import FksInputError
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.interop._common import (
    TASK_NAME,
    ImportedAnswer,
    check_prompt,
    check_prompt_version,
    export_rows,
    match_queries,
    write_imported_run,
)
from fks.io import atomic_write_jsonl, atomic_write_text

__all__ = ["SAMPLES_NAME", "IDENTITY_TEMPLATE", "export_inspect", "read_inspect_log",
           "import_inspect"]

log = logging.getLogger(__name__)

SAMPLES_NAME = "fks_samples.jsonl"
#: a Jinja chat template that renders the messages' text verbatim (no roles, no markup)
IDENTITY_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"

#: GenerateConfig fields that change what is sent or how it is decoded; must stay unset
_UNSET = ("system_message", "stop_seqs", "top_p", "top_k", "frequency_penalty",
          "presence_penalty", "logit_bias", "best_of", "num_choices")

_TASK = '''\
"""fks_stability as an Inspect AI task (written by `fks export inspect`; do not edit).

Prompt version {version}; benchmark checksum {checksum}; {n} queries.
`fks import inspect` refuses logs whose prompts or greedy settings differ.
"""

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState, generate

HERE = Path(__file__).resolve().parent


@scorer(metrics=[mean()])
def answered():
    """1 for a non-empty answer (fks computes the real figures after the import)."""

    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=float(bool(state.output.completion.strip())))

    return score


@task
def {task}():
    """fks's queries with fks's exact prompts, greedy, {max_new} new tokens."""
    return Task(
        dataset=json_dataset(
            str(HERE / "{samples}"),
            FieldSpec(input="prompt", id="query_id",
                      metadata=["fact_id", "relation", "condition_family", "prompt_version"]),
        ),
        solver=generate(),
        scorer=answered(),
        config=GenerateConfig(temperature=0.0, max_tokens={max_new}, seed={seed}),
        metadata={{"fks_prompt_version": "{version}", "fks_benchmark_checksum": "{checksum}"}},
    )
'''


def export_inspect(bench: Benchmark, out: str | Path, *, configs: ConfigSet) -> Path:
    """Write the Inspect task folder ``out`` (see the module docstring); returns ``out``."""
    import json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gen = configs.models.generation
    atomic_write_jsonl(out / SAMPLES_NAME, export_rows(bench))
    atomic_write_text(out / f"{TASK_NAME}.py", _TASK.format(
        version=PROMPT_VERSION, checksum=bench.checksum(), n=len(bench.queries), task=TASK_NAME,
        samples=SAMPLES_NAME, max_new=gen.max_new_tokens, seed=gen.seed))
    # JSON is YAML; json.dumps quotes the Jinja braces safely
    atomic_write_text(out / "hf_model_config.yaml",
                      "# model args for `inspect eval --model hf/...` (fks export inspect)\n"
                      f"chat_template: {json.dumps(IDENTITY_TEMPLATE)}\n"
                      "do_sample: false\n")
    return out


def _require_inspect() -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise FksInputError("reading an Inspect log needs inspect-ai: pip install "
                            "'fks[inspect]'", field="log") from None
    return read_eval_log


def _text(content: Any) -> Any:
    """Return a message's text (a string, or the text parts of a content list joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(getattr(c, "text", "") for c in content)
    return content


def _check_eval(spec: Any, plan_config: Any, configs: ConfigSet, path: Path) -> dict[str, Any]:
    """Check the task, prompt version, greedy config and hf model args; return tool info."""
    task = str(getattr(spec, "task", ""))
    if task.split("/")[-1] != TASK_NAME:
        raise FksInputError(f"expected a log of the {TASK_NAME} task, found {task!r}",
                            path=path, field="eval.task")
    check_prompt_version((getattr(spec, "metadata", None) or {}).get("fks_prompt_version"),
                         path=path, line=None, field="eval.metadata.fks_prompt_version")
    gen = configs.models.generation
    for name, want in (("max_tokens", gen.max_new_tokens), ("temperature", 0.0)):
        found = getattr(plan_config, name, None)
        if found != want:
            raise FksInputError(f"expected {want!r} (fks's greedy protocol), found {found!r}",
                                path=path, field=f"plan.config.{name}")
    # `inspect eval --temperature ...` and friends land in model_generate_config
    override = getattr(spec, "model_generate_config", None)
    for where, cfg in (("plan.config", plan_config), ("eval.model_generate_config", override)):
        for name, want in (("max_tokens", gen.max_new_tokens), ("temperature", 0.0)):
            found = getattr(cfg, name, None)
            if found is not None and found != want:
                raise FksInputError(f"expected {want!r} (fks's greedy protocol), found "
                                    f"{found!r}", path=path, field=f"{where}.{name}")
        for name in _UNSET:
            found = getattr(cfg, name, None)
            if found not in (None, [], {}):
                raise FksInputError(f"expected no {name} (fks's greedy protocol, raw prompt), "
                                    f"found {found!r}", path=path, field=f"{where}.{name}")
    model = str(getattr(spec, "model", ""))
    args = dict(getattr(spec, "model_args", None) or {})
    rendering = "unverified"
    if model.startswith("hf/"):
        if args.get("chat_template") != IDENTITY_TEMPLATE:
            raise FksInputError(
                "Inspect's hf provider wraps the prompt in a chat template (or 'user: ...'); "
                f"expected chat_template {IDENTITY_TEMPLATE!r} (--model-config "
                f"hf_model_config.yaml from fks export inspect), found "
                f"{args.get('chat_template')!r}", path=path, field="eval.model_args.chat_template")
        if args.get("do_sample") is not False:
            raise FksInputError(f"expected do_sample false (greedy), found "
                                f"{args.get('do_sample')!r}", path=path,
                                field="eval.model_args.do_sample")
        rendering = "identity chat template (verified)"
    else:
        log.warning("%s: provider %s formats prompts in ways the log does not show; imported "
                    "as prompt_rendering unverified", path, model)
    version = (getattr(spec, "packages", None) or {}).get("inspect_ai")
    return {"tool_version": version, "model": model,
            "model_args": {k: v for k, v in args.items() if k != "chat_template"},
            "model_base_url": getattr(spec, "model_base_url", None),
            "prompt_rendering": rendering}


def read_inspect_log(path: str | Path, bench: Benchmark, *, configs: ConfigSet
                     ) -> tuple[list[ImportedAnswer], dict[str, Any]]:
    """Read and check an Inspect log; ``(answers in benchmark order, tool info)``.

    Raises:
        FksInputError: not an fks_stability log, prompt version or prompt text not fks's,
            non-greedy settings, an hf provider run with a chat template, or sample ids that
            do not match the benchmark (unknown, twice, missing).
    """
    path = Path(path)
    read_eval_log = _require_inspect()
    try:
        ev = read_eval_log(str(path))
    except Exception as exc:  # a bad zip/JSON: name the file
        raise FksInputError(f"not a readable Inspect log ({type(exc).__name__}: "
                            f"{str(exc)[:200]})", path=path) from None
    info = _check_eval(ev.eval, getattr(ev.plan, "config", None), configs, path)
    queries = {q.query_id: q for q in bench.queries}
    answers: list[ImportedAnswer] = []
    for pos, sample in enumerate(ev.samples or [], start=1):
        qid = str(sample.id)
        check_prompt_version((sample.metadata or {}).get("prompt_version"), path=path,
                             line=pos, field="samples.metadata.prompt_version")
        if qid in queries:
            want = build_prompt(queries[qid])
            check_prompt(want, _text(sample.input) if isinstance(sample.input, str) else
                         _single_user_text(sample.input), path=path, line=pos,
                         field="samples.input", query_id=qid)
            sent = [m for m in (sample.messages or []) if m.role != "assistant"]
            check_prompt(want, _single_user_text(sent), path=path, line=pos,
                         field="samples.messages", query_id=qid)
        if sample.error is not None:
            answers.append(ImportedAnswer(qid, "", pos, status="error",
                                          error=str(getattr(sample.error, "message",
                                                            sample.error))[:500]))
            continue
        out = sample.output
        if out is None or not getattr(out, "choices", None):  # stop_reason would IndexError
            raise FksInputError("expected the sample's model output (at least one choice), "
                                "found none, and no error is recorded for the sample",
                                path=path, line=pos, field="samples.output.choices")
        stop = getattr(out, "stop_reason", None)
        answers.append(ImportedAnswer(qid, out.completion, pos, finish_reason={
            "max_tokens": "length", "stop": "stop"}.get(stop)))
    return match_queries(answers, bench, path), info


def _single_user_text(messages: Any) -> Any:
    """Return the only message's text when it is one user message, else what was found."""
    if isinstance(messages, list) and len(messages) == 1 and messages[0].role == "user":
        return _text(messages[0].content)
    return [f"{getattr(m, 'role', '?')}: {_text(getattr(m, 'content', m))!r}"
            for m in (messages or [])]


def import_inspect(log_path: str | Path, bench: Benchmark, out: str | Path, *,
                   configs: ConfigSet) -> Path:
    """Check an Inspect log and write ``out/generations.jsonl`` (+ manifest); returns its path."""
    log_path = Path(log_path)
    answers, info = read_inspect_log(log_path, bench, configs=configs)
    model_path = (info.get("model_args") or {}).get("model_path") or (
        info["model"].split("/", 1)[1] if "/" in info.get("model", "") else None)
    return write_imported_run(out, bench, answers, configs=configs, log_path=log_path,
                              tool="inspect", tool_info=info, model_path=model_path)
