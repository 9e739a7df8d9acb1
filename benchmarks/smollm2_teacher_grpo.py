"""Chapter 11's real model: teacher-guided GRPO on SmolLM2-135M-Instruct, three seeds, paired against its start.

The same run as `benchmarks/smollm2_rl.py` (chapter 10's GRPO on SmolLM2: the chat style, a fresh LoRA,
six steps of 4 prompts x 4 samples, the same evaluation) with `method="teacher-grpo"`: GRPO plus SFT on the
offline teacher's answers (the train tasks' reference solutions, written as the model writes its answers:
the whole function in a ```python block, each checked in the sandbox) and on the best passing sample of
each group. The start's evaluation is read from chapter 10's record, which has the same model and
evaluation settings (it depends on neither the method nor any training). Every model, the start
included, is also measured greedily on HumanEval's 33 test problems (never trained on).

    python benchmarks/smollm2_teacher_grpo.py    writes notebooks/data/smollm2_teacher_grpo.json (about 30 min on 2 cores)

The batch (`python -m book_tools reproduce`) runs it before chapter 11 when the file is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smollm2_rl import OUTPUT as GRPO_RECORD  # noqa: E402  (benchmarks/smollm2_rl.py: the same run, another method)
from smollm2_rl import REPO_ROOT, main  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "smollm2_teacher_grpo.json"

if __name__ == "__main__":
    main(method="teacher-grpo", output=OUTPUT, seeds=(0, 1, 2), start_from=GRPO_RECORD, humaneval=True)
