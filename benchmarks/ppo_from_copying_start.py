"""Chapter 6's PPO from a start that copies: the GPU-pretrained variants models of chapter 4 (chapter 6).

    python benchmarks/ppo_from_copying_start.py [--seeds 0 1] [--out runs/ppo_from_copying_start]

For each seed N, the whole `python -m course_lib ppo --seed N --pretrained
notebooks/checkpoints/variants_gpu/two_digit_seedN.pt` (default settings: 20 updates with exploration)
runs on the CPU into OUT/seedN (reused only if it was made by this code from the same checkpoint:
`_common.reuse_or_clear`). The checkpoints were pretrained on
one NVIDIA H100 by `benchmarks/variants_pretraining.py --device cuda --epochs 100 --hidden-dim 512
--extra-constants 40 --seed N --save ...` (about 2 minutes each; about 45 minutes on 2 CPU cores).
Writes the greedy pass rates of the start and of the end, the tasks passed, the programs of the val
tasks gained (before and after) and the run time of each seed to notebooks/data/ppo_from_copying_start.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, new_record, reuse_or_clear, write_json  # benchmarks/_common.py (on sys.path as a script)

ROOT = Path(__file__).resolve().parents[1]
SPLITS = ("train", "val", "test")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--out", type=Path, default=ROOT / "runs/ppo_from_copying_start")
    p.add_argument("--notebook-data", type=Path, default=ROOT / "notebooks/data/ppo_from_copying_start.json")
    args = p.parse_args(argv)
    from course_lib.runs import file_sha256

    started = time.perf_counter()
    runs = []
    for seed in args.seeds:
        run_dir = args.out / f"seed{seed}"
        checkpoint = ROOT / f"notebooks/checkpoints/variants_gpu/two_digit_seed{seed}.pt"
        if reuse_or_clear(run_dir, {"seed": seed, "checkpoint_sha256": file_sha256(checkpoint)}):
            print(f"seed {seed}: reusing {run_dir}, made by this code from this checkpoint")
        else:
            subprocess.run([sys.executable, "-m", "course_lib", "ppo", "--seed", str(seed), "--out", str(run_dir),
                            "--pretrained", str(checkpoint), "--no-progress"], check=True, cwd=ROOT)
        result = json.loads((run_dir / "eval.json").read_text())
        passed = {split: sorted(t["id"] for t in result["per_task"] if t["split"] == split and t["greedy_passed"])
                  for split in ("val", "test")}
        before = {t["id"]: t for t in result["baseline"]["per_task"]}
        gained = {t["id"]: {"start": before[t["id"]]["greedy_completion"], "end": t["greedy_completion"]}
                  for t in result["per_task"]
                  if t["split"] == "val" and t["greedy_passed"] and not before[t["id"]]["greedy_passed"]}
        runs.append({  # start and end: greedy pass@1 of each split
            "seed": seed, "start": {split: result["baseline"][f"{split}_greedy_pass@1"] for split in SPLITS},
            "end": {split: result[f"{split}_greedy_pass@1"] for split in SPLITS},
            "passed": passed, "gained": gained, "updates": result["updates"],
            "wall_seconds": result["wall_seconds"],
            "checkpoint": str(checkpoint.relative_to(ROOT))})
        print(f"seed {seed}: {runs[-1]}")
    record = new_record("benchmarks/ppo_from_copying_start.py",
                        config={"seeds": args.seeds, "ppo": "python -m course_lib ppo's defaults, --pretrained the seed's "
                                                           "checkpoint"},
                        machine=machine(), device="cpu", seconds=time.perf_counter() - started,
                        args=["--seeds", *map(str, args.seeds)])
    record["runs"] = runs
    record["summary"] = {when: {split: round(sum(r[when][split] for r in runs) / len(runs), 4) for split in SPLITS}
                         for when in ("start", "end")}  # greedy pass@1, the mean over the seeds
    write_json(args.notebook_data, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
