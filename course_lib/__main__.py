"""Command line: ``python -m course_lib COMMAND [options]``.

Commands:
    reproduce          execute every chapter notebook through papermill (the batch)
    sync-setup-cells   rewrite every notebook's setup cell from _config.yml (--url URL sets the address first)
    check-publish      refuse to publish a book whose repository.url is a placeholder or another repository's
    ppo                pretrain a GRU policy (or load one), train it with PPO, evaluate it (chapter 6)
    eval               greedy pass rates of a checkpoint on the course's splits or a folder of tasks
    check-book         build the book and open every page in headless Chromium (the browser test)
    check-links        check the book's external links (needs the internet; not part of the tests)
    sync-glossary      link each glossary entry back to the chapters that use the term
    llm                LoRA SFT or RL (REINFORCE, PPO, GRPO) of a transformer coder, then evaluation (chapters 9-11)
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    from book_tools import reproduce
    reproduce.add_arguments(commands.add_parser(
        "reproduce", help="execute the chapter notebooks through papermill and record their times"))

    from book_tools import book_check
    book_check.add_arguments(commands.add_parser(
        "check-book", help="build the book and open every page in headless Chromium; screenshots in --out"))
    book_check.add_link_arguments(commands.add_parser(
        "check-links", help="check every external link of the book (needs the internet)"))

    from book_tools import glossary
    commands.add_parser("sync-glossary", help="rewrite the glossary's back links to the chapters"
                        ).set_defaults(func=glossary.main)

    from book_tools import colab
    colab.add_sync_arguments(commands.add_parser(
        "sync-setup-cells", help="rewrite the setup cell of every notebook from _config.yml's repository.url"))
    colab.add_check_arguments(commands.add_parser(
        "check-publish", help="check that repository.url is the repository the book is published from "
                              "and that every setup cell clones it (the publishing workflow runs it)"))

    ppo = commands.add_parser(
        "ppo", help="train a policy with PPO into --out (metrics.jsonl, policy.pt, eval.json)",
        description="Pretrain (unless --pretrained), run PPO, write DIR/metrics.jsonl, DIR/policy.pt and "
                    "DIR/eval.json. Every hyperparameter is an option; --config FILE sets many at once.")
    evaluate = commands.add_parser(
        "eval", help="evaluate a checkpoint greedily on the course's tasks or a folder of task files")
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in ("ppo", "eval"):  # their options need torch: import it only for them
        from course_lib import ppo_cli
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
        from course_lib import llm_cli
        llm_cli.add_arguments(llm)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
