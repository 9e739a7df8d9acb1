"""PPO against sampling-and-filtering at equal wall time, over several seeds (chapter 6).

    python benchmarks/ppo_benchmark.py [--seeds 0 1 2] [--out runs/ppo_benchmark] [-- extra ppo options]

For each seed:
1. the whole command ``python -m course_lib ppo --seed N --out OUT/seedN`` (pretraining included) is
   timed from outside: that is the "whole command" wall time the course's target is about (a finished
   seed made by this code with the same options is reused, any other made again: `_common.reuse_or_clear`);
2. from the same pretrained start (OUT/seedN/pretrained.pt) and for the same number of seconds
   the PPO updates took, best-of-N sampling and expert iteration run on the same tasks
   (train + val; never test), then expert iteration's policy is evaluated greedily.

Prints mean and spread (sample standard deviation) of every figure, and writes
OUT/summary.json and the record for the chapter's notebook (--notebook-data; benchmarks/schema.py's format:
the header, one row per seed, the summary, and each seed's metrics per update and greedy result per task).
Wall times depend on the machine and on what else runs on it: each row keeps the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import command_args, gru_record_rates, gru_record_row, machine, made_by, new_record, reuse_or_clear, stats, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]


def ppo_seconds(run_dir: Path) -> float:
    """Seconds the PPO updates took (first update's start to the last update's end)."""
    from course_lib.gru.ppo_run import read_metrics
    metrics = read_metrics(run_dir)
    first = metrics[0]
    start = first["wall_s"] - first["rollout_s"] - first.get("explore_s", 0.0) - first["learn_s"]
    return metrics[-1]["wall_s"] - start


def _reused(run_dir: Path, settings: dict) -> dict | None:
    """A seed's results (its baselines.json) where its folder was finished by this code with these settings; else
    None, its folder kept for a finished ppo command (its time written) and emptied for anything else."""
    reused = reuse_or_clear(run_dir, settings)
    if reused and (run_dir / "baselines.json").exists():
        print(f"{run_dir}: reusing it, made by this code with these options", flush=True)
        return json.loads((run_dir / "baselines.json").read_text())
    if reused and not (run_dir / "ppo_timing.json").exists():  # stopped after the ppo command, before its time
        shutil.rmtree(run_dir)
        reuse_or_clear(run_dir, settings)  # an empty folder, marked: the whole command runs again
    return None


def run_seed(seed: int, out: Path, extra: list[str]) -> dict:
    import torch

    from course_lib.gru.baselines import best_of_n, expert_iteration
    from course_lib.gru.checkpoints import load_checkpoint
    from course_lib.tasks import load_tasks
    from course_lib.gru.pretrain import evaluate_policy
    from course_lib.gru.trainer import PPOConfig

    run_dir = out / f"seed{seed}"
    timing_file = run_dir / "ppo_timing.json"
    if (done := _reused(run_dir, {"seed": seed, "ppo_options": extra})) is not None:
        return done
    if not (timing_file.exists() and (run_dir / "eval.json").exists()):  # else: reuse the PPO run, redo baselines
        command = [sys.executable, "-m", "course_lib", "ppo", "--seed", str(seed), "--out", str(run_dir),
                   "--no-progress", *extra]
        start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, cwd=ROOT)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        timing_file.write_text(json.dumps({
            "command_seconds": round(time.perf_counter() - start, 1),
            "command_cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
            "load_average": round(os.getloadavg()[0], 2)}))
    timing = json.loads(timing_file.read_text())
    ppo = json.loads((run_dir / "eval.json").read_text())
    config = PPOConfig.load(run_dir / "config.json")
    budget = ppo_seconds(run_dir)

    tasks = load_tasks(tasks_dir=config.tasks_dir)
    rl_tasks = [t for t in tasks if t.split in config.rollout_splits]
    model, tok, extra_info = load_checkpoint(run_dir / "pretrained.pt")
    alphabet = extra_info["alphabet"]
    torch.manual_seed(seed)
    bon = best_of_n(model, tok, rl_tasks, temperature=config.temperature, samples_per_round=8,
                    time_budget=budget, seed=seed, allowed_ids=alphabet, max_new_tokens=config.max_new_tokens,
                    progress=False)
    ei = expert_iteration(model, tok, tasks, rollout_splits=config.rollout_splits, temperature=config.temperature,
                          episodes_per_round=config.episodes_per_update, group_size=config.group_size,
                          time_budget=budget, lr=config.lr, batch_size=config.teacher_batch_size,
                          finetune_steps=config.epochs * (config.episodes_per_update // config.minibatch_size),
                          bc_coef=config.bc_coef, sil_coef=config.sil_coef,
                          per_task=config.sil_per_task, seed=seed, allowed_ids=alphabet,
                          max_new_tokens=config.max_new_tokens, eval_every=config.eval_every, progress=False)
    ei_eval = evaluate_policy(model, tok, tasks, allowed_ids=alphabet, max_new_tokens=config.max_new_tokens)
    result = {
        "seed": seed, **timing, "ppo_update_seconds": round(budget, 1), "pretrain_seconds": ppo["pretrain_seconds"],
        "load_average_after_baselines": round(os.getloadavg()[0], 2),
        "ppo": gru_record_rates(ppo),
        "pretrained": gru_record_rates(ppo["baseline"]),
        "best_of_n": {"val_solved": bon["val_solved"], "train_solved": bon.get("train_solved"),
                      "samples": bon["samples"], "wall_s": bon["wall_s"], "curve": bon["curve"]},
        "expert_iteration": {**gru_record_rates(ei_eval),
                             "rounds": ei["rounds"], "wall_s": ei["wall_s"], "curve": ei["curve"]},
    }
    write_json(run_dir / "baselines.json", result)
    return result


def summarise(results: list[dict]) -> dict:
    rows = {}
    for key in ("train_pass_rate", "val_pass_rate", "val_near_pass_rate", "val_far_pass_rate",
                "test_pass_rate", "test_near_pass_rate", "test_far_pass_rate"):
        for method in ("pretrained", "ppo", "expert_iteration"):
            rows[f"{method}.{key}"] = stats([r[method].get(key) for r in results])
    rows["best_of_n.val_solved"] = stats([r["best_of_n"]["val_solved"] for r in results])
    rows["command_seconds"] = stats([r["command_seconds"] for r in results])
    rows["command_cpu_seconds"] = stats([r["command_cpu_seconds"] for r in results])
    rows["ppo_update_seconds"] = stats([r["ppo_update_seconds"] for r in results])
    rows["pretrain_seconds"] = stats([r["pretrain_seconds"] for r in results])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "ppo_benchmark")
    parser.add_argument("--notebook-data", type=Path, default=ROOT / "notebooks" / "data" / "ppo_benchmark.json",
                        help="compact results the chapter-6 notebook plots (metrics curves included)")
    parser.add_argument("extra", nargs="*", help="options passed on to `python -m course_lib ppo` (after --)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in args.seeds:
        print(f"seed {seed} ...", flush=True)
        results.append(run_seed(seed, args.out, args.extra))
    summary = summarise(results)
    print(f"\n{'figure':42s} {'mean':>7s} {'std':>7s}   per seed")
    for key, s in summary.items():
        print(f"{key:42s} {s['mean']:7.3f} {s['std']:7.3f}   {s['values']}")
    write_json(args.out / "summary.json", {"summary": summary, "runs": results})

    from course_lib.gru.ppo_run import read_metrics
    keep = ("update", "wall_s", "reward_mean", "train_pass_rate_sampled", "val_pass_rate_sampled",
            "train_pass_rate_greedy", "val_pass_rate_greedy", "approx_kl", "clip_frac", "explained_variance",
            "entropy", "ratio_mean", "ratio_std", "value_loss", "policy_loss", "lr", "val_tasks_found",
            "epochs_done", "truncated_frac", "explore_episodes", "explore_pass_rate", "rollout_s", "explore_s", "learn_s")
    evals = {r["seed"]: json.loads((args.out / f"seed{r['seed']}" / "eval.json").read_text()) for r in results}
    config = json.loads((args.out / f"seed{args.seeds[0]}" / "config.json").read_text())
    config = {"seeds": args.seeds, **{k: v for k, v in config.items() if k != "seed"}}  # every seed's, but its seed
    seconds = sum(r["command_seconds"] + r["best_of_n"]["wall_s"] + r["expert_iteration"]["wall_s"] for r in results)
    data = new_record("benchmarks/ppo_benchmark.py", config=config, machine=machine(), device="cpu", seconds=seconds,
                      args=command_args(argv), code=made_by({f"seed{s}": args.out / f"seed{s}" for s in args.seeds}))
    data |= {"runs": results, "summary": summary, "seeds": args.seeds,
            "metrics": {str(r["seed"]): [{k: m.get(k) for k in keep}
                                          for m in read_metrics(args.out / f"seed{r['seed']}")] for r in results},
            "per_task": {str(r["seed"]): [{k: gru_record_row(row)[k] for k in ("id", "split", "novelty", "passed",
                                                                                "completion")}
                                          for row in evals[r["seed"]]["per_task"]] for r in results},
            "pretrained_per_task": {str(r["seed"]): {row["id"]: row["greedy_passed"]
                                                     for row in evals[r["seed"]]["baseline"]["per_task"]}
                                    for r in results}}
    write_json(args.notebook_data, data)
    print(f"wrote {args.out / 'summary.json'} and {args.notebook_data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
