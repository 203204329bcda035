#!/bin/bash
# Rebuild the benchmark the existing labels (../labels.jsonl) were made on: fks at commit
# 85c4094e82c7 (23 relations incl. named_after), same source and default seed. choose_facts.py
# checks it against every label row (query_id -> fact_id, relation, family, language).
set -eu
OUT=/work/real/fresh/old_build
rm -rf "$OUT"; mkdir -p "$OUT"
git -C /work/main archive 85c4094e82c7 src | tar -x -C "$OUT"
PYTHONPATH="$OUT/src" /work/main/.venv/bin/python -m fks data build --source /work/shared/data \
  --out "$OUT/bench"
