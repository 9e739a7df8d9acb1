"""GRPO or teacher-guided GRPO of a LoRA coder on several processes, with accelerate (chapter 11).

Data parallelism, the way one trains on 8 GPUs: every process holds the same model
(same base, same LoRA start: the seed is shared), rolls out ITS OWN tasks and samples
(its seed is offset by its rank), computes the loss on them, and the processes average
their adapter gradients before each optimiser step, so their adapters stay identical.
One step thus learns from num_processes x batch-size prompts.

On a CPU (two processes talking over gloo, the test does this):

    accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \\
        --dynamo_backend no scripts/accelerate_grpo.py --cpu --method grpo --steps 2 --out runs/accelerate/cpu

(accelerate's `--cpu` flag starts one process only; `--multi_gpu` with the script's own
`--cpu` starts torchrun's processes and makes them meet on the CPU.) On 8 GPUs, with
DeepSeek-Coder:

    accelerate launch --multi_gpu --num_processes 8 scripts/accelerate_grpo.py \\
        --model-name deepseek-ai/deepseek-coder-1.3b-base --init-adapter none --method teacher-grpo \\
        --steps 300 --out runs/accelerate/deepseek

Only the first process writes: DIR/metrics.jsonl (one row per step, rewards averaged over
the processes), DIR/adapter/ and DIR/run.json, which records how far the processes'
adapters ended apart (0.0 when the gradients were averaged, as they must be).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", choices=("grpo", "teacher-grpo"), default="grpo", help="RL method [grpo]")
    p.add_argument("--model-name", default="tiny", help="'tiny', a folder, or a hub name [tiny]")
    p.add_argument("--init-adapter", default="auto", help="adapter merged in first: a folder, 'none', 'auto' [auto]")
    p.add_argument("--out", required=True, help="folder for metrics.jsonl, adapter/ and run.json")
    p.add_argument("--steps", type=int, default=20, help="optimiser steps [20]")
    p.add_argument("--batch-size", type=int, default=8, help="prompts per step, per process [8]")
    p.add_argument("--group-size", type=int, default=4, help="samples per prompt [4]")
    p.add_argument("--max-new-tokens", type=int, default=64, help="rollout generation limit [64]")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the adapter [1e-3]")
    p.add_argument("--style", choices=("completion", "instruct"), default="completion", help="prompt format [completion]")
    p.add_argument("--seed", type=int, default=0, help="shared seed; rollouts use seed + 1000 * rank [0]")
    p.add_argument("--cpu", action="store_true", help="run every process on the CPU (gloo), even if a GPU is there")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process [1]")
    return p.parse_args(argv)


def main(argv=None) -> int:
    import torch
    import transformers

    from course_lib.lm import llm, llm_rl, lm_policy
    from course_lib.cli import llm_cli
    from course_lib.tasks import load_tasks

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=args.cpu)  # llm_rl.LMTrainer averages the adapter's gradients over the processes
    rank, world = accelerator.process_index, accelerator.num_processes
    out = Path(args.out)
    if accelerator.is_main_process and (out / "metrics.jsonl").exists():
        raise SystemExit(f"{out} already holds a run (metrics.jsonl); choose another --out")
    start = time.perf_counter()
    init_adapter = llm_cli.resolve_init_adapter(args.init_adapter, args.model_name)
    model, tokenizer = lm_policy.load_policy(args.model_name, str(accelerator.device), init_adapter=init_adapter,
                                          seed=args.seed)  # the same start on every process
    config = llm_rl.RLConfig(method=args.method, steps=args.steps, prompts_per_step=args.batch_size,
                             group_size=args.group_size, max_new_tokens=args.max_new_tokens, lr=args.lr,
                             style=args.style, seed=args.seed + 1000 * rank)  # each process its own rollouts
    pool = [t for t in load_tasks() if t.split in config.rollout_splits]
    history = llm_rl.train_rl(model, tokenizer, pool, config, accelerator=accelerator,
                              progress=accelerator.is_main_process)

    # ---- every process: the mean of the logged numbers, and how far the adapters drifted apart
    keys = ("reward", "pass_rate", "avg_len")
    local = torch.tensor([[row[k] for k in keys] for row in history], dtype=torch.float64)
    mean = accelerator.reduce(local.to(accelerator.device), reduction="mean").cpu()
    flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters() if p.requires_grad])
    every = accelerator.gather(flat.to(accelerator.device)).view(world, -1)
    spread = (every.max(dim=0).values - every.min(dim=0).values).max().item()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "metrics.jsonl", "w") as f:
            for row, means in zip(history, mean.tolist()):
                f.write(json.dumps({**row, **{f"{k}_all": round(v, 4) for k, v in zip(keys, means)}}) + "\n")
        llm.save_adapter(model, out / "adapter")
        run = {"processes": world, "distributed_type": str(accelerator.distributed_type),
               "backend": accelerator.state.backend, "device": str(accelerator.device),
               "adapter_spread": spread, "prompts_per_step_all": args.batch_size * world,
               "config": {**asdict(config), "seed": args.seed}, "wall_seconds": round(time.perf_counter() - start, 1)}
        (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
        print(f"{world} process(es), {accelerator.distributed_type}: {args.steps} steps, mean reward of the last "
              f"step {mean[-1, 0].item():.3f}, adapters {spread:.1e} apart; wrote {out}", flush=True)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
