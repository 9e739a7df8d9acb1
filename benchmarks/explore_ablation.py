"""PPO with and without epsilon-greedy exploration, and exploration without PPO, three seeds from chapter 4's checkpoint (chapter 6).

    python benchmarks/explore_ablation.py [--seeds 0 1 2] [--out runs/explore_ablation] [--updates 20]

Variants (everything else is chapter 6's PPO with its defaults: 128 episodes per update, behaviour
cloning on the train solutions, self-imitation of passing programs):

    ppo        the policy's own samples at temperature 1.5 are all that can find a val solution
    explore    plus 512 epsilon-greedy episodes per update (course_lib.gru.explore, epsilon 0.03) on the val
               tasks no program has passed yet; what passes goes to self-imitation only
    no_ppo     explore with the PPO objective switched off (ppo_coef 0): behaviour cloning, exploration
               and self-imitation alone, the same updates and samples; what PPO itself adds is
               explore minus no_ppo

Each run is `course_lib.gru.ppo_run.run` into OUT/<variant>/seed<N>, reused if its eval.json exists; the
summary (mean and sample standard deviation over the seeds of every greedy pass rate, run seconds)
goes to OUT/summary.json and notebooks/data/explore_ablation.json. Two runs at a time, one torch
thread each: run seconds include that sharing of the 2 cores.
"""

import sys

from teacher_ablation import main  # benchmarks/teacher_ablation.py: the same runner, other variants

VARIANTS = {
    "ppo": {},
    "explore": dict(explore_episodes=512, explore_epsilon=0.03),
    "no_ppo": dict(explore_episodes=512, explore_epsilon=0.03, ppo_coef=0.0),
}

if __name__ == "__main__":
    sys.exit(main(variants=VARIANTS, doc=__doc__, name="explore_ablation", updates=20, episodes=128, eval_every=5))
