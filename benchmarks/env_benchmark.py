"""How fast is the code-generation environment? Steps per second, four ways.

    python benchmarks/env_benchmark.py [--episodes 256] [--max-new-tokens 160]

1. CodeGenEnv, one episode at a time, random masked actions, sandbox at each episode's end
2. BatchedCodeGen alone: precomputed random actions, no policy, no sandbox (the environment's own cost)
3. rollout_batch with random_policy, no sandbox
4. rollout_batch with random_policy, all completions scored in one run_tests_batch call

A step is one token written by one episode. The point: the environment (2) is far
faster than anything that calls a policy, so later chapters' neural networks, not
the environment, set the pace; scoring adds the sandbox's cost once per episode.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from course_lib.gru.batched_env import BatchedCodeGen, random_policy, rollout_batch
from course_lib.gru.env import CodeGenEnv
from course_lib.sandbox import run_tests
from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer


def single_env(tasks, tokenizer, episodes: int, max_new_tokens: int, seed: int) -> tuple[int, float]:
    env = CodeGenEnv(tasks, tokenizer, max_new_tokens=max_new_tokens)
    env.action_space.seed(seed)
    steps, start = 0, time.perf_counter()
    for i in range(episodes):
        _, info = env.reset(seed=seed + i)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample(mask=info["action_mask"]))
            done = terminated or truncated
            steps += 1
    return steps, time.perf_counter() - start


def batched_env_only(tasks, tokenizer, episodes: int, max_new_tokens: int, seed: int) -> tuple[int, float]:
    env = BatchedCodeGen(tokenizer, max_new_tokens=max_new_tokens)
    episode_tasks = [tasks[i % len(tasks)] for i in range(episodes)]
    allowed = np.flatnonzero(env.action_mask)
    actions = np.random.default_rng(seed).choice(allowed, size=(max_new_tokens, episodes))
    start = time.perf_counter()
    batch = env.reset(episode_tasks)
    t = 0
    while not batch.done.all():
        batch = env.step(actions[t])
        t += 1
    seconds = time.perf_counter() - start
    return int((batch.steps).sum()), seconds


def batched_rollout(tasks, tokenizer, episodes: int, max_new_tokens: int, seed: int,
                    score: bool, workers: int | None) -> tuple[int, float]:
    episode_tasks = [tasks[i % len(tasks)] for i in range(episodes)]
    start = time.perf_counter()
    results = rollout_batch(random_policy, episode_tasks, seed=seed, score=score, tokenizer=tokenizer,
                            max_new_tokens=max_new_tokens, workers=workers)
    return sum(e.steps for e in results), time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=256, help="episodes per measurement")
    p.add_argument("--max-new-tokens", type=int, default=160, help="length limit of one episode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, help="sandbox worker processes (default: one per CPU)")
    args = p.parse_args()

    tokenizer, tasks = course_tokenizer(), load_tasks("train")
    run_tests("x = 1\n", ["assert x == 1"])  # start the sandbox before timing
    rows = [
        ("CodeGenEnv, one episode at a time, sandbox", single_env(tasks, tokenizer, args.episodes,
                                                                 args.max_new_tokens, args.seed)),
        ("BatchedCodeGen alone (no policy, no sandbox)", batched_env_only(tasks, tokenizer, args.episodes,
                                                                         args.max_new_tokens, args.seed)),
        ("rollout_batch + random_policy, no sandbox", batched_rollout(tasks, tokenizer, args.episodes,
                                                                     args.max_new_tokens, args.seed, False, args.workers)),
        ("rollout_batch + random_policy, sandbox", batched_rollout(tasks, tokenizer, args.episodes,
                                                                  args.max_new_tokens, args.seed, True, args.workers)),
    ]
    print(f"{args.episodes} episodes, max_new_tokens={args.max_new_tokens}")
    for name, (steps, seconds) in rows:
        print(f"{name:48s} {steps:7d} steps in {seconds:6.2f} s = {steps / seconds:12,.0f} steps/s")


if __name__ == "__main__":
    main()
