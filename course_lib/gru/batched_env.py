"""Many code-generation episodes in lockstep (chapter 3): `BatchedCodeGen` and `rollout_batch` advance
B episodes with numpy arrays and score all completions with ONE call to the sandbox, so that the
policy (a neural network, later) and not the environment is the slow part. Also the policies of
chapter 3: a policy maps a batch of observations (`ObsBatch`) to one action per row.

Importing this module does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from course_lib.core.rollout import Episode
from course_lib.gru.env import (CodeGenEnv, DEFAULT_MAX_NEW_TOKENS, _course_tokenizer, _status_name, alphabet_mask,
                                course_alphabet)
from course_lib.rewards import RewardFn, fraction_passed, reward_of
from course_lib.sandbox import task_reports
from course_lib.tasks import Task

# -----------------------------------------------------------------------------
# policies: a policy maps a batch of observations to one action per row

@dataclass
class ObsBatch:
    """What a policy sees at one step of B episodes (B = 1 for a single environment).

    tokens[i, :lengths[i]] is row i's <bos> + prompt + generated ids; the rest is <pad>.
    The policy must return an int array of B token ids. Rows that are done are
    ignored by the environment (return anything, e.g. <eos>).
    """
    tokens: np.ndarray        # (B, max_len) int64, read-only
    lengths: np.ndarray       # (B,) valid ids per row
    steps: np.ndarray         # (B,) tokens generated so far
    done: np.ndarray          # (B,) bool, episode already over
    action_mask: np.ndarray   # (V,) int8, the same for every row
    task_ids: list[str]       # which task each row is (a fair policy uses only the prompt)
    rngs: list[np.random.Generator] = field(repr=False, default_factory=list)  # one per row

    def __len__(self) -> int:
        return len(self.task_ids)

    @classmethod
    def single(cls, obs: dict, info: dict, rng: np.random.Generator | None = None) -> "ObsBatch":
        """A batch of one, from CodeGenEnv's observation and info."""
        return cls(tokens=obs["tokens"][None], lengths=np.array([obs["length"]]), steps=np.array([info["steps"]]),
                   done=np.array([False]), action_mask=info["action_mask"], task_ids=[info["task_id"]],
                   rngs=[rng if rng is not None else np.random.default_rng()])


Policy = Callable[[ObsBatch], np.ndarray]


def random_policy(batch: ObsBatch) -> np.ndarray:
    """Uniform over the allowed actions (<eos> included), each row with its own RNG.

    Rows already done draw nothing (the environment ignores their action), so an
    episode's draws are the same in any batch and alone.
    """
    allowed = np.flatnonzero(batch.action_mask)
    return np.array([allowed[0] if done else allowed[rng.integers(len(allowed))]
                     for rng, done in zip(batch.rngs, batch.done)], dtype=np.int64)


def template_policy(tasks: Sequence[Task], tokenizer) -> Policy:
    """A policy that replays each task's reference solution, character by character, then <eos>.

    It cheats: it reads the answer (task.solution), which no learner may do. It
    proves the environment can be solved and scores what it should (reward 1 on
    every task, in every split); the character-level PPO work log's "template baseline" was the same.
    It ignores the action mask (held-out solutions may use characters outside it).
    """
    scripts = {t.id: np.array(tokenizer.encode(t.solution, add_eos=True), dtype=np.int64) for t in tasks}

    def policy(batch: ObsBatch) -> np.ndarray:
        out = np.full(len(batch), tokenizer.eos_id, dtype=np.int64)
        for i, (task_id, step) in enumerate(zip(batch.task_ids, batch.steps)):
            script = scripts[task_id]
            if step < len(script):
                out[i] = script[step]
        return out

    return policy


def run_episode(env: CodeGenEnv, policy: Policy, *, seed: int | None = None,
                task_id: str | None = None) -> Episode:
    """Play one episode of env with a batch-of-one policy; the policy's RNG is seeded with seed."""
    env = env.unwrapped if hasattr(env, "unwrapped") else env
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
    rng = np.random.default_rng(seed)
    actions, reward = [], 0.0
    while True:
        action = int(policy(ObsBatch.single(obs, info, rng))[0])
        actions.append(action)
        obs, r, terminated, truncated, info = env.step(action)
        reward += r
        if terminated or truncated:
            return Episode(task_id=info["task_id"], completion=info["completion"], actions=actions,
                           terminated=terminated, truncated=truncated, reward=reward,
                           passed=info["passed"], total=info["total"], status=info["status"],
                           out_of_mask=info["out_of_mask"])


# -----------------------------------------------------------------------------
# many episodes in lockstep

