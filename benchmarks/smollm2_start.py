"""SmolLM2-135M-Instruct before any RL: greedy pass@1, pass@1 and pass@10 from samples, on every split.

The course's eval command (`python -m course_lib eval --model smollm2-135m-instruct --humaneval --samples 10
--max-new-tokens 128`: `evaluation.evaluate_model`) on the model with no adapter, through its chat template: one
greedy answer per task and N_SAMPLES samples per task at T = TEMPERATURE, on the course's train, val and test
tasks and on all 164 HumanEval problems (its train and test splits), written as a record (benchmarks/schema.py's
format). The record keeps the command's result as it writes it (the per-split numbers and each task's row,
which chapter 10's Results page reads) beside the header, one row (the start) and a summary per split.

    python benchmarks/smollm2_start.py     writes notebooks/data/smollm2_start_sampled.json
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_args, machine, new_record, write_json  # noqa: E402
from smollm2_rl import MODEL, REPO_ROOT  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_start_sampled.json"
N_SAMPLES, TEMPERATURE, MAX_NEW_TOKENS = 10, 0.8, 128
MEASURES = ("tasks", "greedy_pass@1", "pass@1", "pass@10")  # greedy pass@1; pass@1 and pass@10 from N_SAMPLES


def summary(result: dict) -> dict:
    """Each split's measures: the course's train/val/test and HumanEval's train/test."""
    parts = {"course": result, "humaneval": result["humaneval"]}
    return {f"{name} {split}": {m: part[f"{split}_{m}"] for m in MEASURES}
            for name, part in parts.items() for split in ("train", "val", "test") if f"{split}_tasks" in part}


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO_ROOT))
    from course_lib.lm.evaluation import evaluate_model

    start = time.perf_counter()
    result = evaluate_model(MODEL, max_new_tokens=MAX_NEW_TOKENS, humaneval=True, device="cpu",
                            n_samples=N_SAMPLES, temperature=TEMPERATURE)
    seconds = time.perf_counter() - start
    config = {"model": MODEL, "adapter": None, "style": result["style"], "max_new_tokens": MAX_NEW_TOKENS,
              "n_samples": N_SAMPLES, "temperature": TEMPERATURE, "humaneval": "all 164 problems"}
    header = new_record("benchmarks/smollm2_start.py", config=config, machine=machine(), device="cpu",
                        seconds=seconds, args=command_args(sys.argv[1:]))
    rows = summary(result)
    record = {**header, **{k: v for k, v in result.items() if k not in header},
              "runs": [{"model": "start", **{f"{split} {m}": v for split, row in rows.items() for m, v in row.items()}}],
              "summary": rows}
    write_json(OUTPUT, record)
    for split, row in rows.items():
        print(f"{split:16s} " + "  ".join(f"{m} {v:.3f}" if m != "tasks" else f"{v} tasks" for m, v in row.items()))
    print(f"wrote {OUTPUT} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
