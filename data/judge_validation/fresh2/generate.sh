#!/bin/bash
# Greedy generation of the second fresh test set (main families only), the protocol of
# ../fresh/generate.sh: CPU, float32, 24 new tokens, both models in turn.
set -u
FKS=/work/main/.venv/bin/fks
B=/work/real/fresh2/benchmark
for m in gemma-3-270m smollm2-135m-instruct; do
  echo "=== $(date -u +%FT%TZ) $m"
  $FKS generate --model $m --benchmark $B --out /work/real/fresh2/runs/$m --device cpu \
    --dtype float32 --families anchor,paraphrase,format,context,multilingual
  echo "=== $(date -u +%FT%TZ) $m rc=$?"
done
