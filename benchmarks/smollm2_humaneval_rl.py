"""Chapter 10's SmolLM2 GRPO run on the DeepSeek-Coder LoRA-RL report's protocol: HumanEval's training
problems join the rollouts, and HumanEval's test problems (never trained on) are measured before and after.

The same run as `benchmarks/smollm2_rl.py` (the chat style, a fresh LoRA, six steps of 4 prompts x 4
samples, the same evaluation, six seeds) with a larger pool of rollout tasks: the course's train and val tasks and
HumanEval's 131 training problems (`course_lib.tasks.load_humaneval("train")`; `llm --rollout-humaneval`
on the command line). Every model, the start included, is also measured greedily on HumanEval's 33 test
problems. The start's evaluation is read from chapter 11's record, which measured the start the same way.

    python benchmarks/smollm2_humaneval_rl.py    writes notebooks/data/smollm2_humaneval_rl.json (about 25 min a seed on 2 cores)

A record with the same settings is extended: only the seeds it lacks are run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from smollm2_rl import REPO_ROOT, main  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_humaneval_rl.json"
START = REPO_ROOT / "notebooks" / "data" / "smollm2_teacher_grpo.json"  # its start row has HumanEval test too

if __name__ == "__main__":
    main(method="grpo", output=OUTPUT, seeds=(0, 1, 2, 3, 4, 5), start_from=START, humaneval=True, humaneval_train=True)
