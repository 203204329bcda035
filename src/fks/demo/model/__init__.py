"""The demo model: a tiny causal LM that fks trains itself, offline and deterministically.

``fks demo`` evaluates it on the embedded demo benchmark. It is trained on part of the demo
facts and phrasings (:mod:`fks.demo.model._plan`: some facts under every family, some under
anchor and paraphrases only, a few taught to abstain, the rest never seen), so the report shows
real differences between families, between stable-correct and unstable facts, and between
layers. Training (:mod:`fks.demo.model._train`) takes about a minute on one CPU core and is
cached (:mod:`fks.demo.model._cache`).
"""

from fks.demo.model._cache import INFO_NAME, cache_root, demo_model_key, ensure_demo_model
from fks.demo.model._plan import (
    ABSTAIN_ANSWER,
    ROLE_SHARES,
    ROLES,
    TAUGHT_LANGUAGES,
    Example,
    TrainingPlan,
    assign_roles,
    plan_training,
)
from fks.demo.model._train import (
    SPECIAL_TOKENS,
    DemoModelConfig,
    encode_examples,
    train_demo_model,
    train_tokenizer,
)

__all__ = [
    "ABSTAIN_ANSWER",
    "INFO_NAME",
    "ROLES",
    "ROLE_SHARES",
    "SPECIAL_TOKENS",
    "TAUGHT_LANGUAGES",
    "DemoModelConfig",
    "Example",
    "TrainingPlan",
    "assign_roles",
    "cache_root",
    "demo_model_key",
    "encode_examples",
    "ensure_demo_model",
    "plan_training",
    "train_demo_model",
    "train_tokenizer",
]
