"""A tiny random Llama model and an offline-trained tokenizer, for tests that need a real model.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with the ``tokenizers`` library on
a small in-memory corpus (English, French, Chinese, Russian, ... so every benchmark language
tokenizes; byte-level means *any* string tokenizes, with no unknown token ever produced), wrapped as
a ``PreTrainedTokenizerFast`` with bos/eos/pad/unk. The model is a ``LlamaForCausalLM`` built from a
``LlamaConfig`` under a fixed ``torch.manual_seed``, so two builds with the same arguments have
identical weights. Both are saved with ``save_pretrained`` (safetensors) and load back with
``AutoTokenizer``/``AutoModelForCausalLM.from_pretrained(path)``.

The model's text is garbage (random weights); tests use it for shapes, determinism, padding,
truncation, hooks and file formats, never for answers.

Used by the session fixtures ``tiny_model_dir`` (and friends) in ``tests/conftest.py``; later stages
build variants with :func:`build_tiny_model` (e.g. more layers for the J-Lens window).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CORPUS", "build_tiny_tokenizer", "build_tiny_model", "SPECIAL_TOKENS"]

#: bos, eos, pad, unk (pad is its own token, so tests can tell padding from end-of-sequence)
SPECIAL_TOKENS = {
    "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"
}

CORPUS: tuple[str, ...] = (
    "Answer the following question with a short factual answer.",
    "Question: What is the capital of France?\nAnswer: Paris",
    "Question: What is the capital of Germany?\nAnswer: Berlin",
    "Question: Which company manufactures Airbus A320?\nAnswer: Airbus",
    "The capital city of Japan is Tokyo. Reply with the name only.",
    "Madrid is a large city. Paris is the capital of which place? Answer: France",
    "Name a product manufactured by Airbus. A. Airbus B. Berlin C. Paris D. Tokyo",
    "La capitale de la France est Paris. Quelle est la capitale de l'Allemagne ?",
    "La capital de España es Madrid. ¿Cuál es la capital de Francia?",
    "Die Hauptstadt von Deutschland ist Berlin. Was ist die Hauptstadt von Japan?",
    "Столица Франции — Париж. Столица Германии — Берлин. Столица Японии — Токио.",
    "法国的首都是巴黎。德国的首都是柏林。日本的首都是東京，东京是一座大城市。",
    "空中客车公司制造飞机。问题：答案：",
    "Born in 1961 in Honolulu; died on 4 July 1826. Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 2026.",
    "was born in, is located in, is a citizen of, plays the, works for, speaks, is made by",
)


def build_tiny_tokenizer(vocab_size: int = 512):
    """Train a byte-level BPE tokenizer on :data:`CORPUS` and wrap it for ``transformers``.

    Returns:
        a ``PreTrainedTokenizerFast`` with bos/eos/pad/unk set, ``padding_side="left"`` and no
        automatic bos insertion (prompts are tokenized exactly as written).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(CORPUS), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, padding_side="left", **SPECIAL_TOKENS)


def build_tiny_model(
    path: str | Path,
    *,
    n_layers: int = 2,
    hidden: int = 64,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    intermediate: int = 128,
    seed: int = 0,
    initializer_range: float = 0.2,
    max_positions: int = 512,
) -> Path:
    """Build a tiny random Llama and its tokenizer and save both (safetensors) under ``path``.

    Args:
        path: output folder (created); loadable with ``from_pretrained(path)``.
        n_layers: decoder blocks.
        hidden: model width ``d`` (divisible by ``n_heads``).
        n_heads, n_kv_heads: attention heads (grouped-query when ``n_kv_heads < n_heads``).
        intermediate: MLP width.
        seed: ``torch.manual_seed`` used before initialisation (same seed, same weights).
        initializer_range: weight init std; larger than Llama's 0.02 so the random next-token
            distribution is peaked (clear greedy choices instead of near-ties).
        max_positions: ``max_position_embeddings``.

    Returns:
        ``Path(path)``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        max_position_embeddings=max_positions,
        initializer_range=initializer_range,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
