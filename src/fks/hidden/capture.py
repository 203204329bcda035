"""Forward hooks that read query-end residual states out of a Hugging Face causal LM.

Definitions (spec §2.4, §7.2; ARCHITECTURE "Pitfalls"):

* **Layer ``l``** (``0 <= l < L``) is the *output of decoder block* ``l``. For ``l < L - 1``
  that is ``hidden_states[l + 1]`` of ``model(..., output_hidden_states=True)``. The last entry
  ``hidden_states[L]`` is *not* the last block's output: Hugging Face applies the final norm to
  it (transformers 4.x and 5.x alike). fks reads every layer, the last included, with a forward
  hook on the block itself, so layer ``L - 1`` is the **raw** last-block output, before the
  final norm.
* **Position** is the last real (non-padding) prompt token: the last index where the attention
  mask is 1. Under left padding that is the last column; under right padding it is
  ``mask.sum() - 1``; the same rule covers both.

:class:`QueryEndCapture` serves both the separate extraction pass and the fused path inside
``model.generate``: it reads the 2-D attention mask from the model's own forward call (a
forward pre-hook with kwargs) on the *first* call after :meth:`QueryEndCapture.arm` -- the
prefill -- and ignores the decoding steps that follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "decoder_blocks",
    "model_dims",
    "block_hidden",
    "with_block_hidden",
    "last_real_positions",
    "mask_position_ids",
    "last_logits_kwargs",
    "cache_kwarg",
    "QueryEndCapture",
    "CaptureComplete",
]


def decoder_blocks(model: Any) -> Any:
    """Find the ``nn.ModuleList`` of decoder blocks of a causal LM.

    Covers Llama, Qwen, Mistral, Gemma (``model.layers``), GPT-2 (``transformer.h``), GPT-NeoX.

    Raises:
        ValueError: no known attribute holds the blocks.
    """
    candidates = []
    get_decoder = getattr(model, "get_decoder", None)
    if callable(get_decoder):
        try:
            candidates.append(get_decoder())
        except Exception:  # some models raise when they have no separate decoder
            pass
    candidates += [getattr(model, name, None) for name in ("model", "transformer", "gpt_neox")]
    candidates.append(model)
    for base in candidates:
        for attr in ("layers", "h", "blocks"):
            blocks = getattr(base, attr, None) if base is not None else None
            if blocks is not None and hasattr(blocks, "__len__") and len(blocks) > 0:
                return blocks
    raise ValueError(f"cannot find the decoder blocks of {type(model).__name__}")


def model_dims(model: Any) -> tuple[int, int]:
    """``(n_layers, d_model)``: number of decoder blocks and residual width."""
    config = model.config
    config = getattr(config, "text_config", None) or config
    d = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if d is None:
        raise ValueError(f"{type(model).__name__}'s config has no hidden_size")
    return len(decoder_blocks(model)), int(d)


def block_hidden(output: Any) -> Any:
    """Return the hidden-state tensor of a block's output.

    The output is a tensor in transformers 5.x and a tuple whose first element it is in 4.x.
    """
    return output[0] if isinstance(output, tuple) else output


def with_block_hidden(output: Any, hidden: Any) -> Any:
    """``output`` with its hidden-state tensor replaced by ``hidden`` (same container type)."""
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


def last_real_positions(attention_mask: Any) -> Any:
    """Index of the last real token of each row: ``(batch, seq) -> (batch,)`` long tensor.

    Works for left padding, right padding and no padding alike (the last column whose mask is
    nonzero). A row with no real token is an error.
    """
    import torch

    mask = attention_mask.to(torch.bool)
    if not bool(mask.any(dim=1).all()):
        raise ValueError("a row of the attention mask has no real token")
    width = mask.shape[1]
    return (width - 1 - mask.flip(1).to(torch.long).argmax(dim=1)).to(torch.long)


def mask_position_ids(attention_mask: Any) -> Any:
    """Build position ids that follow the mask, as ``generate`` does: ``cumsum(mask) - 1``.

    Padding gets 0. Real tokens get ``0..n-1`` whatever the padding side, so a prompt's states
    do not depend on how much padding its batch needed.
    """
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.masked_fill(attention_mask == 0, 0)


def cache_kwarg(model: Any) -> str:
    """Name the forward's KV-cache argument: ``cache`` (transformers 5) or ``past_key_values``."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def last_logits_kwargs(model: Any) -> dict[str, int]:
    """Return forward kwargs asking for the last position's logits only, when supported.

    ``logits_to_keep`` in transformers >= 4.50, ``num_logits_to_keep`` before. fks never uses
    the logits of these passes, so this only saves the ``(batch, seq, vocab)`` projection.
    """
    import inspect

    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


