"""Chapter 10's SmolLM2 GRPO run again, in TRL's GRPOTrainer: the same model, LoRA, reward and budget.

The same run as `benchmarks/smollm2_rl.py` (SmolLM2-135M-Instruct in the chat style, a fresh LoRA r=8 on
q/v, six rollout batches of 4 prompts x 4 samples, two epochs on each, lr 1e-3, KL 0.05, the same
evaluation) with TRL's loop instead of the course's: `course_lib.lm.trl_grpo.train_trl_grpo`, whose
`trl_settings` writes each course setting as a GRPOConfig field and whose reward function is the course's
sandbox reward. The start's evaluation is read from chapter 10's record (it depends on no training).

    python benchmarks/trl_grpo.py    writes notebooks/data/trl_grpo.json (about 40 min on 2 cores)

The batch (`python -m book_tools reproduce`) runs it before chapter 10 when the file is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from smollm2_rl import OUTPUT as GRPO_RECORD  # noqa: E402  (benchmarks/smollm2_rl.py: the same run, the course's loop)
from smollm2_rl import REPO_ROOT, main  # noqa: E402

OUTPUT = REPO_ROOT / "notebooks" / "data" / "trl_grpo.json"

if __name__ == "__main__":
    main(method="grpo", output=OUTPUT, seeds=(0, 1, 2), start_from=GRPO_RECORD, loop="trl")
