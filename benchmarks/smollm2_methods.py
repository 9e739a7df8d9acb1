"""Chapter 10's other two methods on SmolLM2-135M-Instruct: REINFORCE and PPO, three seeds each.

The run of `benchmarks/smollm2_rl.py` (the chat style, a fresh LoRA, six steps of 16 completions, the
same evaluation, paired against the same start) with `method` set to "reinforce" (one pass of
-(R - batch mean) log p) or "ppo" (the value head, GAE with gamma 1 and lambda 0.95, two epochs of the
clipped loss); both sample one completion per prompt, so a step draws 16 prompts where GRPO draws 4 x 4.
The start's evaluation is read from `notebooks/data/smollm2_rl.json`, which measured it the same way.

    python benchmarks/smollm2_methods.py    writes notebooks/data/smollm2_reinforce.json and smollm2_ppo.json
                                            (about 35 min each on 2 cores)
    python benchmarks/smollm2_methods.py ppo --seeds 0 1    one method, some seeds (a record is extended)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from smollm2_rl import OUTPUT as GRPO_RECORD  # noqa: E402
from smollm2_rl import REPO_ROOT, main  # noqa: E402

ONE_PER_PROMPT = {"prompts_per_step": 16, "group_size": 1,  # GRPO's 4 prompts x 4 samples, one sample each
                  "kl_coef": None}  # each method's own KL weight: none for REINFORCE, 0 for PPO

if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("methods", nargs="*", help="reinforce, ppo or both (the default)")
    parser.add_argument("--seeds", nargs="+", type=int, default=(0, 1, 2))
    parser.add_argument("--output", type=Path, help="write here instead of notebooks/data/smollm2_METHOD.json")
    args = parser.parse_args()
    args.methods = args.methods or ["reinforce", "ppo"]
    if set(args.methods) - {"reinforce", "ppo"}:
        parser.error(f"methods are reinforce and ppo, not {args.methods}")
    if args.output and len(args.methods) != 1:
        parser.error("--output takes one method")
    for method in args.methods:
        output = args.output.resolve() if args.output else REPO_ROOT / "notebooks" / "data" / f"smollm2_{method}.json"
        main(method=method, output=output,
             seeds=tuple(args.seeds), start_from=GRPO_RECORD, rl_changes=ONE_PER_PROMPT)
