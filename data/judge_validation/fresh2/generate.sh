#!/bin/bash
# Greedy generation of the second fresh test set (main families only), the protocol of
# ../fresh/generate.sh: CPU, float32, 24 new tokens, both models in turn.
# Usage: bash generate.sh [ROOT=/work/real/fresh2]   (stop 33 ran it for /work/real/fresh3 too)
set -u
FKS=/work/main/.venv/bin/fks
R=${1:-/work/real/fresh2}
B=$R/benchmark
for m in gemma-3-270m smollm2-135m-instruct; do
  echo "=== $(date -u +%FT%TZ) $m"
  $FKS generate --model $m --benchmark $B --out $R/runs/$m --device cpu \
    --dtype float32 --families anchor,paraphrase,format,context,multilingual
  echo "=== $(date -u +%FT%TZ) $m rc=$?"
done
