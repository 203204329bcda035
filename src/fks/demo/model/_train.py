"""Train the demo model: a byte-level BPE tokenizer and a small Llama, deterministically on CPU.

* Tokenizer: byte-level BPE (``tokenizers``) trained on the plan's corpus (every demo prompt in
  all six languages plus the answers), wrapped as a ``PreTrainedTokenizerFast`` that adds a BOS
  (a Llama-like attention sink) and has its own pad token. Byte-level: any string tokenizes.
* Model: ``LlamaForCausalLM`` from a ``LlamaConfig`` (:class:`DemoModelConfig`), initialised
  under ``torch.manual_seed(seed)``.
* Data: each example is ``encode_prompt(tokenizer, prompt)`` (exactly the ids generation feeds
  the model) + the ids of ``" " + answer`` + EOS; the loss is the mean next-token cross-entropy
  over the answer and EOS tokens only (the prompt positions are masked with ``-100``).
* Optimisation: AdamW (betas 0.9/0.95), linear warm-up then cosine decay to 10 %, gradient
  clipping at 1.0, batches drawn from seeded per-epoch permutations.
* Determinism: ``torch.use_deterministic_algorithms(True)`` and a fixed thread count during
  training (both restored afterwards); same data, config and seed give identical weights on one
  machine (BLAS kernels may round differently on other CPUs).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fks.demo.model._plan import Example
from fks.generate.prompts import encode_prompt
from fks.log import progress_bar

__all__ = ["DemoModelConfig", "SPECIAL_TOKENS", "train_tokenizer", "encode_examples",
           "train_demo_model"]

log = logging.getLogger(__name__)

#: bos, eos, pad, unk (pad is its own token, so padding is never read as end-of-sequence)
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                  "unk_token": "<unk>"}


@dataclass(frozen=True)
class DemoModelConfig:
    """Architecture and training settings of the demo model (all part of its cache key).

    The defaults (5 blocks, d = 128, 400 steps of 32 examples, about 1.3 M parameters) train in
    about 1.5 minutes on one CPU core.
    """

    n_layers: int = 5
    hidden: int = 128
    n_heads: int = 4
    n_kv_heads: int = 4
    intermediate: int = 384
    vocab_size: int = 1536
    max_positions: int = 256
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    seed: int = 20260101
    threads: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


def train_tokenizer(corpus: Sequence[str], vocab_size: int) -> Any:
    """Train a byte-level BPE on ``corpus``; returns a ``PreTrainedTokenizerFast``.

    Encoding with ``add_special_tokens=True`` prepends BOS; padding is on the left (as the
    generation backend pads).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    bos = SPECIAL_TOKENS["bos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, padding_side="left", **SPECIAL_TOKENS)


def encode_examples(tokenizer: Any, examples: Sequence[Example], max_prompt_len: int
                    ) -> list[tuple[list[int], int]]:
    """Token ids of each example and where its answer starts: ``[(ids, n_prompt), ...]``.

    ``ids = prompt ids (as generation encodes them) + ids(" " + answer) + [eos]``.
    """
    eos = tokenizer.eos_token_id
    out = []
    for ex in examples:
        prompt, _ = encode_prompt(tokenizer, ex.prompt, max_prompt_len)
        answer = tokenizer(" " + ex.answer, add_special_tokens=False)["input_ids"]
        out.append((list(prompt) + list(answer) + [eos], len(prompt)))
    return out


def _batch(rows: list[tuple[list[int], int]], pad_id: int) -> dict[str, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and answer-only ``labels`` (batch, T)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for r, (seq, n_prompt) in enumerate(rows):
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
        labels[r, n_prompt: len(seq)] = torch.tensor(seq[n_prompt:])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _batches(n: int, size: int, steps: int, generator: Any) -> Iterator[list[int]]:
    """Yield ``steps`` index batches from consecutive seeded permutations of ``range(n)``."""
    import torch

    order: list[int] = []
    for _ in range(steps):
        while len(order) < size:
            order += torch.randperm(n, generator=generator).tolist()
        yield order[:size]
        order = order[size:]


def _lr_lambda(config: DemoModelConfig) -> Any:
    def factor(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return factor


@contextlib.contextmanager
def _deterministic(threads: int) -> Iterator[None]:
    """Deterministic algorithms and a fixed thread count inside the block, restored after."""
    import torch

    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old_det)
        torch.set_num_threads(old_threads)


def _build_model(config: DemoModelConfig, tokenizer: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden,
        intermediate_size=config.intermediate, num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads, num_key_value_heads=config.n_kv_heads,
        max_position_embeddings=config.max_positions, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(config.seed)
    model = LlamaForCausalLM(llama)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def train_demo_model(
    examples: Sequence[Example],
    corpus: Sequence[str],
    out: str | Path,
    *,
    config: DemoModelConfig,
    max_prompt_len: int = 192,
) -> dict[str, Any]:
    """Train the tokenizer and the model and save both (safetensors) into ``out``.

    Args:
        examples: the training examples (:func:`fks.demo.model.plan_training`).
        corpus: the tokenizer's training texts.
        out: the folder to write (created); loadable with ``from_pretrained(out)``.
        config: architecture and optimisation settings.
        max_prompt_len: the decoding protocol's prompt cap (prompts are cut as generation cuts).

    Returns:
        training statistics: ``n_examples``, ``n_parameters``, ``steps``, ``loss_first`` and
        ``loss_last`` (mean answer loss of the first / last ``min(20, steps // 2)`` steps).
    """
    import torch

    if not examples:
        raise ValueError("the demo model needs at least one training example")
    out = Path(out)
    with _deterministic(config.threads):
        tokenizer = train_tokenizer(corpus, config.vocab_size)
        rows = encode_examples(tokenizer, examples, max_prompt_len)
        model = _build_model(config, tokenizer)
        model.train()
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        optim = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=(0.9, 0.95))
        sched = torch.optim.lr_scheduler.LambdaLR(optim, _lr_lambda(config))
        gen = torch.Generator().manual_seed(config.seed)
        losses: list[float] = []
        with progress_bar() as bar:
            task = bar.add_task("train demo model", total=config.steps)
            for idx in _batches(len(rows), min(config.batch_size, len(rows)), config.steps, gen):
                loss = model(**_batch([rows[i] for i in idx], tokenizer.pad_token_id)).loss
                optim.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optim.step()
                sched.step()
                losses.append(float(loss.detach()))
                bar.advance(task)
        model.eval()
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    window = max(1, min(20, len(losses) // 2))
    stats = {
        "n_examples": len(rows),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "steps": config.steps,
        "loss_first": sum(losses[:window]) / window,
        "loss_last": sum(losses[-window:]) / window,
    }
    log.info("demo model trained: %d examples, %d parameters, loss %.3f -> %.3f",
             stats["n_examples"], stats["n_parameters"], stats["loss_first"], stats["loss_last"])
    return stats
