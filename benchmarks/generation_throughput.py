"""How fast SmolLM2-135M-Instruct writes, through Hugging Face's `generate` and the course's fast engine
(`course_lib.lm.decode`, in float32 and with bfloat16 weights), side by side in one run, and what that does to a
GRPO step of chapter 10.

Settings (fp32, torch's default threads, chat prompts of the first `train` tasks, T = 0.8, up to 128 tokens):

    rollout      chapter 10's rollout: 4 prompts x a group of 4 samples (16 rows), twice (8 prompts)
    batch-32     32 different prompts in one batch of 32
    grpo-step    one GRPO step of chapter 10's settings from the start (4 x 4, 2 epochs, KL 0.05), by part:
                 generate, sandbox, score (log pi_old), learn (the epochs and the reference), in five setups
                 (STEP_SETUPS): as it ran before the fast engine (Hugging Face's generate, the learner's one
                 padded pass over all rows), each engine, the learner's length-sorted chunks (the default
                 now), and bfloat16 for both sampler and learner; each setup twice, alternating, the
                 faster try kept (the record lists both)

Useful tokens are those up to each row's <eos>: what the reader waits for. Every generation and step is
timed twice, alternating with the others, and the faster try is kept (a spike of another process's load
slows one try, not a setting). The whole set runs once at
torch's default CPU capability and once with ATEN_CPU_CAPABILITY=avx2 (the kernels of most free notebook
runtimes), each in its own process. int8 weights were a candidate too: the record keeps the KL between
their next-token distribution and the learner's on the same prefixes, which rules them out.

    python benchmarks/generation_throughput.py     writes notebooks/data/generation_throughput.json (~25 min)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from _common import fastest, machine, new_record, take_turns, write_json  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "generation_throughput.json"

MODEL = "smollm2-135m-instruct"
TEMPERATURE = 0.8
MAX_NEW_TOKENS = 128
CAPABILITIES = (None, "avx2")  # None: torch's default for this processor
ENGINES = ("hf", "fast", "fast-bf16")
STEP_REPEATS = 2  # each engine's generation and each setup's step is timed this many times; the fastest try is kept
STEP_SETUPS = {  # name -> RLConfig settings; "before" is the step as it ran before the fast engine
    "before": dict(engine="hf", score_tokens=None),
    "fast, one pass": dict(engine="fast", score_tokens=None),
    "fast, chunked": dict(engine="fast"),  # the default on a CPU
    "fast-bf16, chunked": dict(engine="fast-bf16"),
    "fast-bf16, chunked, bf16 learner": dict(engine="fast-bf16", learner_dtype="bfloat16"),
}
STEP = dict(method="grpo", style="chat", steps=1, prompts_per_step=4, group_size=4, lr=1e-3, temperature=TEMPERATURE,
            max_new_tokens=MAX_NEW_TOKENS, length_alpha=0.0, clip_eps=0.2, epochs=2, kl_coef=0.05, seed=0)


def timed_generate(evaluation, model, tokenizer, prompts, n_samples, engine, batch_size):
    start = time.perf_counter()
    gens = evaluation.generate(model, tokenizer, prompts, n_samples=n_samples, temperature=TEMPERATURE,
                               max_new_tokens=MAX_NEW_TOKENS, stop_sequences=(), seed=0, engine=engine,
                               batch_size=batch_size)
    seconds = time.perf_counter() - start
    tokens = sum(g.n_tokens for g in gens)
    return {"rows": len(gens), "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)}


def int8_mismatch(decode, model, tokenizer, prompts, evaluation):
    """KL(int8 sampler || learner) per token on prefixes the fp32 engine sampled, and the fp32 engine's own."""
    import torch

    from course_lib.lm.llm import encode_prompt

    gens = evaluation.generate(model, tokenizer, prompts, temperature=TEMPERATURE, max_new_tokens=48,
                               stop_sequences=(), engine="fast")
    out = {}
    for name, snapshot in (("fast", decode.Snapshot(model)), ("fast-bf16", decode.Snapshot(model, "bfloat16")),
                           ("int8", decode.Snapshot(model, "int8"))):
        kl = torch.cat([decode.kl_to_learner(snapshot, model, encode_prompt(tokenizer, prompts[g.prompt_index]),
                                             g.ids, TEMPERATURE) for g in gens])
        out[name] = {"kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "tokens": int(kl.numel())}
    return out


def grpo_step(setup: dict):
    """One GRPO step of chapter 10's settings from the start, in this setup (STEP_SETUPS): seconds by part."""
    from course_lib.lm import llm_rl, lm_policy
    from course_lib.tasks import load_tasks

    model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=0, rank=8, alpha=16.0)
    pool = llm_rl.rollout_tasks(load_tasks())
    trainer = llm_rl.LMTrainer(model, tokenizer, pool, llm_rl.RLConfig(**STEP, **setup))
    start = time.perf_counter()
    row = trainer.step()
    return {"step_s": round(time.perf_counter() - start, 2), **trainer.times[0],
            "row": {k: row[k] for k in ("reward", "avg_len", "kl_ref", "approx_kl") if k in row}
            | {k: row[k] for k in ("sampler_kl", "is_weight_mean") if k in row}}


