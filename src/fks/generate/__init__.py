"""Generation stage: the exact prompts, the backends, and the resumable runner (``fks generate``).

* :func:`build_prompt` / :func:`encode_prompt` -- the prompt string and token ids every stage uses
  (the hidden-state extraction imports them too).
* :func:`fks.generate.backends.make_backend` -- ``hf``, ``openai`` or ``vllm`` behind one interface.
* :func:`generate_run` / :func:`merge_shards` -- ``RUN/generations.jsonl`` and the run manifest.
"""

from fks.generate.prompts import PROMPT_VERSION, build_prompt, encode_prompt
from fks.generate.runner import GenerateSummary, generate_run, merge_shards

__all__ = [
    "PROMPT_VERSION",
    "build_prompt",
    "encode_prompt",
    "GenerateSummary",
    "generate_run",
    "merge_shards",
]
