r"""The exact prompt every model sees (README, "The decoding protocol is part of the benchmark").

One function builds the prompt string for a query record and one turns it into token ids; the
generation backends and the hidden-state extraction both import them, so ISS and BCS are always
measured on the identical prompt. No chat template is applied for any model: base and instruct
models get the same raw string.

The strings (``{query}`` is the record's ``query`` field, verbatim):

* **anchor** (``condition_family == "anchor"``), the instruction wrapper::

      Answer the following question with a short factual answer.
      Question: {query}
      Answer:

* **a query with multiple-choice options** (the ``options`` field; recognition queries), the
  query, then one lettered line per option in the stored order, then the bare cue::

      {query}
      A. {options[0]}
      B. {options[1]}
      Answer:

* **every other query** (paraphrase, format, context, multilingual, reverse, ...): the perturbed
  surface form is the perturbation, so it is kept as is and gets only the bare cue::

      {query}
      Answer:

There is no trailing space or newline after ``Answer:``. Lines are joined with ``"\n"``.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from fks.errors import FksInputError

__all__ = [
    "PROMPT_VERSION",
    "ANCHOR_TEMPLATE",
    "ANSWER_CUE",
    "build_prompt",
    "encode_prompt",
]

#: Identifies the prompt strings below; recorded in every generation record and run manifest.
PROMPT_VERSION = "fks-prompt-v1"

#: The instruction wrapper of the anchor query.
ANCHOR_TEMPLATE = (
    "Answer the following question with a short factual answer.\nQuestion: {query}\nAnswer:"
)

#: The bare cue appended to every non-anchor query.
ANSWER_CUE = "\nAnswer:"

_ANCHOR_FAMILY = "anchor"


def _field(query: Any, name: str) -> Any:
    if isinstance(query, Mapping):
        return query.get(name)
    return getattr(query, name, None)


def build_prompt(query: Any) -> str:
    r"""Build the exact prompt string for one query record (strings: see the module docstring).

    Args:
        query: a query row as a dict or a :class:`fks.data.schema.Query`; reads
            ``condition_family``, ``query`` and, when present, ``options``.

    Raises:
        FksInputError: ``query``/``condition_family`` is missing or not a string, or there are
            more options than letters.

    Examples:
        >>> print(build_prompt({"condition_family": "anchor", "query": "Capital of France?"}))
        Answer the following question with a short factual answer.
        Question: Capital of France?
        Answer:
        >>> build_prompt({"condition_family": "paraphrase", "query": "The capital of France is"})
        'The capital of France is\nAnswer:'
        >>> print(build_prompt({"condition_family": "recognition", "query": "Capital of France?",
        ...                     "options": ["Berlin", "Paris"]}))
        Capital of France?
        A. Berlin
        B. Paris
        Answer:
    """
    text = _field(query, "query")
    family = _field(query, "condition_family")
    qid = _field(query, "query_id")
    for name, value in (("query", text), ("condition_family", family)):
        if not isinstance(value, str) or not value:
            raise FksInputError(
                f"a non-empty string is needed to build the prompt; found {value!r}"
                + (f" in {qid}" if qid else ""),
                field=name,
            )
    if family == _ANCHOR_FAMILY:
        return ANCHOR_TEMPLATE.format(query=text)
    options = _field(query, "options")
    if options:
        if len(options) > len(string.ascii_uppercase):
            raise FksInputError(
                f"at most {len(string.ascii_uppercase)} options can be lettered; "
                f"found {len(options)}" + (f" in {qid}" if qid else ""),
                field="options",
            )
        letters = string.ascii_uppercase[: len(options)]
        lines = [f"{letter}. {opt}" for letter, opt in zip(letters, options, strict=True)]
        return "\n".join([text, *lines]) + ANSWER_CUE
    return text + ANSWER_CUE


def encode_prompt(tokenizer: Any, prompt: str, max_prompt_len: int) -> tuple[list[int], bool]:
    """Token ids the model sees for ``prompt``, cut to ``max_prompt_len`` tokens.

    Tokenisation uses the tokenizer's own special tokens (``add_special_tokens=True``, e.g. a
    Llama BOS). Truncation rule, when the ids are longer than ``max_prompt_len``: keep a leading
    BOS (when the tokenizer added one) and the **last** ``max_prompt_len - 1`` tokens (or the last
    ``max_prompt_len`` when there is no BOS), so the end of the question and the ``Answer:`` cue
    always survive and only the start of a long context is lost.

    Args:
        tokenizer: a Hugging Face tokenizer (callable, with ``bos_token_id``).
        prompt: a string from :func:`build_prompt`.
        max_prompt_len: the protocol's prompt length cap (``generation.max_prompt_len``).

    Returns:
        ``(ids, truncated)`` with ``len(ids) <= max_prompt_len``.
    """
    ids = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if len(ids) <= max_prompt_len:
        return ids, False
    bos = getattr(tokenizer, "bos_token_id", None)
    head = ids[:1] if bos is not None and ids[0] == bos else []
    return head + ids[len(ids) - (max_prompt_len - len(head)):], True