def measure() -> dict:
    """Everything at this process's CPU capability."""
    import torch
    import transformers

    from course_lib.lm import decode, evaluation, model_zoo, protocol
    from course_lib.tasks import load_tasks

    transformers.utils.logging.disable_progress_bar()
    model, tokenizer = model_zoo.load_model(MODEL, "cpu")
    train = [t for t in load_tasks() if t.split == "train"]
    prompts = [protocol.prompt_for(t, "chat", tokenizer) for t in train[:32]]
    evaluation.generate(model, tokenizer, prompts[:4], temperature=TEMPERATURE, max_new_tokens=8, stop_sequences=(),
                        engine="hf")  # warm-up
    out = {"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(), "settings": {}}
    for setting, groups, n, batch in (("rollout", [prompts[:4], prompts[4:8]], 4, 16), ("batch-32", [prompts], 1, 32)):
        out["settings"][setting] = row = {"batch_size": batch, "samples_per_prompt": n}

        def groups_generated(engine, groups=groups, n=n, batch=batch) -> dict:
            runs = [timed_generate(evaluation, model, tokenizer, g, n, engine, batch) for g in groups]
            return {"rows": sum(r["rows"] for r in runs), "tokens": sum(r["tokens"] for r in runs),  # the same seed:
                    "seconds": sum(r["seconds"] for r in runs)}                                       # the same each try

        tries = take_turns({engine: partial(groups_generated, engine) for engine in ENGINES}, STEP_REPEATS)
        for engine in ENGINES:
            best = fastest(tries[engine])
            rows, tokens, seconds = best["rows"], best["tokens"], best["seconds"]
            row[engine] = {"rows": rows, "tokens": tokens, "seconds": round(seconds, 2),
                           "tokens_per_s": round(tokens / seconds, 1), "tries_s": [round(t, 2) for t in best["tries_s"]]}
            print(f"[{out['capability']}] {setting:>8} {engine:>4}: {row[engine]['tokens_per_s']:6.1f} useful tokens/s "
                  f"({tokens} in {seconds:.1f} s; tries {row[engine]['tries_s']})", flush=True)
        row["speedup"] = round(row["fast"]["tokens_per_s"] / row["hf"]["tokens_per_s"], 2)
        row["speedup_bf16"] = round(row["fast-bf16"]["tokens_per_s"] / row["hf"]["tokens_per_s"], 2)
    out["int8_candidate"] = int8_mismatch(decode, model, tokenizer, prompts[:4], evaluation)
    del model
    tries = take_turns({name: partial(grpo_step, setup) for name, setup in STEP_SETUPS.items()}, STEP_REPEATS)
    out["grpo_step"] = steps = {}
    for name, runs in tries.items():
        steps[name] = r = fastest(runs, "step_s")
        r["speedup"] = round(steps["before"]["step_s"] / r["step_s"], 2)
        print(f"[{out['capability']}] GRPO step, {name:>32}: {r['step_s']:5.1f} s (generate {r['generate_s']:.1f}, "
              f"sandbox {r['sandbox_s']:.2f}, score {r['score_s']:.1f}, learn {r['learn_s']:.1f}): "
              f"{r['speedup']}x; tries {r['tries_s']}", flush=True)
    return out


def main() -> None:
    if "--measure" in sys.argv:
        print("RESULT " + json.dumps(measure()), flush=True)
        return

    started = time.perf_counter()
    runs = []
    for capability in CAPABILITIES:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        if capability:
            env["ATEN_CPU_CAPABILITY"] = capability
        proc = subprocess.run([sys.executable, __file__, "--measure"], env=env, capture_output=True, text=True,
                              cwd=REPO_ROOT)
        sys.stdout.write("".join(l + "\n" for l in proc.stdout.splitlines() if not l.startswith("RESULT ")))
        if proc.returncode:
            sys.exit(f"the measurement at capability {capability or 'default'} failed:\n{proc.stderr[-3000:]}")
        runs.append({"ATEN_CPU_CAPABILITY": capability,
                     **json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])})
    record = new_record(
        "benchmarks/generation_throughput.py", config={"model": MODEL, "temperature": TEMPERATURE,
                                                       "max_new_tokens": MAX_NEW_TOKENS, "dtype": "float32",
                                                       "grpo_step": STEP, "grpo_step_setups": STEP_SETUPS},
        machine=machine(), device="cpu",
        seconds=time.perf_counter() - started)
    record["runs"] = runs
    record["summary"] = {f"{r['capability']}": {
        "rollout_speedup": r["settings"]["rollout"]["speedup"], "batch32_speedup": r["settings"]["batch-32"]["speedup"],
        "rollout_speedup_bf16": r["settings"]["rollout"]["speedup_bf16"],
        "batch32_speedup_bf16": r["settings"]["batch-32"]["speedup_bf16"],
        "grpo_step_speedup": {name: step["speedup"] for name, step in r["grpo_step"].items()}} for r in runs}
    write_json(OUTPUT, record)
    print(json.dumps(record["summary"]), f"\nwrote {OUTPUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
