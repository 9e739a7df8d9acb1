"""Chapter 10's CPU recipe with the fast rollout engine: more GRPO steps in the same wall time, over seeds,
measured on the 48 tasks never trained on (the course's 15 `test` tasks and HumanEval's 33 test problems).

The recipe is `presets.smollm2-135m-cpu`'s GRPO (4 prompts x 4 samples, 128 tokens, chat style, KL 0.05,
2 epochs, the course's train + val tasks as the rollout pool), with STEPS steps instead of the recorded
run's 6: the fast engine shortens a step by about an eighth (benchmarks/generation_throughput.py), so
8 steps take about the time 7 took with Hugging Face's generate on the same machine. The start is evaluated once (greedy has no sampling noise; its samples use seed 0), each seed
trains a fresh LoRA and is evaluated the same way, and each change is paired with the start:

    greedy pass@1                    on the 48 tasks, HumanEval test alone, the course's test split
    pass@1 from 10 samples at T=0.8  the same sets; samples through the fast engine (as in training)

    python benchmarks/smollm2_cpu_seeds.py [--seeds 0 1 2 3 4]   writes notebooks/data/smollm2_cpu_seeds.json

The record is rewritten after every seed, and a record with the same settings is extended: only the
seeds it lacks are run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, new_record, write_json  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_cpu_seeds.json"

MODEL = "smollm2-135m-instruct"
STEPS = 8
RL = dict(method="grpo", style="chat", steps=STEPS, prompts_per_step=4, group_size=4, lr=1e-3, temperature=0.8,
          max_new_tokens=128, length_alpha=0.0, clip_eps=0.2, epochs=2, kl_coef=0.05)
LORA = dict(rank=8, alpha=16.0)
GREEDY = dict(n_samples=0, greedy=True, max_new_tokens=128, style="chat", batch_size=48)
SAMPLED = dict(n_samples=10, greedy=False, temperature=0.8, max_new_tokens=128, style="chat", batch_size=80)
SETS = ("never trained (48)", "HumanEval test (33)", "course test (15)")


def measure(model, tokenizer, course_test, he_test) -> dict:
    """Per set: greedy pass@1 and pass@1 from samples, and the per-task rows behind them."""
    from course_lib.lm.evaluation import evaluate

    tasks = course_test + he_test
    greedy = evaluate(model, tokenizer, tasks, seed=0, **GREEDY)["per_task"]
    sampled = evaluate(model, tokenizer, tasks, seed=0, **SAMPLED)["per_task"]
    members = {SETS[0]: range(len(tasks)), SETS[1]: range(len(course_test), len(tasks)),
               SETS[2]: range(len(course_test))}
    out = {}
    for name, rows in members.items():
        rows = list(rows)
        out[name] = {"greedy_pass@1": round(sum(greedy[i]["greedy_passed"] for i in rows) / len(rows), 4),
                     "pass@1_from_samples": round(sum(sampled[i]["c"] / sampled[i]["n"] for i in rows) / len(rows), 4),
                     "tasks": len(rows)}
    out["greedy_passed_ids"] = sorted(tasks[i].id for i, r in enumerate(greedy) if r["greedy_passed"])
    return out


def summary(record: dict) -> dict:
    """Each measure: the start, the trained seeds' mean ± standard error, the paired change and its verdict."""
    from course_lib.stats import mean_se, seed_verdict, t_factor

    start, runs = record["start"], record["runs"]
    out = {}
    for name in SETS:
        for measure_name in ("greedy_pass@1", "pass@1_from_samples"):
            values = [r["result"][name][measure_name] for r in runs]
            changes = [v - start[name][measure_name] for v in values]
            if len(runs) < 2:  # one seed: no standard error yet
                mean, se, change, change_se = values[0], 0.0, changes[0], 0.0
            else:
                mean, se = mean_se(values)
                change, change_se = mean_se(changes)
            out[f"{name}, {measure_name}"] = {
                "start": start[name][measure_name], "trained_mean": round(mean, 4), "trained_se": round(se, 4),
                "change": round(change, 4), "change_se": round(change_se, 4),
                "t_interval": round(t_factor(len(runs)) * change_se, 4) if len(runs) > 1 else None,
                "verdict": seed_verdict(changes) if len(runs) > 1 else "one seed", "seeds": len(runs)}
    return out


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()

    import transformers

    from course_lib.lm import lm_policy, model_zoo
    from course_lib.lm.llm_rl import LMTrainer, RLConfig, rollout_tasks
    from course_lib.tasks import load_humaneval, load_tasks

    transformers.utils.logging.disable_progress_bar()
    tasks = load_tasks()
    course_test, he_test = [t for t in tasks if t.split == "test"], load_humaneval("test")
    pool = rollout_tasks(tasks)
    config = {"model": MODEL, "rl": RL, "lora": LORA, "greedy": GREEDY, "sampled": SAMPLED,
              "rollout_pool": "course train + val", "sets": list(SETS)}
    record = json.loads(args.output.read_text()) if args.output.exists() else None
    if record is None or record["config"] != config:
        base, tokenizer = model_zoo.load_model(MODEL, "cpu")
        started = time.perf_counter()
        start = measure(base, tokenizer, course_test, he_test)
        del base
        record = new_record("benchmarks/smollm2_cpu_seeds.py", config=config,
                            machine=machine(), device="cpu",
                            seconds=time.perf_counter() - started)
        record.update(start=start, start_seconds=round(time.perf_counter() - started, 1), runs=[])
        print(f"start: {json.dumps({k: v for k, v in start.items() if k != 'greedy_passed_ids'})}", flush=True)
        write_json(args.output, record)
    for seed in args.seeds:
        if any(r["seed"] == seed for r in record["runs"]):
            continue
        t0 = time.perf_counter()
        model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=seed, **LORA)
        trainer = LMTrainer(model, tokenizer, pool, RLConfig(**RL, seed=seed))
        for _ in range(RL["steps"]):
            trainer.step()
        train_seconds = time.perf_counter() - t0
        result = measure(trainer.policy, tokenizer, course_test, he_test)
        record["runs"].append({"seed": seed, "result": result, "train_seconds": round(train_seconds, 1),
                               "seconds": round(time.perf_counter() - t0, 1), "history": trainer.history,
                               "step_parts": trainer.times})
        record["runs"].sort(key=lambda r: r["seed"])
        record["summary"] = summary(record)
        record["seconds"] = round(record["start_seconds"] + sum(r["seconds"] for r in record["runs"]), 1)
        write_json(args.output, record)
        print(f"seed {seed}: trained {train_seconds:.0f} s; "
              f"{json.dumps({k: v for k, v in result.items() if k != 'greedy_passed_ids'})}", flush=True)
    for name, row in record.get("summary", {}).items():
        print(f"{name:<45} {row['start']:.3f} -> {row['trained_mean']:.3f} ± {row['trained_se']:.3f}  "
              f"change {row['change']:+.3f} ± {row['change_se']:.3f} ({row['verdict']})")


if __name__ == "__main__":
    main()
