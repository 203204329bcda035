#!/bin/bash
# Greedy generation (frozen protocol, 24 new tokens) on CPU in float32, both models in turn.
# runs/<model>: the five main families (what the packets use); runs_other/<model>: the other
# families of the same facts (recognition, reverse, reverse_illposed). fks refuses to resume a
# run folder with a different family selection, hence two folders.
set -u
FKS=/work/main/.venv/bin/fks
B=/work/real/fresh/benchmark
for pass in main other; do
  for m in gemma-3-270m smollm2-135m-instruct; do
    echo "=== $(date -u +%FT%TZ) $m $pass"
    if [ $pass = main ]; then fam=anchor,paraphrase,format,context,multilingual; dir=runs
    else fam=recognition,reverse,reverse_illposed; dir=runs_other; fi
    $FKS generate --model $m --benchmark $B --out /work/real/fresh/$dir/$m --device cpu \
      --dtype float32 --families $fam
    rc=$?
    echo "=== $(date -u +%FT%TZ) $m $pass rc=$rc"
  done
done
