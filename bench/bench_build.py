"""Benchmark ``fks data build`` on the full shared source (run by hand, not by pytest).

    /root/venv/bin/python bench/bench_build.py [--source ../shared/data] [--out /tmp/fks_bench]

Each step runs in its own child process, so wall time and peak memory (``ru_maxrss`` of that
child) are measured cleanly:

* baseline -- start Python, ``import fks`` and ``json.loads`` every source line the builder
  reads (the floor any builder pays);
* build    -- ``fks data build --source SRC --out OUT`` with the default cap (2,600 facts);
* validate -- ``fks data validate OUT``.

Goals: build at most 30 s and 1 GB peak on 2 cores. The build/baseline ratio is printed so a
slower or busier machine can still be compared. Then prints the built benchmark's family /
coverage table (markdown) from ``OUT/dataset_statistics.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
GOAL_S, GOAL_MB = 30.0, 1024.0

BASELINE = r"""
import json, sys
from pathlib import Path
import fks.data.build as b
root = Path(sys.argv[1])
n = 0
for sub in (b.MPARAREL_DIR, b.PARAREL_PATTERNS_DIR, b.PARAREL_TREX_DIR):
    for p in sorted((root / sub).rglob("P*.jsonl")):
        with p.open(encoding="utf-8") as fh:
            for line in fh:
                json.loads(line); n += 1
print(n)
"""


def run_measured(cmd: list[str]) -> tuple[float, float, int, str]:
    """Run ``cmd`` under a tiny wrapper that reports the child's own peak RSS."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t0 = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t0\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0\n"
        "print(json.dumps({'wall': wall, 'rss_mb': rss, 'rc': p.returncode,"
        " 'tail': (p.stdout + p.stderr)[-3000:]}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True,
                          check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return res["wall"], res["rss_mb"], res["rc"], res["tail"]


def family_table(stats: dict) -> str:
    """Markdown tables of families, coverage, relations and languages."""
    lines = [f"**{stats['n_facts']:,} facts x {stats['n_queries']:,} queries, "
             f"{stats['n_relations']} relations**", "",
             "| family | queries | facts | role |", "|---|---:|---:|---|"]
    from fks.configs import FAMILIES
    from fks.data.schema import LANGUAGES

    for fam in sorted(stats["families"], key=lambda f: (f not in FAMILIES, FAMILIES.index(f)
                                                          if f in FAMILIES else 0, f)):
        row = stats["families"][fam]
        lines.append(f"| {fam} | {row['queries']:,} | {row['facts']:,} | {row['role']} |")
    cov, copy, flags = stats["coverage"], stats["copy_answerable"], stats["flags"]
    lines += ["",
              f"- complete-family facts ({' + '.join(cov['main_families'])}): "
              f"{cov['complete_family_facts']:,}; full-set facts: {cov['full_set_facts']:,}",
              f"- copy-answerable (answer_in_subject_surface): {copy['facts']:,} facts "
              f"({copy['share']:.1%}), {copy['queries']:,} queries",
              f"- spec 6.2 flagged: {stats['spec_6_2']['facts']:,} facts "
              f"({', '.join(stats['spec_6_2']['relations'])})",
              f"- flags: main forward {flags['use_for_main_forward']:,}, reverse "
              f"{flags['use_for_reverse_analysis']:,}, recognition "
              f"{flags['use_for_recognition_analysis']:,}, none {flags['none']:,}",
              "", "| language | queries | facts |", "|---|---:|---:|"]
    lines += [f"| {k} | {stats['languages'][k]['queries']:,} | "
              f"{stats['languages'][k]['facts']:,} |"
              for k in sorted(stats["languages"], key=lambda x: (x not in LANGUAGES,
                                                                 LANGUAGES.index(x)
                                                                 if x in LANGUAGES else 0, x))]
    lines += ["", "| relation | facts | queries | copy | spec 6.2 |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {v['facts']} | {v['queries']:,} | {v['copy_answerable_facts']} | "
              f"{v['spec_6_2_facts']} |" for k, v in stats["relations"].items()]
    build = stats.get("build")
    if build:
        lines += ["", f"- build: {build['candidates']:,} candidates -> {build['selected']:,} "
                      f"selected; dropped {build['dropped']}; D1 guard "
                      f"{build['context_guard_dropped']}"]
    return "\n".join(lines)


def main() -> None:
    """Measure, check the goals, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=HERE.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=Path("/tmp/fks_bench_build"))
    ap.add_argument("--max-facts", type=int, default=None)
    args = ap.parse_args()
    fks = [sys.executable, "-m", "fks"]

    base = run_measured([sys.executable, "-c", BASELINE, str(args.source)])
    build_cmd = [*fks, "data", "build", "--source", str(args.source), "--out", str(args.out)]
    if args.max_facts is not None:
        build_cmd += ["--max-facts", str(args.max_facts)]
    build = run_measured(build_cmd)
    if build[2] != 0:
        sys.exit(f"build failed (exit {build[2]}):\n{build[3]}")
    val = run_measured([*fks, "data", "validate", str(args.out)])

    print(f"cpus: {os.cpu_count()} (load average {os.getloadavg()[0]:.1f})")
    print(f"baseline (import fks + json.loads of the source): {base[0]:6.2f} s, "
          f"{base[1]:7.1f} MB peak")
    print(f"fks data build:                                   {build[0]:6.2f} s, "
          f"{build[1]:7.1f} MB peak   ratio to baseline {build[0] / base[0]:.1f}x time, "
          f"{build[1] / base[1]:.1f}x memory")
    print(f"fks data validate:                                {val[0]:6.2f} s, "
          f"{val[1]:7.1f} MB peak   exit code {val[2]}")
    ok = build[0] <= GOAL_S and build[1] <= GOAL_MB
    print(f"goal (<= {GOAL_S:.0f} s, <= {GOAL_MB:.0f} MB): {'met' if ok else 'NOT met'}")
    stats = json.loads((args.out / "dataset_statistics.json").read_text(encoding="utf-8"))
    print()
    print(family_table(stats))
    if val[2] != 0:
        print("\nvalidate output:\n" + val[3])


if __name__ == "__main__":
    main()
