r"""Answer-span probability: the probability of the tokens of the judge's answer span.

``sequence_probability`` multiplies every generated token (text after the answer included) and
``first_token_probability`` is one token; neither is the probability of the answer. This module
gives the product over the tokens of the *answer span* (the judge's extraction,
:func:`fks.judge.answer_span`, the same span the judge clustered), and its per-token geometric
mean (length-normalised), both from the generation's own ``answer_logprobs``:

* ``answer_span_probability = exp(sum_{t in span} lp_t)``;
* ``answer_span_probability_per_token = exp(mean_{t in span} lp_t)``.

**Which tokens are the span's.** The span is located in ``raw_response`` (first exact match,
else the first case-insensitive match); the span's tokens are those whose character range
overlaps it. Token character ranges come from, in this order:

1. the generation record's own ``answer_token_offsets`` (``[[start, end], ...]`` into
   ``raw_response``), when a backend records them;
2. re-tokenising ``raw_response`` with the model's tokenizer (``--tokenizer``, default the
   run manifest's local model folder; ``local_files_only``, no remote code), with offsets. The
   re-tokenisation is accepted only when it gives as many tokens as ``answer_logprobs`` *and*
   decodes back to ``raw_response``; otherwise the row's reason is
   ``retokenization_mismatch`` (counted, never guessed).

Without either, the reason is ``no_token_offsets``. Invalid reasons: ``no_logprobs``,
``no_token_offsets``, ``retokenization_mismatch``, ``empty_span``, ``span_not_in_response``,
``span_has_no_tokens`` (plus the log-prob checks of ``logprob_confidences``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "SPAN_SOURCES",
    "SpanTokenizer",
    "locate_span",
    "span_token_indices",
    "span_probabilities",
    "load_span_tokenizer",
]

log = logging.getLogger(__name__)

#: output text (calibration_summary.json): the old module name stays so outputs are unchanged
#: (see ``SLICE_RULES`` in :mod:`fks.metrics.calibration.run`)
SPAN_SOURCES: dict[str, str] = {
    "answer_span_probability": (
        "exp(sum of the log-probs of the tokens of the judge's answer span): the probability "
        "of the answer string itself, text around it excluded (tokens located by character "
        "offsets; see fks.metrics._calibration_span)"),
    "answer_span_probability_per_token": (
        "exp(mean log-prob over the answer span's tokens): the length-normalised answer-span "
        "probability (geometric mean per token); not a probability of the event, a "
        "length-free score"),
}


class SpanTokenizer:
    """Token character offsets of a response, by re-tokenising with the model's tokenizer."""

    def __init__(self, tokenizer: Any, origin: str) -> None:
        self.tokenizer = tokenizer
        self.origin = origin

    def offsets(self, text: str, n_tokens: int) -> tuple[list[tuple[int, int]] | None, str | None]:
        """``(offsets, None)`` when the re-tokenisation matches, else ``(None, reason)``."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offs = enc["input_ids"], enc["offset_mapping"]
        if len(ids) != n_tokens:
            return None, "retokenization_mismatch"
        if self.tokenizer.decode(ids, skip_special_tokens=True) != text:
            return None, "retokenization_mismatch"
        return [(int(a), int(b)) for a, b in offs], None


def load_span_tokenizer(path: str | Path | None) -> SpanTokenizer | None:
    """Load a fast tokenizer from a local folder (no download, no remote code), or None.

    Returns None (and logs why) when ``path`` is None, not a folder, transformers is missing,
    or the tokenizer is not a fast one (no offsets).
    """
    if path is None or not Path(path).is_dir():
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                            trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - any loading failure means: no offsets
        log.warning("no tokenizer for answer-span offsets from %s: %s", path, exc)
        return None
    if not getattr(tok, "is_fast", False):
        log.warning("tokenizer at %s is not a fast tokenizer (no offsets)", path)
        return None
    return SpanTokenizer(tok, str(path))


def locate_span(text: str, span: str) -> tuple[int, int] | None:
    """Character range ``[start, end)`` of ``span`` in ``text``: exact, else case-insensitive.

    >>> locate_span(" Paris. It is", "Paris")
    (1, 6)
    >>> locate_span("PARIS", "paris")
    (0, 5)
    """
    if not span:
        return None
    i = text.find(span)
    if i < 0:
        low = text.casefold()
        i = low.find(span.casefold())
        if i < 0 or len(low) != len(text):  # casefold changed lengths: offsets unreliable
            return None
    return i, i + len(span)


def span_token_indices(offsets: Sequence[Sequence[int]], start: int, end: int) -> list[int]:
    """List the indices of the tokens whose (non-empty) character range overlaps ``[start, end)``.

    >>> span_token_indices([(0, 1), (1, 6), (6, 7)], 1, 6)
    [1]
    """
    return [i for i, (a, b) in enumerate(offsets) if b > a and b > start and a < end]


def span_probabilities(
    raw_response: str, span: str, logprobs: Sequence[float] | None,
    offsets: Sequence[Sequence[int]] | None, offsets_reason: str | None = None,
) -> tuple[dict[str, tuple[float | None, str | None]], int | None]:
    """Both answer-span sources of one generation, and the span's token count.

    Args:
        raw_response: the generated text.
        span: the judge's answer span.
        logprobs: ``answer_logprobs`` (already checked: finite, <= 0).
        offsets: token character ranges into ``raw_response`` (one per log-prob), or None.
        offsets_reason: why ``offsets`` is None.

    Returns:
        ``({source: (value, None) or (None, reason)}, n_span_tokens or None)``.
    """
    def invalid(why: str) -> tuple[dict[str, tuple[float | None, str | None]], None]:
        return {s: (None, why) for s in SPAN_SOURCES}, None

    if logprobs is None:
        return invalid("no_logprobs")
    if offsets is None:
        return invalid(offsets_reason or "no_token_offsets")
    if len(offsets) != len(logprobs):
        return invalid("offset_count_mismatch")
    if not span:
        return invalid("empty_span")
    where = locate_span(raw_response, span)
    if where is None:
        return invalid("span_not_in_response")
    idx = span_token_indices(offsets, *where)
    if not idx:
        return invalid("span_has_no_tokens")
    lp = np.minimum(np.asarray(logprobs, dtype=float)[idx], 0.0)
    return {"answer_span_probability": (float(np.exp(lp.sum())), None),
            "answer_span_probability_per_token": (float(np.exp(lp.mean())), None)}, len(idx)
