"""Which of HumanEval's 33 test problems chapter 10's protocol run gains and loses, seed by seed.

`benchmarks/smollm2_humaneval_rl.py` kept only how many HumanEval test problems each model passed. This
script reruns its seeds (the same model, LoRA, RL settings and rollout pool, by the same code:
`smollm2_rl.train`), checks that each rerun reproduces the record (every step of the training curve
but its seconds, and the number of HumanEval test problems passed), and keeps, per problem, whether
the start and each seed's trained model pass it greedily, with both answers where they differ.

    python benchmarks/smollm2_humaneval_problems.py [SEED ...]
        writes notebooks/data/smollm2_humaneval_problems.json (about 20 min a seed on one core)

Seeds already in the record are kept. Two processes with different seeds use two cores, about 14 GB of
memory each at their peak; each adds its row under a lock (`_common.locked`), so neither loses the other's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import locked, write_json  # noqa: E402
from smollm2_rl import GREEDY, LORA, MODEL, REPO_ROOT, measure_humaneval, train  # noqa: E402

RECORD = REPO_ROOT / "notebooks" / "data" / "smollm2_humaneval_rl.json"
OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_humaneval_problems.json"


def same_curve(mine: list, recorded: list) -> bool:
    """The rerun's curve equals the record's at every step, in every field but the time it took."""
    drop = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    return drop(mine) == drop(recorded)


def main(seeds) -> None:
    import torch
    import transformers

    from book_tools.reproduce import cpu_model
    from course_lib import lm_policy
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    record = json.loads(RECORD.read_text())
    if (record["model"], record["greedy"], record["lora"]) != (MODEL, GREEDY, LORA):
        raise SystemExit(f"{RECORD.relative_to(REPO_ROOT)} was made with other settings than "
                         "benchmarks/smollm2_rl.py's: rerun benchmarks/smollm2_humaneval_rl.py first")
    record_start = next(r for r in record["runs"] if r["model"] == "start")
    recorded = {r["seed"]: r for r in record["runs"] if r["model"] == record["rl"]["method"]}
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    tasks = load_tasks()
    for seed in seeds:
        if seed not in recorded:
            raise SystemExit(f"seed {seed} is not in {RECORD.relative_to(REPO_ROOT)} (it has {sorted(recorded)})")
        t0 = time.perf_counter()
        model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=seed, **LORA)  # fresh LoRA: B = 0, the start
        # evaluated for every seed: each seed's fresh LoRA (B = 0) must give the record's start
        start = measure_humaneval(model, tokenizer, seed, answers=True)
        start_answers, start_passed = start["answers"], start["humaneval_test_greedy_passed"]
        if start_passed != record_start["humaneval_test_greedy_passed"]:
            raise SystemExit(f"the start passed {start_passed} HumanEval test problems, the record's "
                             f"{record_start['humaneval_test_greedy_passed']}: not the same model or evaluation")
        curve = train(model, tokenizer, tasks, record["rl"], seed, humaneval_train=True)
        trained = measure_humaneval(model, tokenizer, seed, answers=True)
        answers, passed = trained["answers"], trained["humaneval_test_greedy_passed"]
        recorded_row = recorded[seed]
        if not (same_curve(curve, recorded_row["curve"]) and passed == recorded_row["humaneval_test_greedy_passed"]):
            raise SystemExit(f"seed {seed} did not reproduce {RECORD.relative_to(REPO_ROOT)}: HumanEval test problems "
                             f"passed {passed}, recorded {recorded_row['humaneval_test_greedy_passed']}; rewards "
                             f"per step {[r['reward'] for r in curve]}, recorded "
                             f"{[r['reward'] for r in recorded_row['curve']]}")
        changed = sorted(i for i in answers if answers[i]["passed"] != start_answers[i]["passed"])
        row = {"seed": seed, "passed": sorted(i for i in answers if answers[i]["passed"]),
               "gained": [i for i in changed if answers[i]["passed"]],
               "lost": [i for i in changed if not answers[i]["passed"]],
               "answers": {i: {"start": start_answers[i], "trained": answers[i]} for i in changed},
               "seconds": round(time.perf_counter() - t0, 1)}
        print(f"seed {seed}: reproduced the record; gained {row['gained']}, lost {row['lost']} "
              f"({row['seconds']:.0f} s)", flush=True)
        with locked(OUTPUT):  # another process may be writing another seed's row
            old = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else {}
            runs = {r["seed"]: r for r in old.get("runs", [])}
            runs[seed] = row
            write_json(OUTPUT, {
                "script": "benchmarks/smollm2_humaneval_problems.py", "record": str(RECORD.relative_to(REPO_ROOT)),
                "model": MODEL, "rl": record["rl"], "greedy": GREEDY, "lora": LORA,
                "start_passed": sorted(i for i in start_answers if start_answers[i]["passed"]),
                "runs": [runs[s] for s in sorted(runs)], "torch_threads": torch.get_num_threads(),
                "machine": f"cpu ({cpu_model() or 'unknown CPU'}), {os.cpu_count()} cores"})
        del model


if __name__ == "__main__":
    main([int(s) for s in sys.argv[1:]] or [0, 1, 2, 3, 4, 5])
