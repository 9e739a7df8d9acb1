"""Teacher-guided GRPO against plain GRPO on the tiny coder, three seeds (chapter 11 reads the result).

Each run starts from Chapter 9's SFT adapter (merged) under a fresh LoRA, trains with
`course_lib.lm.llm_rl.train_rl` on the train + val tasks' tests, and is evaluated on every split
with SETTINGS["n_samples"] samples per task. The SFT start is evaluated too. The settings are chapter 11's
defaults; the notebook checks that they match its parameters cell. Jobs run two at a time
(one torch thread each), so the whole benchmark takes a few minutes on two cores.

    python benchmarks/teacher_grpo_benchmark.py        # writes notebooks/data/teacher_grpo_benchmark.json
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _common import machine, new_record, write_json  # benchmarks/_common.py (this folder is on sys.path as a script)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "notebooks" / "data" / "teacher_grpo_benchmark.json"

SEEDS = (0, 1, 2)
METHODS = ("grpo", "teacher-grpo")
SETTINGS = dict(model_name="tiny", init_adapter="notebooks/checkpoints/tiny_coder_sft", rl_steps=12,
                prompts_per_step=8, group_size=4, lr=5e-3, max_new_tokens=64, length_alpha=0.0, kl_coef=0.05,
                teacher_sft_weight=0.3, self_sft_weight=0.2, n_samples=10, temperature=0.8)
WORKERS = 2


def job(method: str, seed: int) -> dict:
    """One run (method "SFT start": evaluation only); per-task counts and wall time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    from course_lib.lm import evaluation, llm_rl, lm_policy
    from course_lib.tasks import load_tasks

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    s = SETTINGS
    start = time.perf_counter()
    tasks = load_tasks()
    model, tokenizer = lm_policy.load_policy(s["model_name"], "cpu", init_adapter=str(REPO / s["init_adapter"]), seed=seed)
    history = []
    if method != "SFT start":
        config = llm_rl.RLConfig(method=method, steps=s["rl_steps"], prompts_per_step=s["prompts_per_step"],
                                 group_size=s["group_size"], lr=s["lr"], max_new_tokens=s["max_new_tokens"],
                                 length_alpha=s["length_alpha"], kl_coef=s["kl_coef"],
                                 teacher_sft_weight=s["teacher_sft_weight"], self_sft_weight=s["self_sft_weight"],
                                 seed=seed)
        history = llm_rl.train_rl(model, tokenizer, [t for t in tasks if t.split in ("train", "val")], config,
                                  progress=False)
    result = evaluation.evaluate(model, tokenizer, tasks, n_samples=s["n_samples"], temperature=s["temperature"],
                                 greedy=False, max_new_tokens=s["max_new_tokens"], seed=seed)
    per_task = [{k: r[k] for k in ("id", "split", "n", "c")} for r in result["per_task"]]
    return {"method": method, "seed": seed, "per_task": per_task,
            "pass_rate": {sp: result[f"{sp}_pass@1"] for sp in ("train", "val", "test")},  # pass@1 from samples
            "rollout_pass_rate": [r["pass_rate"] for r in history],
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> int:
    start = time.perf_counter()
    jobs = [(m, seed) for seed in SEEDS for m in METHODS] + [("SFT start", seed) for seed in SEEDS]
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        runs = list(pool.map(job, *zip(*jobs)))
    for r in runs:
        print(f"{r['method']:<13} seed {r['seed']}: pass rate train {r['pass_rate']['train']:.3f} "
              f"val {r['pass_rate']['val']:.3f} test {r['pass_rate']['test']:.3f} ({r['seconds']:.0f} s)")
    record = new_record("benchmarks/teacher_grpo_benchmark.py", config={**SETTINGS, "seeds": list(SEEDS),
                                                                          "workers": WORKERS},
                        machine=machine(), device="cpu", seconds=time.perf_counter() - start, threads=1)
    record["runs"] = runs
    # pass@1 from n_samples samples at the temperature, by method and split: the mean over the seeds
    record["summary"] = {m: {sp: round(sum(r["pass_rate"][sp] for r in runs if r["method"] == m) / len(SEEDS), 4)
                             for sp in ("train", "val", "test")} for m in ("SFT start", *METHODS)}
    write_json(OUT, record)
    print(f"wrote {OUT.relative_to(REPO)} in {record['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
