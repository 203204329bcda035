"""The tiny-model fixture: deterministic, loadable, every benchmark language tokenizes."""

from __future__ import annotations

from transformers import AutoConfig, AutoTokenizer

from fks.io import sha256_file
from tiny_model import build_tiny_model

SAMPLES = {
    "en": "What is the capital of France?",
    "zh": "法国的首都是哪里？",
    "fr": "Quelle est la capitale de la France ?",
    "es": "¿Cuál es la capital de Francia?",
    "de": "Was ist die Hauptstadt von Frankreich?",
    "ru": "Какая столица у Франции?",
}


def test_fixture_is_loadable_and_every_language_round_trips(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert {tok.bos_token, tok.eos_token, tok.pad_token, tok.unk_token} == {
        "<s>", "</s>", "<pad>", "<unk>"}
    assert len({tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}) == 3
    for lang, text in SAMPLES.items():
        ids = tok(text)["input_ids"]
        assert tok.unk_token_id not in ids, lang
        assert tok.decode(ids) == text, lang
    cfg = AutoConfig.from_pretrained(tiny_model_dir)
    assert cfg.model_type == "llama" and cfg.vocab_size == len(tok)
    assert (tiny_model_dir / "model.safetensors").is_file()


def test_build_is_deterministic_and_configurable(tmp_path):
    a = build_tiny_model(tmp_path / "a", n_layers=3, hidden=32)
    b = build_tiny_model(tmp_path / "b", n_layers=3, hidden=32)
    assert sha256_file(a / "model.safetensors") == sha256_file(b / "model.safetensors")
    cfg = AutoConfig.from_pretrained(a)
    assert (cfg.num_hidden_layers, cfg.hidden_size) == (3, 32)
    c = build_tiny_model(tmp_path / "c", n_layers=3, hidden=32, seed=1)
    assert sha256_file(c / "model.safetensors") != sha256_file(a / "model.safetensors")
