"""The long GRPO run of `benchmarks/smollm2_gpu_long.py` over several seeds at once, on one GPU.

Each seed is one process of that script with the same settings (`--steps` caps the RL steps,
`--train-seconds` the training time; the record says how many steps each seed ran). A 135M-parameter
model leaves a large GPU mostly idle, so the seeds run side by side. The start is measured again in
each process (its sampled pass@1 depends on the seed), so every seed's gain is paired with its own start.

    python benchmarks/smollm2_gpu_seeds.py --work DIR
        converts the model once, runs seeds 0, 1 and 2 (DIR/seed{k}.json, DIR/adapter_seed{k}), then merges them;
        the record notebooks/data/smollm2_gpu_seeds.json came from this command on one H200 (its log:
        notebooks/data/smollm2_gpu_seeds.log), its adapters are notebooks/data/smollm2_gpu_seeds_adapters/
    python benchmarks/smollm2_gpu_seeds.py --merge DIR
        only merges DIR's per-seed records into notebooks/data/smollm2_gpu_seeds.json (--output)
    python benchmarks/smollm2_gpu_seeds.py --work DIR --resumable --steps 100 --train-seconds 440
        a run over several sessions: each seed's trainer state goes to DIR/state_seed{k}.pt after every step
        (smollm2_gpu_long.py --state); a session that ends before --steps writes partial records and merges
        nothing; the same command again, with DIR as the last session left it, continues every seed

The merged record is in the one record format (benchmarks/schema.py: header, one row per seed, the changes
as its summary) when every seed's record names the commit it ran, as smollm2_gpu_long.py's records do now;
seeds written before that merge into the first format, which the two GPU records committed so far have. Both
keep each seed's start and trained rows and, for each measure, the per-seed change with its mean, standard
error and verdict (`course_lib.stats.seed_verdict`: a gain only beyond the
t-interval for the number of seeds). "never trained on" pools the course's test split and HumanEval's
33 test problems (48 tasks), greedy and from samples.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import new_record, write_json  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "smollm2_gpu_long.py"

# (name in the record, how to read it off a start or trained row)
MEASURES = {
    "train_greedy": lambda r: r["train_greedy_pass@1"],
    "val_greedy": lambda r: r["val_greedy_pass@1"],
    "test_greedy": lambda r: r["test_greedy_pass@1"],
    "test_sampled": lambda r: r["test_pass@1_from_samples"],
    "humaneval_test_greedy": lambda r: r["humaneval_test_greedy_pass@1"],
    "humaneval_test_sampled": lambda r: r["humaneval_test_pass@1_from_samples"],
    "never_trained_greedy": lambda r: round((r["test_greedy_passed"] + r["humaneval_test_greedy_passed"])
                                            / (r["test_tasks"] + r["humaneval_test_tasks"]), 4),
    "never_trained_sampled": lambda r: round((r["test_pass@1_from_samples"] * r["test_tasks"]
                                              + r["humaneval_test_pass@1_from_samples"] * r["humaneval_test_tasks"])
                                             / (r["test_tasks"] + r["humaneval_test_tasks"]), 4),
}


def run_seeds(work: Path, seeds: list[int], steps: int, train_seconds: float, threads: int,
              micro_batch_size: int, quick: bool = False, engine: str = "auto", resumable: bool = False) -> None:
    """Convert the model once (the processes would race to write its cache), then one process a seed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO_ROOT))
    from course_lib.lm import model_zoo

    model_zoo.smollm2_folder()
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    procs = []
    for seed in seeds:
        cmd = [sys.executable, str(SCRIPT), "--seed", str(seed), "--steps", str(steps),
               "--train-seconds", str(train_seconds), "--no-humaneval164",
               "--micro-batch-size", str(micro_batch_size), "--engine", engine, *(["--quick"] if quick else []),
               "--output", str(work / f"seed{seed}.json"), "--adapter-dir", str(work / f"adapter_seed{seed}"),
               *(["--state", str(work / f"state_seed{seed}.pt")] if resumable else [])]
        log = open(work / f"seed{seed}.log", "a" if resumable else "w")  # a resumed seed's log goes on
        procs.append((seed, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    for seed, proc, log in procs:
        proc.wait()
        log.close()
        print(f"seed {seed}: exit {proc.returncode}", flush=True)


# what every seed's record shares (they ran one protocol on one machine), kept once in the merged record
SHARED = ("model", "parameters", "rl", "greedy", "sampled", "lora", "rollout_pool", "train_seconds_budget",
          "device", "machine", "torch", "transformers", "python", "sandbox_isolation")
CONFIG = ("model", "rl", "greedy", "sampled", "lora", "rollout_pool", "train_seconds_budget")  # the runs' settings


def merge(work: Path, output: Path, args=()) -> dict:
    """One record of every seed whose run finished (a trained row), with the paired changes; in the one record
    format (benchmarks/schema.py) where every seed's record names the code it ran. args: the command line."""
    from course_lib.stats import mean_se, seed_verdict, t_factor

    seeds, rows = {}, {}  # seed -> its record; seed -> {"start": row, "grpo-long": row}
    for path in work.glob("seed*.json"):
        record = json.loads(path.read_text())
        by_model = {r["model"]: r for r in record["runs"]}
        if "grpo-long" not in by_model:
            print(f"{path.name}: no trained row (the run did not finish); left out")
            continue
        seeds[record["seed"]], rows[record["seed"]] = record, by_model
    if not seeds:
        raise SystemExit(f"no finished seed in {work}: each seed*.json needs its trained ('grpo-long') row")
    order = sorted(seeds)
    first = seeds[order[0]]
    changes = {}
    for name, read in MEASURES.items():
        before = [read(rows[s]["start"]) for s in order]
        after = [read(rows[s]["grpo-long"]) for s in order]
        diffs = [round(a - b, 4) for a, b in zip(after, before)]
        changes[name] = {"start": before, "trained": after, "change": diffs}
        if len(diffs) < 2:  # one seed has no standard error
            changes[name].update(change_mean=diffs[0], change_se=None, t_factor=None, verdict="one seed: no interval")
            continue
        mean, se = mean_se(diffs)
        changes[name].update(change_mean=round(mean, 4), change_se=round(se, 4),
                             t_factor=round(t_factor(len(diffs)), 2), verdict=seed_verdict(diffs))
    record = {"script": "benchmarks/smollm2_gpu_seeds.py", "runs_script": first["script"],
              **{key: first[key] for key in SHARED}, "seeds": order, "runs_side_by_side": len(seeds),
              "changes": changes,
              "per_seed": {str(s): {"runs": seeds[s]["runs"], "wall_seconds": seeds[s]["wall_seconds"]} for s in order}}
    if all("code_revision" in seeds[s] for s in order):
        record = {**one_format_header(seeds, order, args), **record, "runs": one_format_rows(seeds, rows, order),
                  "summary": changes}
    write_json(output, record)
    return record


def one_format_header(seeds: dict, order: list[int], args=()) -> dict:
    """benchmarks/schema.py's header for the merged record, from the seeds' own records: the code they ran (one
    commit for all), their machine, device and threads, the settings they share, and the longest seed's wall
    time (the seeds ran side by side). Seeds written before the header fields leave the merge in its first
    format (schema.LEGACY)."""
    first = seeds[order[0]]
    revisions = {(seeds[s]["code_revision"], seeds[s]["uncommitted_changes"]) for s in order}
    if len(revisions) != 1:
        raise SystemExit(f"the seeds ran different code: {sorted(revisions)}; merge only seeds of one commit")
    header = new_record("benchmarks/smollm2_gpu_seeds.py", config={key: first[key] for key in CONFIG},
                        machine=first["machine"], device=first["device"],
                        seconds=max(seeds[s]["wall_seconds"] for s in order), args=args, threads=first["threads"])
    header["code_revision"], header["uncommitted_changes"] = revisions.pop()  # the seeds', not the merge's
    return header


def one_format_rows(seeds: dict, rows: dict, order: list[int]) -> list[dict]:
    """One row per seed: its start and trained rows, how long it ran and, for a run over several sessions, each
    session's machine, commit, steps and seconds."""
    return [{"seed": s, "steps_done": rows[s]["grpo-long"]["steps_done"], "wall_seconds": seeds[s]["wall_seconds"],
             **({"sessions": seeds[s]["sessions"]} if "sessions" in seeds[s] else {}),
             "start": rows[s]["start"], "trained": rows[s]["grpo-long"]} for s in order]


def unfinished_seeds(work: Path, seeds: list[int]) -> dict[int, str]:
    """Seeds whose record has no trained row yet: seed -> how far it got."""
    out = {}
    for seed in seeds:
        path = work / f"seed{seed}.json"
        record = json.loads(path.read_text()) if path.exists() else {"runs": []}
        if not any(r["model"] == "grpo-long" for r in record["runs"]):
            out[seed] = f"steps recorded: {len(record.get('partial_curve', []))}" if path.exists() else "no record"
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, help="folder for the per-seed records, logs and adapters")
    p.add_argument("--merge", type=Path, help="only merge this folder's per-seed records")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=49, help="RL steps per seed (the H100 run's seed 0 ran 49) [49]")
    p.add_argument("--train-seconds", type=float, default=330.0, help="stop a seed's RL after this long [330]")
    p.add_argument("--threads", type=int, default=4, help="CPU threads per process [4]")
    p.add_argument("--micro-batch-size", type=int, default=16,
                   help="each update in chunks of this many rows: the same update in less GPU memory, so that "
                        "three seeds fit on one GPU (with 16, three seeds took 38,584 MiB of an H200 together; 16 x 8 "
                        "rows at once did not fit in an H100's 80 GB) [16]")
    p.add_argument("--engine", default="auto", help="what samples each seed's rollouts (smollm2_gpu_long.py --engine) "
                                                    "[auto: the fast engine]")
    p.add_argument("--resumable", action="store_true",
                   help="keep each seed's trainer state in --work and continue from it: a run over several sessions; "
                        "trained rows (and the merge) only once --steps are done")
    p.add_argument("--quick", action="store_true", help="a smoke test: each seed's run with --quick")
    p.add_argument("--output", type=Path, default=REPO_ROOT / "notebooks" / "data" / "smollm2_gpu_seeds.json")
    args = p.parse_args()
    if (args.work is None) == (args.merge is None):
        p.error("give --work DIR (run the seeds, then merge) or --merge DIR (merge only)")
    start = time.perf_counter()
    if args.work is not None:
        run_seeds(args.work, args.seeds, args.steps, args.train_seconds, args.threads, args.micro_batch_size,
                  args.quick, args.engine, args.resumable)
        if args.resumable and (unfinished := unfinished_seeds(args.work, args.seeds)):
            print(f"not merged: seeds {unfinished} have not done --steps {args.steps} yet; the same command continues "
                  f"them from {args.work}")
            return
    sys.path.insert(0, str(REPO_ROOT))
    record = merge(args.work or args.merge, args.output, sys.argv[1:])
    for name, c in record["changes"].items():
        se = "" if c["change_se"] is None else f" ± {c['change_se']:.3f}"
        print(f"{name:24s} start {c['start']} -> trained {c['trained']}: change {c['change_mean']:+.3f}{se} "
              f"({c['verdict']})")
    print(f"wrote {args.output} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
