"""Hugging Face's `generate` and the course's fast engine (`course_lib.lm.decode`) on a GPU, side by side:
how fast each writes the GPU run's rollouts, how far the fast engine's distribution is from the learner's,
and what each does to a GRPO step of the GPU run, by part.

Settings: SmolLM2-135M-Instruct in float32 under a fresh LoRA (the start), the GPU run's rollout
(`smollm2_gpu_long.py`: 8 chat prompts of the first `train` tasks x a group of 8 samples, one batch of 64
rows, T = 0.8, up to 128 new tokens, no stop sequence so both engines write the same amount of work).

    generation   each engine twice, alternating, the faster try kept: useful tokens (up to each row's
                 <eos>) per second
    sampler KL   KL(fast engine || learner) per token on prefixes the fast engine sampled: the engine's
                 logits fed one token at a time (`decode.forced_logits`) against the learner's one pass
    grpo-step    STEPS steps of the GPU run's settings (8 x 8, 2 epochs, micro-batch 16, KL 0.05) from the
                 start with each engine, each step by part: generate, sandbox, score (log pi_old), learn

    python benchmarks/smollm2_gpu_engines.py --device cuda   writes notebooks/data/smollm2_gpu_engines.json

On a CPU (--device cpu) it runs too, slowly; the CPU's own comparison is benchmarks/generation_throughput.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fastest, machine, new_record, take_turns, write_json  # noqa: E402
from generation_throughput import timed_generate  # noqa: E402
from smollm2_gpu_long import RL_LONG  # noqa: E402
from smollm2_rl import LORA, MODEL, REPO_ROOT  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_gpu_engines.json"
ENGINES = ("hf", "fast")
REPEATS = 2
STEPS = 3  # the first step in a process pays for allocations and kernel choices; the record keeps each
STEP = {**RL_LONG, "steps": STEPS, "micro_batch_size": 16}
QUICK = {"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 16, "steps": 2}  # --quick: a smoke test


def sampler_kl(model, tokenizer, prompts, evaluation, decode) -> dict:
    """KL(fast engine || learner) per token at T on the prefixes the fast engine sampled (48 tokens a prompt)."""
    import torch

    from course_lib.lm.llm import encode_prompt

    T = RL_LONG["temperature"]
    gens = evaluation.generate(model, tokenizer, prompts, temperature=T, max_new_tokens=48, stop_sequences=(),
                               engine="fast")
    snapshot = decode.Snapshot(model)
    kl = torch.cat([decode.kl_to_learner(snapshot, model, encode_prompt(tokenizer, prompts[g.prompt_index]), g.ids, T)
                    for g in gens])
    return {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "tokens": int(kl.numel())}


def generation(model, tokenizer, prompts, group: int, evaluation) -> dict:
    """Each engine's useful tokens per second on the rollout's rows (one batch), the faster of REPEATS tries."""
    tries = take_turns({engine: partial(timed_generate, evaluation, model, tokenizer, prompts, group, engine,
                                        len(prompts) * group) for engine in ENGINES}, REPEATS)
    out = {}
    for engine, runs in tries.items():
        out[engine] = best = fastest(runs)
        print(f"{engine:>4}: {best['tokens_per_s']:7.1f} useful tokens/s ({best['tokens']} tokens, {best['rows']} rows "
              f"in {best['seconds']:.2f} s; tries {out[engine]['tries_s']})", flush=True)
    out["speedup"] = round(out["fast"]["tokens_per_s"] / out["hf"]["tokens_per_s"], 2)
    return out


def grpo_steps(device: str, engine: str, step: dict) -> list[dict]:
    """STEPS GRPO steps of the GPU run's settings from the start, sampled by `engine`: each step's parts."""
    import torch

    from course_lib.lm import llm_rl, lm_policy
    from course_lib.tasks import load_tasks

    model, tokenizer = lm_policy.load_policy(MODEL, device, seed=0, dtype=torch.float32, **LORA)
    pool = llm_rl.rollout_tasks(load_tasks(), humaneval_train=True)
    trainer = llm_rl.LMTrainer(model, tokenizer, pool, llm_rl.RLConfig(**step, engine=engine, seed=0))
    rows = []
    for _ in range(step["steps"]):
        start = time.perf_counter()
        row = trainer.step()
        rows.append({"step_s": round(time.perf_counter() - start, 2),
                     **{k: round(v, 3) for k, v in trainer.times[-1].items()},
                     **{k: row[k] for k in ("reward", "avg_len", "kl_ref", "sampler_kl", "is_weight_mean") if k in row}})
        print(f"GRPO step, {engine:>4}: {rows[-1]}", flush=True)
    del model, trainer
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


def rows_of(runs: dict) -> list[dict]:
    """The record's rows: each engine's generation, the sampler KL, and each engine's GRPO steps, one row each."""
    return ([{"measure": "generation", "engine": e, **runs["generation"][e]} for e in ENGINES]
            + [{"measure": "sampler_kl", "engine": "fast", **runs["sampler_kl"]}]
            + [{"measure": "grpo_step", "engine": e, "step": i + 1, **row}
               for e in ENGINES for i, row in enumerate(runs["grpo_steps"][e])])


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda or cpu [cuda]")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--quick", action="store_true", help=f"a smoke test: {QUICK}")
    args = parser.parse_args()
    step = {**STEP, **(QUICK if args.quick else {})}

    import torch
    import transformers

    from course_lib.lm import decode, evaluation, lm_policy, protocol
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    transformers.utils.logging.disable_progress_bar()
    started = time.perf_counter()
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    model, tokenizer = lm_policy.load_policy(MODEL, args.device, seed=0, dtype=torch.float32, **LORA)
    train = [t for t in load_tasks() if t.split == "train"]
    prompts = [protocol.prompt_for(t, "chat", tokenizer) for t in train[:step["prompts_per_step"]]]
    for engine in ENGINES:  # warm-up
        evaluation.generate(model, tokenizer, prompts[:2], temperature=0.8, max_new_tokens=8, stop_sequences=(),
                            engine=engine)
    runs = {"generation": generation(model, tokenizer, prompts, step["group_size"], evaluation),
            "sampler_kl": sampler_kl(model, tokenizer, prompts[:4], evaluation, decode)}
    print(f"KL(fast || learner) per token: {runs['sampler_kl']}", flush=True)
    device = next(model.parameters()).device
    del model
    runs["grpo_steps"] = {engine: grpo_steps(args.device, engine, step) for engine in ENGINES}
    later = {e: round(statistics.mean(r["step_s"] for r in rows[1:]), 2) for e, rows in runs["grpo_steps"].items()}
    summary = {"generation_speedup": runs["generation"]["speedup"], "step_s_after_the_first": later,
               "sampler_kl_mean": runs["sampler_kl"]["kl_mean"], "step_speedup": round(later["hf"] / later["fast"], 2)}
    record = new_record("benchmarks/smollm2_gpu_engines.py", args=["--device", args.device, *(["--quick"] * args.quick)],
                        config={"model": MODEL, "dtype": "float32", "lora": LORA, "temperature": 0.8,
                                "grpo_step": step, "engines": ENGINES, "repeats": REPEATS, "quick": args.quick},
                        machine=machine(device), device=str(device), seconds=time.perf_counter() - started)
    record["runs"], record["summary"] = rows_of(runs), summary
    write_json(args.output, record)
    print(summary, f"\nwrote {args.output}", flush=True)


if __name__ == "__main__":
    main()
