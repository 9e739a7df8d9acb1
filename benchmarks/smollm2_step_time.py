"""How long one LoRA-GRPO step on SmolLM2-135M-Instruct takes on this machine, and where the time goes.

One step of chapter 10's settings (`smollm2_rl.RL`: 4 prompts x a group of 4, up to 128 new tokens,
2 epochs, a KL term) from the start, on the course's train + val tasks, with torch's default threads:
the time of the whole step, of its rollout (sampling, the sandbox, log pi_old) and of its learning
(the epochs), and how many times the frozen reference model was run. After one warm-up step, the same
step is timed REPEATS times each way, alternating: as the course runs it (`update.frozen_reference`: the
reference scored once per set of rows) and with the reference scored again in every epoch, as the
loop did before. Every timed step must give the same row of diagnostics.

    python benchmarks/smollm2_step_time.py     writes notebooks/data/smollm2_step_time.json (about 7 min)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, new_record, take_turns, write_json  # noqa: E402
from smollm2_rl import LORA, MODEL, REPO_ROOT, RL  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_step_time.json"
SEED = 0
REPEATS = 2
STEP = {**RL, "steps": 1}  # chapter 10's settings, one step


def every_epoch(policy, ro):
    """The reference as the loop ran it before `update.frozen_reference`: scored on every call."""
    return lambda rows: policy.reference_logprobs(ro, rows)


def one_step(rl_module, llm_rl, lm_policy, tasks) -> dict:
    """One GRPO step from a fresh LoRA (the start), timed by phase; returns the times and the step's row."""
    model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=SEED, **LORA)
    calls = {"reference": 0}
    reference_logprobs = lm_policy.LMActor.reference_logprobs

    def counted(self, ro, rows):
        calls["reference"] += 1
        return reference_logprobs(self, ro, rows)

    timed = {"collect": 0.0, "learn": 0.0}
    collect, learn = llm_rl.LMTrainer.collect, rl_module.learn

    def timed_collect(self):
        t = time.perf_counter()
        out = collect(self)
        timed["collect"] += time.perf_counter() - t
        return out

    def timed_learn(*args, **kwargs):
        t = time.perf_counter()
        out = learn(*args, **kwargs)
        timed["learn"] += time.perf_counter() - t
        return out

    lm_policy.LMActor.reference_logprobs = counted
    llm_rl.LMTrainer.collect = timed_collect
    rl_module.learn = timed_learn
    try:
        start = time.perf_counter()
        [row] = llm_rl.train_rl(model, tokenizer, llm_rl.rollout_tasks(tasks),
                                llm_rl.RLConfig(**STEP, seed=SEED), progress=False)
        total = time.perf_counter() - start
    finally:
        lm_policy.LMActor.reference_logprobs = reference_logprobs
        llm_rl.LMTrainer.collect = collect
        rl_module.learn = learn
    from course_lib.lm.evaluation import pick_engine

    engine = STEP.get("engine", "auto")
    return {"engine": pick_engine(model, None if engine == "auto" else engine, STEP["temperature"]),  # sampled with
            "step_seconds": round(total, 1), "rollout_seconds": round(timed["collect"], 1),
            "learn_seconds": round(timed["learn"], 1), "reference_passes": calls["reference"],
            "row": {k: v for k, v in row.items() if k != "seconds"}}


def main() -> None:
    import transformers

    from course_lib.lm import llm_rl, lm_policy
    from course_lib.core import rl, update
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    started = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    tasks = load_tasks()
    variants = {"reference once per set of rows": None, "reference every epoch": every_epoch}
    one_step(rl, llm_rl, lm_policy, tasks)  # warm-up: the first step in a process pays for allocations

    def step_with(label: str, reference) -> dict:
        original = update.frozen_reference
        if reference is not None:
            update.frozen_reference = reference
        try:
            r = one_step(rl, llm_rl, lm_policy, tasks)
        finally:
            update.frozen_reference = original
        print(f"{label}: step {r['step_seconds']} s (rollout {r['rollout_seconds']} s, learn "
              f"{r['learn_seconds']} s), {r['reference_passes']} reference pass(es)", flush=True)
        return r

    # the variants take turns, so a machine that slows down hurts both alike
    rows = take_turns({label: partial(step_with, label, reference) for label, reference in variants.items()}, REPEATS)
    steps = [r["row"] for runs in rows.values() for r in runs]
    if any(row != steps[0] for row in steps):
        raise SystemExit(f"the steps differ: {steps}")
    summary = {label: {key: round(statistics.mean(r[key] for r in runs), 1)
                       for key in ("step_seconds", "rollout_seconds", "learn_seconds")}
               for label, runs in rows.items()}
    for label, mean in summary.items():
        print(f"{label}, mean of {REPEATS}: {mean}")
    record = new_record("benchmarks/smollm2_step_time.py",
                        config={"model": MODEL, "rl": STEP, "lora": LORA, "seed": SEED, "repeats": REPEATS,
                                "rollout_pool": "course train + val", "variants": list(variants)},
                        machine=machine(), device="cpu", seconds=time.perf_counter() - started)
    record["runs"] = [{"variant": label, "try": n, **{k: v for k, v in r.items() if k != "row"}}
                      for label, runs in rows.items() for n, r in enumerate(runs)]
    record["summary"] = {"mean": summary, "same_step": True, "step_row": steps[0]}
    write_json(OUTPUT, record)
    print(f"wrote {OUTPUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
