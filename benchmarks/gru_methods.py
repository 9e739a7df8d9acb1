"""The GRU trained by each method of the RL core, three seeds from chapter 4's checkpoint (chapter 6).

    python benchmarks/gru_methods.py [--seeds 0 1 2] [--out runs/gru_methods] [--updates 20] [--jobs 2]

Variants: `PPOConfig.method`, which picks the parts of the RL core an update uses
(`course_lib.core.rl.METHODS`, the table chapter 10's language model reads too). Everything else
is chapter 6's PPO run without exploration, as in benchmarks/explore_ablation.py's "ppo" variant:
20 updates of 128 episodes (16 tasks x 8), behaviour cloning on the train solutions, self-imitation
of passing programs.

    ppo        the critic, GAE, the clipped loss (chapter 6)
    grpo       each task's 8 episodes are a group: A = (R - group mean) / group std; no critic
    reinforce  A = R - the batch's mean reward; one pass of -A log p (no clip, no entropy bonus)

Each run is `course_lib.gru.ppo_run.run` into OUT/<variant>/seed<N>, reused if its eval.json exists; the
summary goes to OUT/summary.json and notebooks/data/gru_methods.json (benchmarks/teacher_ablation.py's
runner). Runs are seeded and independent: --jobs changes the time, not the results.
"""

import sys

from teacher_ablation import main  # benchmarks/teacher_ablation.py: the same runner, other variants

VARIANTS = {
    "ppo": dict(method="ppo"),
    "grpo": dict(method="grpo"),
    "reinforce": dict(method="reinforce"),
}

if __name__ == "__main__":
    sys.exit(main(variants=VARIANTS, doc=__doc__, name="gru_methods", updates=20, episodes=128, eval_every=5))
