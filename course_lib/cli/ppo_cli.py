"""The `ppo` and `eval` commands: the GRU's PPO run (chapter 6) and the evaluation of any policy.

    python -m course_lib ppo --seed 0 --out runs/ppo/seed0        # pretrain, then PPO, then evaluate
    python -m course_lib eval --checkpoint runs/ppo/seed0/policy.pt
    python -m course_lib eval --model smollm2-135m-instruct --humaneval
    python -m course_lib eval --model smollm2-135m-instruct --humaneval --samples 10   # + pass@1 from 10 samples

Every `ppo` option is a field of `course_lib.gru.ppo_config.PPOConfig` (with its help); the loop is
`course_lib.gru.trainer`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from course_lib.config import ConfigError, add_options, from_options
from course_lib.gru.checkpoints import CheckpointFormatError
from course_lib.gru.ppo_config import PPOConfig
from course_lib.gru.ppo_run import evaluate_checkpoint, run
from course_lib.gru.trainer import CONFIG_FILE, EVAL_FILE
from course_lib.runs import CheckpointMismatchError
from course_lib.tasks import TaskFormatError, load_tasks


def add_arguments(parser) -> None:
    """Every PPOConfig field as an option (--ent-coef 0.01), plus --config FILE, --out, --resume."""
    parser.add_argument("--out", required=True, help="folder for config.json, metrics.jsonl, checkpoints, eval.json")
    parser.add_argument("--config", metavar="FILE", help="JSON file of settings; options given here override it")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its train_state.pt")
    parser.add_argument("--stop-after", type=int, metavar="N", help="stop after N updates (state saved), as if interrupted")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--device", default="cpu",
                        help="where the network runs: cpu, cuda, or auto (cuda if torch sees a GPU). The sandbox, "
                             "the sampling and the RL loss stay on the CPU. The book's records were made on the CPU, "
                             "the default: with the batch's settings (book/how_to_run.md, 'Same numbers on another "
                             "machine') the same command gives the book's numbers [cpu]")
    add_options(parser.add_argument_group("hyperparameters (defaults in brackets)"), PPOConfig)
    parser.set_defaults(func=main_ppo)


def config_from_args(args, base: dict | None = None) -> PPOConfig:
    """Defaults, then `base` (a resumed run's settings), then --config FILE, then the options given."""
    data = dict(base or {})
    if getattr(args, "config", None):
        data.update(PPOConfig.load(args.config).to_dict())
    return from_options(PPOConfig, args, data)


def main_ppo(args) -> int:
    try:
        saved = Path(args.out) / CONFIG_FILE
        base = PPOConfig.load(saved).to_dict() if args.resume and saved.exists() else {}
        config = config_from_args(args, base)
        start = time.perf_counter()
        result = run(config, args.out, resume=args.resume, stop_after=args.stop_after, progress=not args.no_progress,
                     device=args.device)
    except (ConfigError, CheckpointMismatchError, CheckpointFormatError, TaskFormatError, FileNotFoundError) as e:
        print(f"error: {e}")
        return 2
    if result is None:
        return 0
    print(f"done in {time.perf_counter() - start:.1f} s: " + ", ".join(
        f"{k} {result[k]:.3f} (start {result['baseline'][k]:.3f})"
        for k in ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1") if k in result))
    print(f"wrote {Path(args.out) / EVAL_FILE}")
    return 0


def add_eval_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="a course GRU checkpoint (policy.pt, pretrained.pt, ...)")
    which.add_argument("--model", metavar="NAME", help="a transformer: smollm2-135m-instruct, tiny, a hub name "
                                                       "(deepseek-ai/deepseek-coder-1.3b-instruct) or a folder")
    parser.add_argument("--tasks", metavar="PATH", help="folder of task TOML files, one .toml file, or a "
                                                        ".jsonl/.parquet file of tasks; default: the course's tasks/")
    parser.add_argument("--task-fields", metavar="RENAMES", help="for a .jsonl/.parquet file: ours=theirs field "
                                                                 "renames, e.g. prompt=question,solution=answer")
    parser.add_argument("--out", metavar="FILE", help="write the results as JSON here")
    parser.add_argument("--max-new-tokens", type=int, help="generation limit; default: the checkpoint's "
                                                            "(a transformer: 256)")
    llm_options = parser.add_argument_group("a transformer (--model)")
    llm_options.add_argument("--adapter", metavar="DIR", help="a LoRA adapter folder written by `llm` (DIR/adapter)")
    llm_options.add_argument("--style", choices=["chat", "completion", "instruct"],
                             help="how the task is put to the model; default: chat if its tokenizer has a chat "
                                  "template, else completion")
    llm_options.add_argument("--humaneval", action="store_true", help="also the 164 HumanEval problems")
    llm_options.add_argument("--samples", type=int, default=0, metavar="N",
                             help="also pass@1 and pass@k from N samples per task [0: greedy only]")
    llm_options.add_argument("--temperature", type=float, default=0.8, help="sampling temperature of --samples [0.8]")
    llm_options.add_argument("--device", default="auto", help="cuda, cpu, or auto: cuda if available [auto]")
    parser.set_defaults(func=main_eval)


def main_eval(args) -> int:
    if args.checkpoint and not Path(args.checkpoint).exists():
        print(f"error: checkpoint {args.checkpoint} does not exist")
        return 2
    try:
        if args.model:
            from course_lib.lm.evaluation import evaluate_model  # transformers is heavy: imported only for --model

            tasks = load_tasks(tasks_dir=args.tasks, fields=args.task_fields) if args.tasks else None
            result = evaluate_model(args.model, adapter=args.adapter, tasks=tasks, style=args.style,
                                    max_new_tokens=args.max_new_tokens or 256, humaneval=args.humaneval,
                                    device=args.device, n_samples=args.samples, temperature=args.temperature)
        else:
            result = evaluate_checkpoint(args.checkpoint, args.tasks, args.max_new_tokens, fields=args.task_fields)
    except (CheckpointMismatchError, CheckpointFormatError, TaskFormatError, FileNotFoundError,
            ModuleNotFoundError, ValueError) as e:
        print(f"error: {e}")
        return 2
    rows = [("", result)] + ([("humaneval_", result["humaneval"])] if "humaneval" in result else [])
    for prefix, part in rows:
        for key, value in part.items():
            if key.endswith(("pass@1", "pass@10")):  # greedy pass@1; pass@1 and pass@10 from samples
                print(f"{prefix + key:32s} {value:.3f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0
