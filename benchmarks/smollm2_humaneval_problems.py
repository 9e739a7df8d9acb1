"""Which of HumanEval's 33 test problems chapter 10's SmolLM2 GRPO runs gain and lose, seed by seed.

A run's record keeps only summary numbers. This script reruns its seeds (the same model, LoRA, RL
settings and rollout pool, by the same code: `smollm2_rl.train`), checks that each rerun reproduces
the record (every step of the training curve, its float diagnostics to 1e-3 relative, and the number
of HumanEval test problems passed where the record has it; a row that does not is still measured,
and keeps what differs for the chapter to show), and keeps, per problem, whether the start and each seed's
trained model pass it greedily, with both answers where they differ. Two runs (PROTOCOLS):

- "humaneval" (the default): the study `benchmarks/studies/lm/smollm2_humaneval_rl.toml`'s, whose rollouts draw
  on HumanEval's 131 training problems too; writes notebooks/data/smollm2_humaneval_problems.json.
- "course": the study `benchmarks/studies/lm/smollm2_rl.toml`'s, the chapter's CPU default, whose rollouts draw on the course's
  train and val tasks alone and whose record never measured HumanEval; writes
  notebooks/data/smollm2_rl_humaneval.json.

--samples N also estimates each trained model's pass@1 on the 33 problems from N samples per problem
(`smollm2_rl.SAMPLED`'s temperature and length), the measure that does not swing on one greedy answer.

    python benchmarks/smollm2_humaneval_problems.py [--protocol course] [--samples 10] [SEED ...]
        about 20 min a seed on one core; with --samples 10 about 33 min (1943 to 2049 s a seed, --protocol course)

Seeds already in the output are kept. Two processes with different seeds use two cores, about 14 GB of
memory each at their peak; each adds its row under a lock (`_common.locked`), so neither loses the other's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, locked, write_json  # noqa: E402
from smollm2_rl import GREEDY, LORA, MODEL, REPO_ROOT, SAMPLED, measure_humaneval, train  # noqa: E402

DATA = REPO_ROOT / "notebooks" / "data"
# protocol: (the run's record, whether its rollouts drew on HumanEval's training problems, this script's output)
PROTOCOLS = {"humaneval": (DATA / "smollm2_humaneval_rl.json", True, DATA / "smollm2_humaneval_problems.json"),
             "course": (DATA / "smollm2_rl.json", False, DATA / "smollm2_rl_humaneval.json")}


# A step's counts (its reward, pass rate, mean length, groups with a pass) must be equal; its two float
# diagnostics, the KL to the reference and the clipped fraction, may differ in their last digits (another
# order of floating-point sums), up to FLOAT_TOLERANCE relative.
FLOATS = ("kl_ref", "clip_frac")
FLOAT_TOLERANCE = 1e-3


def curve_differences(mine: list, recorded: list) -> tuple[list, float]:
    """(where the rerun's curve differs from the record's beyond FLOAT_TOLERANCE, as {"step", "field",
    "value", "recorded"} entries; the largest relative difference of a float field); a step's seconds are
    not compared."""
    if len(mine) != len(recorded):
        return [{"step": None, "field": "steps", "value": len(mine), "recorded": len(recorded)}], 0.0
    differences, worst = [], 0.0
    for a, b in zip(mine, recorded):
        for key in sorted((set(a) | set(b)) - {"seconds"}):
            x, y = a.get(key), b.get(key)
            if key in FLOATS and x is not None and y is not None:
                relative = abs(x - y) / max(abs(y), 1e-6)
                worst = max(worst, relative)
                if relative <= FLOAT_TOLERANCE:
                    continue
            if x != y:
                differences.append({"step": b.get("step"), "field": key, "value": x, "recorded": y})
    return differences, worst


def describe(difference: dict) -> str:
    """'step 2 clip_frac: 0.0194, recorded 0.0184': one entry of curve_differences, for a reader."""
    where = f"step {difference['step']} " if difference["step"] is not None else ""
    return f"{where}{difference['field']}: {difference['value']}, recorded {difference['recorded']}"


def sampled_humaneval(model, tokenizer, seed: int, n_samples: int) -> dict:
    """pass@1 on HumanEval's 33 test problems estimated from n_samples samples per problem, and each
    problem's count of passing samples."""
    from course_lib.lm.evaluation import evaluate
    from course_lib.tasks import load_humaneval

    result = evaluate(model, tokenizer, load_humaneval("test"), seed=seed, **{**SAMPLED, "n_samples": n_samples})
    return {"humaneval_test_pass@1_from_samples": result["test_pass@1"], "n_samples": n_samples,
            "samples_passed": {r["id"]: r["c"] for r in result["per_task"] if r["c"]}}