class CaptureComplete(Exception):
    """Raised by a :class:`QueryEndCapture` with ``stop_early`` once every layer is stored.

    It ends the forward pass after the last stored block: the blocks above it, the final norm
    and the unembedding never run. :func:`fks.hidden.extract.forward_query_end` catches it.
    """


class QueryEndCapture:
    """Context manager: hooks that store each block's output at the last real prompt token.

    Usage::

        with QueryEndCapture(model, layers) as cap:
            cap.arm()
            model(input_ids=ids, attention_mask=mask)        # or model.generate(...)
            states = cap.take()          # {layer: (batch, d) tensor, model dtype, on device}

    Only the first forward call after :meth:`arm` is read (the prefill of ``generate``); later
    calls (decoding steps) pass through untouched. The position comes from the ``attention_mask``
    argument of that call (absent: the last column).

    Args:
        model: the causal LM (the module whose ``forward`` receives ``attention_mask``).
        layers: block indices to store (default: all).
        stop_early: end the armed forward call, by raising :class:`CaptureComplete`, as soon
            as the highest stored block has run. Only for a pass whose output is not needed
            (extraction): a block's output depends on the blocks below it alone, so the stored
            states are the same bytes, without the final norm and the unembedding (for Gemma 3
            270M, a 262,144 x 640 product per row) and without the blocks above the highest
            stored layer. Never set it around ``generate``.
    """

    def __init__(self, model: Any, layers: Sequence[int] | None = None, *,
                 stop_early: bool = False) -> None:
        self.model = model
        self.blocks = decoder_blocks(model)
        n = len(self.blocks)
        self.layers = list(range(n)) if layers is None else [int(x) for x in layers]
        bad = [x for x in self.layers if not 0 <= x < n]
        if bad:
            raise ValueError(f"layer {bad[0]} is outside 0..{n - 1}")
        self.stop_early = stop_early
        self._handles: list[Any] = []
        self._armed = False
        self._positions: Any = None
        self._states: dict[int, Any] = {}

    def __enter__(self) -> QueryEndCapture:
        self._handles.append(
            self.model.register_forward_pre_hook(self._pre_hook, with_kwargs=True)
        )
        for layer in self.layers:
            self._handles.append(self.blocks[layer].register_forward_hook(self._block_hook(layer)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._armed = False

    def arm(self, positions: Any = None) -> None:
        """Read the next forward call (and only that one).

        Args:
            positions: the row positions to read, ``(batch,)`` long tensor; default: the last
                real token by the call's attention mask. A pass whose mask also covers a
                cached prefix (:func:`fks.hidden.extract.forward_suffix_query_end`) gives them.
        """
        self._armed = True
        self._positions = positions
        self._states = {}

    def take(self) -> dict[int, Any]:
        """Return the states of the armed call, ``{layer: (batch, d)}``, and disarm."""
        missing = [x for x in self.layers if x not in self._states]
        if missing:
            raise RuntimeError(f"no state was captured for layer {missing[0]} (was arm() called "
                               "before the forward pass?)")
        states, self._states, self._armed = self._states, {}, False
        return states

    def _pre_hook(self, module: Any, args: tuple, kwargs: dict) -> None:
        if not self._armed or self._positions is not None:
            return
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids", args[0] if args else None)
        if mask is not None and getattr(mask, "ndim", 0) == 2:
            self._positions = last_real_positions(mask)
        else:
            import torch

            ref = ids if ids is not None else kwargs["inputs_embeds"]
            self._positions = torch.full((ref.shape[0],), ref.shape[1] - 1, dtype=torch.long)

    def _block_hook(self, layer: int) -> Any:
        def hook(module: Any, args: tuple, output: Any) -> None:
            if not self._armed or layer in self._states or self._positions is None:
                return
            import torch

            hidden = block_hidden(output)
            rows = self._positions.to(hidden.device)
            batch = torch.arange(hidden.shape[0], device=hidden.device)
            self._states[layer] = hidden[batch, rows].detach()
            if self.stop_early and len(self._states) == len(set(self.layers)):
                raise CaptureComplete

        return hook
