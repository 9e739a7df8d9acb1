"""GAE's lambda and the critic, ablated on the task: four variants x three seeds of chapter 6's PPO from chapter 4's checkpoint.

    python benchmarks/lambda_ablation.py [--seeds 0 1 2] [--out runs/lambda_ablation] [--updates 20]

Variants (everything else is chapter 6's PPO with its defaults, exploration included: 128 episodes per
update, 512 epsilon-greedy episodes on the val tasks not found yet, behaviour cloning, self-imitation):

    lam095     the default, GAE lambda 0.95 (the same settings as explore_ablation.py's `explore`)
    lam0       lambda 0: each token's advantage is its one-step TD error, the critic's opinion one token later
    lam1       lambda 1: each token's advantage is the episode's return minus V(s_t), the critic a baseline only
    no_critic  no value function at all (critic off: V = 0, no value loss): with lambda 0.95, GAE gives a token
               the episode's return times 0.95^k, k tokens before the end, normalised over the batch

Each run is `course_lib.gru.ppo_run.run` into OUT/<variant>/seed<N>, reused if its eval.json exists; the
summary goes to OUT/summary.json and notebooks/data/lambda_ablation.json. Two runs at a time, one torch
thread each: run seconds include that sharing of the 2 cores.
"""

import sys

from teacher_ablation import main  # benchmarks/teacher_ablation.py: the same runner, other variants

EXPLORE = dict(explore_episodes=512, explore_epsilon=0.03)
VARIANTS = {
    "lam095": dict(EXPLORE, gae_lambda=0.95),
    "lam0": dict(EXPLORE, gae_lambda=0.0),
    "lam1": dict(EXPLORE, gae_lambda=1.0),
    "no_critic": dict(EXPLORE, critic=False),
}

if __name__ == "__main__":
    sys.exit(main(variants=VARIANTS, doc=__doc__, name="lambda_ablation", updates=20, episodes=128, eval_every=5))
