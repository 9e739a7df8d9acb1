"""Chapter 10's comparison: REINFORCE, PPO and GRPO on the tiny coder, three seeds each.

Every run starts from chapter 9's SFT adapter (merged, with a fresh LoRA on top), trains
with the settings below on the tests of the train and val tasks, and is then evaluated
with the course's protocol (`evaluation.evaluate`: greedy pass@1 and the pass rate from
N_SAMPLES samples per task, on every split). The SFT start is evaluated once per seed
(the seed moves only its sampling). Two GRPO variants at a larger learning rate show the
chapter's "what went wrong". Two processes share the work, one torch thread each.

    python benchmarks/llm_rl_benchmark.py            writes notebooks/data/llm_rl_benchmark.json

The batch (`python -m book_tools reproduce`) runs it before chapter 10 when the file is missing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

from _common import machine, new_record, provenance, write_json  # benchmarks/_common.py (on sys.path as a script)

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "llm_rl_benchmark.json"

SEEDS = (0, 1, 2)
# The chapter's parameters cell has the same defaults: its seed-0 runs are this file's seed-0 runs.
COMMON = dict(steps=20, lr=1e-3, temperature=0.8, max_new_tokens=64, length_alpha=0.01, clip_eps=0.2, epochs=2)
# 16 completions per step for every method; the KL weight towards the reference is GRPO's (REINFORCE's loss has no
# KL term, and PPO runs with its own, 0)
METHODS = {
    "reinforce": dict(method="reinforce", prompts_per_step=16, group_size=1),
    "ppo": dict(method="ppo", prompts_per_step=16, group_size=1),
    "grpo": dict(method="grpo", prompts_per_step=4, group_size=4, kl_coef=0.05),
}
# Section 8's failure: GRPO at a 3x larger learning rate, as published and with a floor under the group std.
VARIANTS = {
    "grpo-lr3e-3": dict(method="grpo", prompts_per_step=4, group_size=4, kl_coef=0.05, lr=3e-3),
    "grpo-lr3e-3-min-std": dict(method="grpo", prompts_per_step=4, group_size=4, kl_coef=0.05, lr=3e-3, min_std=0.1),
}
EVAL = dict(n_samples=10, temperature=0.8, max_new_tokens=128)
LORA = dict(rank=8, alpha=16.0)
SUMMARY_KEYS = ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1", "avg_gen_len", "greedy_avg_gen_len")


def summarise(result: dict) -> dict:
    # pass@1 from EVAL's samples is "{split}_pass_rate" in this record, the name it was written with
    out = {f"{split}_pass_rate": result[f"{split}_pass@1"] for split in ("train", "val", "test")}
    out.update({k: result[k] for k in SUMMARY_KEYS})
    for split in ("train", "val", "test"):
        rows = [r for r in result["per_task"] if r["split"] == split]
        out[f"{split}_greedy_passed"] = sum(r["greedy_passed"] for r in rows)
        out[f"{split}_tasks"] = len(rows)
    return out


def run(job: tuple[str, int]) -> dict:
    """One job: ("sft", seed) evaluates the start; (method, seed) trains, then evaluates."""
    import torch
    import transformers

    from course_lib.lm import evaluation, llm, llm_rl, lm_policy
    from course_lib.tasks import load_tasks

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    name, seed = job
    start = time.perf_counter()
    tasks = load_tasks()
    model, tokenizer = lm_policy.load_policy(llm.TINY, "cpu", init_adapter=llm.DEFAULT_SFT_DIR,
                                          seed=seed, **LORA)
    history = []
    if name != "sft":
        spec = {**COMMON, **{**METHODS, **VARIANTS}[name], "seed": seed}
        history = llm_rl.train_rl(model, tokenizer, [t for t in tasks if t.split != "test"],
                                  llm_rl.RLConfig(**spec), progress=False)
    result = evaluation.evaluate(model, tokenizer, tasks, seed=seed, **EVAL)
    return {"method": name, "seed": seed, **summarise(result),
            "curve": [{k: r[k] for k in ("step", "reward", "pass_rate", "avg_len", "groups_with_a_pass")}
                      for r in history],
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the record")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    jobs = [(name, seed) for seed in SEEDS for name in (*METHODS, *VARIANTS, "sft")]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        runs = []
        for r in pool.imap(run, jobs):
            print(f"{r['method']:>10} seed {r['seed']}: train {r['train_pass_rate']:.3f} val {r['val_pass_rate']:.3f} "
                  f"test {r['test_pass_rate']:.3f} len {r['avg_gen_len']:.1f} ({r['seconds']:.0f} s)", flush=True)
            runs.append(r)
    from course_lib.lm import llm

    start_files = llm.tiny_start_files()  # every run starts from these: the chapter checks they are its own
    record = new_record("benchmarks/llm_rl_benchmark.py", config={"seeds": list(SEEDS), "common": COMMON,
                                                                    "methods": METHODS, "variants": VARIANTS,
                                                                    "eval": EVAL, "lora": LORA},
                        machine=machine(), device="cpu", seconds=time.perf_counter() - start, threads=1)
    record["start"] = [str(p.relative_to(REPO_ROOT)) for p in start_files]
    record["pretrained_sha256"] = provenance(start_files)["pretrained_sha256"]
    record["runs"] = runs
    # pass@1 from EVAL's samples ("{split}_pass_rate") and greedy pass@1, by method and split: the mean over the seeds
    record["summary"] = {name: {key: round(sum(r[key] for r in runs if r["method"] == name) / len(SEEDS), 4)
                                for split in ("train", "val", "test")
                                for key in (f"{split}_pass_rate", f"{split}_greedy_pass@1")}
                         for name in ("sft", *METHODS, *VARIANTS)}
    write_json(args.output, record)
    print(f"wrote {args.output} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
