"""Judges registered by name, so the command line chooses one and the manifest records it.

==================  ====================================================================
``--judge``         judge
==================  ====================================================================
``alias``           :class:`~fks.judge.AliasJudge` (default; deterministic, offline)
``hf:PATH``         :class:`~fks.judge.LLMJudge` on a local/hub model via transformers
``openai:URL``      :class:`~fks.judge.LLMJudge` on an OpenAI-compatible server at ``URL``
                    serving ``models.yaml: auxiliary_models.judge.name``
==================  ====================================================================

LLM judges decode with the frozen protocol (greedy) except that the prompt limit is raised to
:data:`JUDGE_MAX_PROMPT_LEN` tokens: a judge prompt lists every answer of a fact, and the
192-token cut is part of the *evaluated* models' protocol, not the judge's. A prompt that is
still cut is rejected (``REVIEW_REQUIRED``), never judged half-read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fks.configs import ConfigSet
from fks.errors import FksInputError
from fks.judge._alias import AliasJudge
from fks.judge._types import Judge

__all__ = ["register_judge", "make_judge", "judge_names", "JUDGE_MAX_PROMPT_LEN",
           "chat_formatter"]

JUDGE_MAX_PROMPT_LEN = 4096

#: factory(argument after the colon or None, configs, run directory or None) -> Judge
JudgeFactory = Callable[[str | None, ConfigSet, Path | None], Judge]
_JUDGES: dict[str, JudgeFactory] = {}


def register_judge(name: str) -> Callable[[JudgeFactory], JudgeFactory]:
    """Make the decorated factory available as ``--judge name[:ARG]``."""

    def deco(factory: JudgeFactory) -> JudgeFactory:
        _JUDGES[name] = factory
        return factory

    return deco


def judge_names() -> list[str]:
    """List the registered judge names."""
    return sorted(_JUDGES)


def make_judge(spec: str, *, configs: ConfigSet, run_dir: str | Path | None = None) -> Judge:
    """Build the judge named by ``spec`` (``alias``, ``hf:PATH``, ``openai:URL``).

    Raises:
        FksInputError: an unknown name, or a missing/unexpected argument.
    """
    name, sep, arg = spec.partition(":")
    factory = _JUDGES.get(name)
    if factory is None:
        raise FksInputError(
            f"unknown judge {spec!r}; expected one of: alias, hf:PATH, openai:URL",
            field="judge",
        )
    return factory(arg if sep else None, configs, Path(run_dir) if run_dir else None)


@register_judge("alias")
def _alias_judge(arg: str | None, configs: ConfigSet, run_dir: Path | None) -> Judge:
    if arg is not None:
        raise FksInputError(f"the alias judge takes no argument; found {arg!r}", field="judge")
    return AliasJudge()


def _judge_configs(configs: ConfigSet) -> ConfigSet:
    gen = configs.models.generation.model_copy(update={"max_prompt_len": JUDGE_MAX_PROMPT_LEN})
    models = configs.models.model_copy(update={"generation": gen})
    return configs.model_copy(update={"models": models})


def _cache_path(run_dir: Path | None, name: str) -> Path | None:
    if run_dir is None:
        return None
    return run_dir / f"judge_cache_{hashlib.sha256(name.encode()).hexdigest()[:12]}.jsonl"


def _llm_judge(kind: str, arg: str | None, configs: ConfigSet, run_dir: Path | None) -> Judge:
    from fks.generate.backends import make_backend
    from fks.judge._llm import LLMJudge

    if not arg:
        raise FksInputError(f"--judge {kind}: needs a target, e.g. {kind}:PATH_OR_URL",
                            field="judge")
    jcfg = _judge_configs(configs)
    entry = configs.models.auxiliary_models.judge
    if kind == "openai":
        backend = make_backend("openai", entry.name, configs=jcfg, base_url=arg,
                               timeout=entry.timeout_s)
        name = f"openai:{entry.name}@{arg}"
    else:
        backend = make_backend(kind, arg, configs=jcfg, max_time_s=entry.timeout_s)
        name = f"{kind}:{arg}"
    revision = entry.revision if arg == entry.name or kind == "openai" else None
    fmt = chat_formatter(getattr(backend, "tokenizer", None)) if kind == "hf" else None
    return LLMJudge(backend, name=name, revision=revision,
                    temperature=jcfg.models.generation.temperature,
                    cache_path=_cache_path(run_dir, name), prompt_format=fmt,
                    batch_size=entry.batch_size,
                    prompt_format_name="chat_template" if fmt else "raw")


def chat_formatter(tokenizer: Any) -> Callable[[str], str] | None:
    """Return a formatter: the judge prompt as one user turn of the chat template (or None).

    An instruct judge is trained on its chat format, so an ``hf:`` judge whose tokenizer has a
    chat template gets its prompt as a single user message followed by the assistant cue
    (``add_generation_prompt``). This is the judge's protocol only: evaluated models always
    get the frozen raw prompt (``use_chat_template: false``). A base model (no template)
    gets the raw prompt.
    """
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None

    def fmt(prompt: str) -> str:
        return str(tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                 tokenize=False, add_generation_prompt=True))

    return fmt


@register_judge("hf")
def _hf_judge(arg: str | None, configs: ConfigSet, run_dir: Path | None) -> Judge:
    return _llm_judge("hf", arg, configs, run_dir)


@register_judge("openai")
def _openai_judge(arg: str | None, configs: ConfigSet, run_dir: Path | None) -> Judge:
    return _llm_judge("openai", arg, configs, run_dir)