def problem_changes(start_answers: dict, answers: dict) -> dict:
    """The problems the trained model passes, those it gained and lost against the start, and both answers of each
    problem that changed."""
    changed = sorted(i for i in answers if answers[i]["passed"] != start_answers[i]["passed"])
    return {"passed": sorted(i for i in answers if answers[i]["passed"]),
            "gained": [i for i in changed if answers[i]["passed"]],
            "lost": [i for i in changed if not answers[i]["passed"]],
            "answers": {i: {"start": start_answers[i], "trained": answers[i]} for i in changed}}


def main(seeds, protocol: str = "humaneval", n_samples: int = 0) -> None:
    import transformers

    from course_lib.lm import lm_policy
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    record_path, humaneval_train, output = PROTOCOLS[protocol]
    record = json.loads(record_path.read_text())
    if (record["model"], record["greedy"], record["lora"]) != (MODEL, GREEDY, LORA):
        raise SystemExit(f"{record_path.relative_to(REPO_ROOT)} was made with other settings than "
                         f"benchmarks/smollm2_rl.py's: remake it first (benchmarks/experiments.toml gives its command)")
    record_start = next(r for r in record["runs"] if r["model"] == "start")
    recorded = {r["seed"]: r for r in record["runs"] if r["model"] == record["rl"]["method"]}
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    tasks = load_tasks()
    for seed in seeds:
        if seed not in recorded:
            raise SystemExit(f"seed {seed} is not in {record_path.relative_to(REPO_ROOT)} (it has {sorted(recorded)})")
        t0 = time.perf_counter()
        model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=seed, **LORA)  # fresh LoRA: B = 0, the start
        # evaluated for every seed: each seed's fresh LoRA (B = 0) must give the record's start
        start = measure_humaneval(model, tokenizer, seed, answers=True)
        start_answers, start_passed = start["answers"], start["humaneval_test_greedy_passed"]
        expected = record_start.get("humaneval_test_greedy_passed", start_passed)  # the course run never measured it
        if start_passed != expected:
            raise SystemExit(f"the start passed {start_passed} HumanEval test problems, the record's "
                             f"{expected}: not the same model or evaluation")
        curve = train(model, tokenizer, tasks, record["rl"], seed, humaneval_train=humaneval_train)
        trained = measure_humaneval(model, tokenizer, seed, answers=True)
        answers, passed = trained["answers"], trained["humaneval_test_greedy_passed"]
        recorded_row = recorded[seed]
        differences, deviation = curve_differences(curve, recorded_row["curve"])
        recorded_passed = recorded_row.get("humaneval_test_greedy_passed", passed)  # the course run never measured it
        if passed != recorded_passed:
            differences.append({"step": None, "field": "humaneval_test_greedy_passed", "value": passed,
                                "recorded": recorded_passed})
        if differences:  # measured all the same, and kept with what differs, for the chapter to show
            print(f"seed {seed} did NOT reproduce {record_path.relative_to(REPO_ROOT)}: "
                  + "; ".join(map(describe, differences)), flush=True)
        row = {"seed": seed, "differences_from_record": differences, "curve_float_deviation": deviation,
               **problem_changes(start_answers, answers)}
        if n_samples:
            row.update(sampled_humaneval(model, tokenizer, seed, n_samples))
        row["seconds"] = round(time.perf_counter() - t0, 1)
        sampled = (f", pass@1 from {n_samples} samples {row['humaneval_test_pass@1_from_samples']:.3f}"
                   if n_samples else "")
        print(f"seed {seed}: {'reproduced the record' if not differences else 'NOT the record'}; "
              f"gained {row['gained']}, lost {row['lost']}{sampled} "
              f"({row['seconds']:.0f} s)", flush=True)
        save_row(output, row, protocol=protocol, record_path=record_path, rl=record["rl"], n_samples=n_samples,
                 start_answers=start_answers)
        del model


def save_row(output: Path, row: dict, *, protocol: str, record_path: Path, rl: dict, n_samples: int,
             start_answers: dict) -> None:
    """Add (or replace) one seed's row in the output record, under a lock: another process may be writing
    another seed's row."""
    import torch


    with locked(output):
        old = json.loads(output.read_text()) if output.exists() else {}
        runs = {r["seed"]: r for r in old.get("runs", [])}
        runs[row["seed"]] = row
        write_json(output, {
            "script": "benchmarks/smollm2_humaneval_problems.py", "protocol": protocol,
            "record": str(record_path.relative_to(REPO_ROOT)),
            "model": MODEL, "rl": rl, "greedy": GREEDY, "lora": LORA,
            **({"sampled": {**SAMPLED, "n_samples": n_samples}} if n_samples else {}),
            "start_passed": sorted(i for i in start_answers if start_answers[i]["passed"]),
            "runs": [runs[s] for s in sorted(runs)], "torch_threads": torch.get_num_threads(),
            "machine": machine()})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="humaneval")
    parser.add_argument("--samples", type=int, default=0, help="samples per problem for pass@1 (0: greedy only)")
    args = parser.parse_args()
    main(args.seeds, args.protocol, args.samples)
