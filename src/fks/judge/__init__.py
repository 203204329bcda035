"""The judge stage (spec §3): reference-blind clustering, then reference-aware correctness.

* Step one -- a :class:`Judge` clusters all answers of one fact and analysis group in one
  pass (a partition, so clusters are transitive); it never sees the gold answer.
  Judges are registered by name (:func:`make_judge`): ``alias`` (default, deterministic),
  ``hf:PATH`` and ``openai:URL`` (LLM judges through the generation backends).
* Step two -- :func:`mark_clusters`, fks code shared by every judge, marks each cluster
  CORRECT / INCORRECT / ABSTAIN / AMBIGUOUS / REVIEW_REQUIRED against the gold entity and
  aliases; it never changes the clusters.
* :func:`judge_run` -- ``fks judge RUN``; :func:`judge_agreement` -- ``fks judge agreement``.
"""

from fks.judge._agreement import NoOverlap, compare_labels, judge_agreement, validate_labels
from fks.judge._alias import AliasJudge, assign_alias, join_variants
from fks.judge._correctness import Reference, cluster_correctness, mark_clusters
from fks.judge._lexicon import (
    EntityLexicon,
    Resolution,
    answer_span,
    build_lexicons,
    entity_key,
    semantic_key,
)
from fks.judge._llm import (
    JudgeOutput,
    JudgeOutputError,
    LLMJudge,
    build_judge_prompt,
    parse_judge_output,
)
from fks.judge._registry import chat_formatter, judge_names, make_judge, register_judge
from fks.judge._run import analysis_group, build_groups, judge_records, judge_run, read_scored
from fks.judge._types import (
    ABSTAIN,
    MULTIPLE,
    REVIEW_REQUIRED,
    SPECIAL_CLUSTERS,
    UNPARSEABLE,
    AnswerGroup,
    AnswerItem,
    Assignment,
    GroupResult,
    Judge,
)

__all__ = [
    "ABSTAIN",
    "MULTIPLE",
    "REVIEW_REQUIRED",
    "SPECIAL_CLUSTERS",
    "UNPARSEABLE",
    "AliasJudge",
    "AnswerGroup",
    "AnswerItem",
    "Assignment",
    "EntityLexicon",
    "GroupResult",
    "Judge",
    "JudgeOutput",
    "JudgeOutputError",
    "LLMJudge",
    "NoOverlap",
    "Reference",
    "Resolution",
    "analysis_group",
    "answer_span",
    "assign_alias",
    "join_variants",
    "build_groups",
    "build_judge_prompt",
    "build_lexicons",
    "cluster_correctness",
    "compare_labels",
    "entity_key",
    "judge_agreement",
    "judge_names",
    "judge_records",
    "judge_run",
    "make_judge",
    "chat_formatter",
    "mark_clusters",
    "parse_judge_output",
    "validate_labels",
    "read_scored",
    "register_judge",
    "semantic_key",
]
