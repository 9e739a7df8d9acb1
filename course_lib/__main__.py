"""Command line: ``python -m course_lib COMMAND [options]``.

Commands:
    ppo                pretrain a GRU policy (or load one), train it with PPO, evaluate it (chapter 6)
    eval               greedy pass rates of a checkpoint on the course's splits or a folder of tasks
    llm                LoRA SFT or RL (REINFORCE, PPO, GRPO) of a transformer coder, then evaluation (chapters 9-11)

The book's own commands (reproduce, check-book, sync-setup-cells, ...) are ``python -m book_tools``'s.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    ppo = commands.add_parser(
        "ppo", help="train a policy with PPO into --out (metrics.jsonl, policy.pt, eval.json)",
        description="Pretrain (unless --pretrained), run PPO, write DIR/metrics.jsonl, DIR/policy.pt and "
                    "DIR/eval.json. Every hyperparameter is an option; --config FILE sets many at once.")
    evaluate = commands.add_parser(
        "eval", help="evaluate a checkpoint greedily on the course's tasks or a folder of task files")
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in ("ppo", "eval"):  # their options need torch: import it only for them
        from course_lib.cli import ppo_cli
        ppo_cli.add_arguments(ppo)
        ppo_cli.add_eval_arguments(evaluate)
    llm = commands.add_parser(
        "llm", help="LoRA SFT or RL (reinforce, ppo, grpo, teacher-grpo) of a transformer coder into --out "
                    "(metrics.jsonl, adapter/, eval.json)",
        description="Load --model-name (smollm2-135m-instruct, tiny, a folder, or a hub name), add LoRA, fine-tune "
                    "(--method sft) or train with unit-test rewards (--method reinforce/ppo/grpo/teacher-grpo), write "
                    "DIR/metrics.jsonl, DIR/adapter/ and DIR/eval.json (pass rates from --n-samples per task). "
                    "With no --model-name it runs the preset smollm2-135m-cpu: SmolLM2-135M-Instruct with chapter "
                    "10's CPU recipe, into runs/smollm2-135m-cpu/METHOD; --preset deepseek-coder-1.3b does the same "
                    "for DeepSeek-Coder-1.3B on a GPU.")
    if words and words[0] == "llm":  # needs torch and transformers: imported only for it
        from course_lib.cli import llm_cli
        llm_cli.add_arguments(llm)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
