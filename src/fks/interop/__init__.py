"""fks inside lm-evaluation-harness and Inspect AI, both directions.

* ``fks export lm-eval BENCH OUT`` / ``fks export inspect BENCH OUT``: the benchmark as a task of
  the other tool, with fks's exact prompts and greedy settings (:mod:`fks.interop.lmeval`,
  :mod:`fks.interop.inspect_ai`). Exporting writes plain files; neither tool is needed.
* ``fks import lm-eval SAMPLES --benchmark BENCH --out RUN`` / ``fks import inspect LOG ...``:
  the tool's sample log becomes ``RUN/generations.jsonl`` after checks (prompt version, exact
  prompt text, greedy settings, every query once), and ``fks run`` goes on from ``score``
  (:mod:`fks.interop._common`). Importing an Inspect log needs ``fks[inspect]``; reading an
  lm-eval samples file needs nothing beyond fks.
"""

from fks.interop._common import TASK_NAME

__all__ = ["TASK_NAME"]