class BatchedCodeGen:
    """B episodes of CodeGenEnv advanced together, one numpy operation per step.

    The rules are CodeGenEnv's (same observation, <eos>, max_new_tokens, mask),
    but nothing is scored until `results()`, which sends all B programs to the
    sandbox in one `run_tests_batch` call (in parallel worker processes).
    """

    def __init__(self, tokenizer=None, *, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 reward_fn: RewardFn = fraction_passed, alphabet: Sequence[int] | None = None,
                 timeout: float = 2.0, memory_mb: int = 256, workers: int | None = None):
        self.tokenizer = tokenizer if tokenizer is not None else _course_tokenizer()
        alphabet = alphabet if alphabet is not None else course_alphabet(self.tokenizer)
        self.action_mask = alphabet_mask(alphabet, len(self.tokenizer))
        self.max_new_tokens = max_new_tokens
        self.reward_fn = reward_fn
        self.timeout, self.memory_mb, self.workers = timeout, memory_mb, workers

    def reset(self, tasks: Sequence[Task], seeds: Sequence[int] | None = None) -> ObsBatch:
        """Start one episode per task; seeds[i] seeds row i's policy RNG."""
        self.tasks = list(tasks)
        B = len(self.tasks)
        prompts = [self.tokenizer.encode(t.prompt, add_bos=True) for t in self.tasks]
        self.prompt_lengths = np.array([len(p) for p in prompts], dtype=np.int64)
        self.tokens = np.full((B, int(self.prompt_lengths.max()) + self.max_new_tokens),
                              self.tokenizer.pad_id, dtype=np.int64)
        for i, p in enumerate(prompts):
            self.tokens[i, :len(p)] = p
        self.lengths = self.prompt_lengths.copy()
        self.terminated = np.zeros(B, dtype=bool)
        self.truncated = np.zeros(B, dtype=bool)
        self.out_of_mask = np.zeros(B, dtype=np.int64)
        self.task_ids = [t.id for t in self.tasks]
        seeds = list(range(B)) if seeds is None else list(seeds)
        self.rngs = [np.random.default_rng(s) for s in seeds]
        return self.observe()

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    def observe(self) -> ObsBatch:
        tokens = self.tokens.copy()  # a snapshot: the policy may keep it; later steps don't change it
        tokens.flags.writeable = False
        return ObsBatch(tokens=tokens, lengths=self.lengths.copy(), steps=self.lengths - self.prompt_lengths,
                        done=self.done, action_mask=self.action_mask, task_ids=self.task_ids,
                        rngs=self.rngs)

    def step(self, actions) -> ObsBatch:
        """Write actions[i] into every row that is not done yet; rows that are done ignore theirs."""
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape != (len(self.tasks),):
            raise ValueError(f"expected {len(self.tasks)} actions (one per episode), got shape {actions.shape}")
        rows = np.flatnonzero(~self.done)
        a = actions[rows]
        if ((a < 0) | (a >= len(self.action_mask))).any():
            raise ValueError(f"actions must be token ids in 0..{len(self.action_mask) - 1}, got {a.min()}..{a.max()}")
        self.tokens[rows, self.lengths[rows]] = a
        self.lengths[rows] += 1
        self.out_of_mask[rows] += self.action_mask[a] == 0
        eos = a == self.tokenizer.eos_id
        self.terminated[rows] = eos
        self.truncated[rows] = ~eos & (self.lengths[rows] - self.prompt_lengths[rows] >= self.max_new_tokens)
        return self.observe()

    def completions(self) -> list[str]:
        return [self.tokenizer.decode(self.tokens[i, p:n], skip_special=True)
                for i, (p, n) in enumerate(zip(self.prompt_lengths, self.lengths))]

    def results(self, score: bool = True) -> list[Episode]:
        """Every episode's result; score=True runs all programs in one sandbox batch."""
        completions = self.completions()
        reports = [None] * len(self.tasks)
        if score:
            reports = task_reports(self.tasks, completions, timeout=self.timeout, memory_mb=self.memory_mb,
                                   workers=self.workers)
        episodes = []
        for i, (task, completion, report) in enumerate(zip(self.tasks, completions, reports)):
            ep = Episode(task_id=task.id, completion=completion,
                         actions=self.tokens[i, self.prompt_lengths[i]:self.lengths[i]].tolist(),
                         terminated=bool(self.terminated[i]), truncated=bool(self.truncated[i]),
                         reward=float("nan"), out_of_mask=int(self.out_of_mask[i]))
            if report is not None:
                ep.reward = reward_of(self.reward_fn, task, completion, report,
                                     n_tokens=int(self.lengths[i] - self.prompt_lengths[i] - self.terminated[i]))
                ep.passed, ep.total, ep.status = report.passed, report.total, _status_name(report.status)
            episodes.append(ep)
        return episodes


def rollout_batch(policy: Policy, tasks: Sequence[Task], *, n: int = 1, seed: int = 0,
                  score: bool = True, tokenizer=None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                  reward_fn: RewardFn = fraction_passed, alphabet: Sequence[int] | None = None,
                  timeout: float = 2.0, memory_mb: int = 256, workers: int | None = None) -> list[Episode]:
    """Run n episodes of each task in lockstep; return one Episode per episode, task by task.

    Episode i (in the returned order) seeds its policy RNG with seed + i, so its
    result does not depend on the batch it ran in: it equals
    run_episode(CodeGenEnv(...), policy, seed=seed + i, task_id=...).
    """
    env = BatchedCodeGen(tokenizer, max_new_tokens=max_new_tokens, reward_fn=reward_fn, alphabet=alphabet,
                         timeout=timeout, memory_mb=memory_mb, workers=workers)
    episode_tasks = [t for t in tasks for _ in range(n)]
    batch = env.reset(episode_tasks, seeds=[seed + i for i in range(len(episode_tasks))])
    while not batch.done.all():
        batch = env.step(policy(batch))
    return env.results(score=score)
