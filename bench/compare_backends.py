"""Compare two runs' ``generations.jsonl`` query by query (e.g. ``--backend hf`` against a
llama.cpp server through ``--backend openai`` on the same queries).

Usage::

    python bench/compare_backends.py RUN_A RUN_B [--show 10]

Prints the share of identical answers, of identical first lines, the finish reasons side by
side, and sorts every difference into one kind:

* ``A stops earlier`` / ``B stops earlier``: one answer is a proper prefix of the other (stop
  handling: EOS set, stop strings, ``max_tokens``);
* ``diverge``: the greedy paths part at some character (numerics: quantized kernels against
  dequantized weights, or tokenization); the character offset of the split is summarised;
* ``empty in A`` / ``empty in B``.

The greedy log-probs of the first token are compared where both runs have them (a large gap
with the same first token points at different numerics, not at a different prompt).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

from fks.data.schema import GenerationRecord
from fks.io import read_jsonl


def _kind(a: str, b: str) -> tuple[str, int | None]:
    if a == b:
        return "identical", None
    if not a.strip():
        return "empty in A", None
    if not b.strip():
        return "empty in B", None
    if b.startswith(a):
        return "A stops earlier", None
    if a.startswith(b):
        return "B stops earlier", None
    split = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return "diverge", split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--show", type=int, default=8, help="differences to print")
    args = ap.parse_args()
    a = {r.query_id: r for r in read_jsonl(args.run_a / "generations.jsonl", GenerationRecord)}
    b = {r.query_id: r for r in read_jsonl(args.run_b / "generations.jsonl", GenerationRecord)}
    common = [q for q in a if q in b and a[q].status == b[q].status == "ok"]
    n = len(common)
    kinds: Counter = Counter()
    splits: list[int] = []
    shown = 0
    lp_gaps: list[float] = []
    for q in common:
        ta, tb = a[q].raw_response, b[q].raw_response
        kind, split = _kind(ta, tb)
        kinds[kind] += 1
        if split is not None:
            splits.append(split)
        la, lb = a[q].answer_logprobs, b[q].answer_logprobs
        if la and lb and ta[:1] == tb[:1]:
            lp_gaps.append(abs(la[0] - lb[0]))
        if kind != "identical" and shown < args.show:
            shown += 1
            print(f"{q} [{kind}] {a[q].condition_family}\n  A ({a[q].finish_reason}, "
                  f"{a[q].n_generated_tokens} tok): {ta!r}\n  B ({b[q].finish_reason}, "
                  f"{b[q].n_generated_tokens} tok): {tb!r}")
    same_first = sum(a[q].raw_response.strip().split("\n")[0]
                     == b[q].raw_response.strip().split("\n")[0] for q in common)
    print(f"\n{n} queries answered by both ({len(a)} in A, {len(b)} in B)")
    print(f"identical text: {kinds['identical']}/{n} = {kinds['identical'] / max(n, 1):.3f}")
    print(f"identical first line: {same_first}/{n} = {same_first / max(n, 1):.3f}")
    for kind, count in kinds.most_common():
        print(f"  {kind}: {count}")
    if splits:
        print(f"diverge: median split at character {statistics.median(splits):g} "
              f"(min {min(splits)}, max {max(splits)})")
    if lp_gaps:
        print(f"|first-token log-prob A - B|: median {statistics.median(lp_gaps):.4f}, "
              f"max {max(lp_gaps):.4f} over {len(lp_gaps)} answers with the same first char")
    fr = Counter((a[q].finish_reason, b[q].finish_reason) for q in common)
    print("finish_reason (A, B): " + ", ".join(f"{k}: {v}" for k, v in fr.most_common()))
    for name, run in (("A", a), ("B", b)):
        toks = [run[q].n_generated_tokens or 0 for q in common]
        print(f"{name}: mean generated tokens {statistics.mean(toks):.1f}, "
              f"empty answers {sum(not run[q].raw_response.strip() for q in common)}")


if __name__ == "__main__":
    main()
