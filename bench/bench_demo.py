"""Wall time of ``fks demo``: cold cache, warm cache, and an up-to-date rerun (same run).

Each arm is a fresh ``python -m fks demo`` process (imports included), in a scratch folder, with
``FKS_CACHE`` pointing at a scratch cache:

* **cold**: empty cache -- the demo model is trained first (~70 % of the time), then every
  stage runs into ``OUT1``;
* **warm**: the cached model, a fresh ``OUT2`` -- every stage runs, no training;
* **rerun**: ``OUT2`` again -- every stage is up to date (outputs verified by sha256), skipped.

Goals: cold <= 5 minutes on two CPU cores (training <= ~2 minutes, read from the model's
``demo_model.json``); warm well below cold. The three arms run one after the other on the same
machine, so their ratios hold even on a shared machine, but the absolute seconds depend on what
else the machine is doing (report the load average with them).

    python bench/bench_demo.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run_demo(out: Path, cache: Path) -> float:
    """Run ``fks demo --out OUT`` in a subprocess with ``FKS_CACHE=cache``; returns seconds."""
    env = {**os.environ, "FKS_CACHE": str(cache)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fks", "demo", "--out", str(out)], env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"fks demo failed with exit code {proc.returncode}")
    return seconds


def _stage_seconds(out: Path) -> dict[str, float]:
    manifest = json.loads((out / "runs" / "fks-demo-llama" / "evaluation_manifest.json")
                          .read_text())
    return {name: rec.get("seconds", 0.0) for name, rec in manifest["pipeline"]["stages"].items()}


def main() -> None:
    """Time the three arms and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None,
                        help="Work in this folder and keep it (default: a temporary one).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fks-bench-demo-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        cache = root / "cache"
        load = os.getloadavg()
        cold = _run_demo(root / "out1", cache)
        (model_dir,) = list((cache / "demo_model").iterdir())
        training = json.loads((model_dir / "demo_model.json").read_text())["training"]
        warm = _run_demo(root / "out2", cache)
        stages = _stage_seconds(root / "out2")
        rerun = _run_demo(root / "out2", cache)
        print(f"machine: {os.cpu_count()} cores, load average before: "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared machine: absolute times vary)")
        print(f"cold cache (train + every stage): {cold:7.1f} s")
        print(f"  of which training:              {training['seconds']:7.1f} s "
              f"({training['steps']} steps, {training['n_examples']} examples, "
              f"{training['n_parameters']:,} parameters)")
        print(f"warm cache (every stage):         {warm:7.1f} s   ({warm / cold:.2f} x cold)")
        print(f"rerun, all stages up to date:     {rerun:7.1f} s   ({rerun / cold:.3f} x cold)")
        print("stage seconds (warm run): " + ", ".join(f"{k} {v:.1f}"
                                                       for k, v in stages.items()))


if __name__ == "__main__":
    main()
