"""The GRU policy's side of RL (chapters 5-8): which tasks to roll out, sampling episodes, re-reading them.

    TaskSampler        draws each update's tasks, leaning towards those not yet solved
    ShuffledPasses     draws them in shuffled passes over the pool, every task once before any repeats
                       (the language model's rollouts, chapters 10-11); the same interface as TaskSampler
    collect_rollout    samples B episodes in lockstep and scores them with ONE sandbox batch: a Rollout
    written_rollout    a Rollout of completions written elsewhere (chapter 5's environment episodes)
    evaluate_actions   re-reads a Rollout's tokens with the current weights: log pi(a_t), entropy, V(s_t)
    GRUActor           the GRU as the RL core (`course_lib.rl`) sees it: score(ro, rows) and its reference

`course_lib.trainer` (the PPO loop) and `course_lib.teacher` (teacher episodes, behaviour cloning)
both build on these; neither imports the other's internals.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.batched_env import BatchedCodeGen
from course_lib.env import fraction_passed

# =====================================================================================
# Which tasks are rolled out: a sampler that leans towards the tasks not yet solved
# =====================================================================================

class TaskSampler:
    """Draws the tasks of each update's episodes, leaning towards the tasks that still fail.

    A share `train_share` of each draw comes from train tasks, the rest from val tasks
    (when both are rolled out). Within a split, weight(task) = max(min_weight,
    1 - unsolved_weight * recent pass rate), the recent pass rate being an exponential
    moving average of its rollouts' all-tests-passed. Its state (random generator and
    pass rates) is saved with the run, so a resumed run draws the same tasks.
    `drawn` records every task id it ever returned.
    """

    def __init__(self, tasks, *, seed: int, unsolved_weight: float, min_weight: float,
                 train_share: float = 0.25, ema: float = 0.7):
        self.tasks = list(tasks)
        if any(t.split == "test" for t in self.tasks):
            raise ValueError("the task sampler refuses test tasks: they are never trained on")
        self.rng = np.random.default_rng(seed)
        self.unsolved_weight, self.min_weight, self.ema = unsolved_weight, min_weight, ema
        self.train_share = train_share
        self.pass_rate = {t.id: 0.0 for t in self.tasks}
        self.drawn: list[str] = []

    def weights(self, tasks) -> np.ndarray:
        w = np.array([1 - self.unsolved_weight * self.pass_rate[t.id] for t in tasks])
        w = np.maximum(w, self.min_weight)
        return w / w.sum()

    def draw(self, n_tasks: int, per_task: int = 1):
        """n_tasks distinct tasks (weighted, without replacement), each repeated per_task times."""
        groups = [[t for t in self.tasks if t.split == s] for s in ("train", "val")]
        groups = [g for g in groups if g]
        if len(groups) == 2:
            n_train = min(len(groups[0]), round(n_tasks * self.train_share))
            counts = [n_train, min(len(groups[1]), n_tasks - n_train)]
        else:
            counts = [min(len(groups[0]), n_tasks)]
        picked = []
        for group, n in zip(groups, counts):
            idx = self.rng.choice(len(group), size=n, replace=False, p=self.weights(group)) if n else []
            picked += [group[i] for i in sorted(idx)]
        tasks = [t for t in picked for _ in range(per_task)]
        self.drawn += [t.id for t in tasks]
        return tasks

    def observe(self, episodes) -> None:
        by_task: dict[str, list[bool]] = {}
        for e in episodes:
            by_task.setdefault(e.task_id, []).append(e.all_passed)
        for task_id, passed in by_task.items():
            self.pass_rate[task_id] = self.ema * self.pass_rate[task_id] + (1 - self.ema) * float(np.mean(passed))

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "pass_rate": dict(self.pass_rate)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.pass_rate = dict(state["pass_rate"])


class ShuffledPasses:
    """Draws tasks in shuffled passes over the pool: every task once before any task a second time.

    The sampler of the language model's rollouts (`llm_rl.LMTrainer`), with TaskSampler's interface
    (draw, observe, state_dict, load_state_dict, drawn); a step's tasks are distinct, so a pass that
    ends mid-step continues with a freshly shuffled one, skipping the tasks the step already has.
    """

    def __init__(self, tasks, *, seed: int):
        self.tasks = list(tasks)
        if any(t.split == "test" for t in self.tasks):
            raise ValueError("the task sampler refuses test tasks: they are never trained on")
        twice = sorted(i for i, n in Counter(t.id for t in self.tasks).items() if n > 1)
        if twice:  # a step's tasks are distinct: a pool with a task twice could never fill a step
            raise ValueError(f"the pool holds task(s) {twice} more than once; pass each task once")
        self.rng = random.Random(seed)
        self.order: list = []  # the rest of the current pass, drawn from the end
        self.drawn: list[str] = []

    def draw(self, n_tasks: int, per_task: int = 1):
        """n_tasks distinct tasks (all of them if the pool is smaller), each repeated per_task times."""
        chosen = []
        while len(chosen) < min(n_tasks, len(self.tasks)):
            if not self.order:
                self.order = self.rng.sample(self.tasks, len(self.tasks))
            task = self.order.pop()
            if task not in chosen:
                chosen.append(task)
        tasks = [t for t in chosen for _ in range(per_task)]
        self.drawn += [t.id for t in tasks]
        return tasks

    def observe(self, episodes) -> None:
        """Nothing: the passes do not depend on what passed."""

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "order": [t.id for t in self.order]}

    def load_state_dict(self, state: dict) -> None:
        by_id = {t.id: t for t in self.tasks}
        self.rng.setstate(state["rng"])
        self.order = [by_id[i] for i in state["order"]]


# =====================================================================================
# 1-2. ROLLOUT and REWARD: B episodes in lockstep, one sandbox batch at the end
# =====================================================================================

@dataclass
class Rollout:
    """One update's episodes. Episodes of the same task share one prompt (read once), and the
    generated ids are padded to [B, T] (T = the longest episode's number of tokens)."""
    tasks: list
    episodes: list             # course_lib.env.Episode, one per row, scored by the sandbox
    prompts: list              # the distinct prompts, as id lists starting with <bos>
    prompt_index: torch.Tensor  # [B] which prompt each episode continues
    actions: torch.Tensor      # [B, T] generated ids (padding: <pad>)
    logprobs: torch.Tensor     # [B, T] log pi_old(action) under the tempered, masked rollout policy
    values: torch.Tensor       # [B, T] the critic's V(s_t) at rollout time
    mask: torch.Tensor         # [B, T] 1 on real steps, 0 on padding
    rewards: torch.Tensor      # [B, T] 0 everywhere except each episode's last step
    bootstrap: torch.Tensor    # [B] V(state after the last step) for truncated episodes, else 0
    sampler_logprobs: torch.Tensor | None = None  # [B, T] log-probabilities under the engine that sampled the ids,
                                                  # when it is not the learner itself (`rl.sampler_correction`)


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor, temperature: float) -> torch.Tensor:
    """The rollout policy's logits: ids outside the action mask get -inf, then divided by T."""
    return logits.masked_fill(~allowed, float("-inf")) / temperature


def distinct_prompts(tasks, tokenizer):
    """The distinct prompts of tasks (as <bos> + ids) and, for each task, the index of its prompt."""
    return distinct_texts([t.prompt for t in tasks], lambda p: tokenizer.encode(p, add_bos=True))


def distinct_texts(prompts: Sequence[str], encode: Callable[[str], list]):
    """The distinct prompt texts, encoded (in order of first appearance), and the index of each one's."""
    order = list(dict.fromkeys(prompts))
    where = {p: i for i, p in enumerate(order)}
    return [encode(p) for p in order], torch.tensor([where[p] for p in prompts], dtype=torch.long)


def last_token_rewards(rewards, mask: torch.Tensor) -> torch.Tensor:
    """[B, T]: each episode's reward on its last real token (mask 1), 0 everywhere else."""
    B, T = mask.shape
    token_rewards = torch.zeros(B, T)
    token_rewards[torch.arange(B), mask.sum(1).long().clamp(min=1) - 1] = torch.as_tensor(rewards, dtype=torch.float32)
    return token_rewards


def written_rollout(tokenizer, prompts: Sequence[str], completions: Sequence[Sequence[int]], *,
                    rewards: Sequence[float] | None = None, tasks=None, episodes=None,
                    encode: Callable[[str], list] | None = None, pad_id: int | None = None) -> Rollout:
    """A Rollout of completions already written (token ids, <eos> included): chapter 5's environment
    episodes, or a language model's samples. Padded to [B, T] with its mask, each reward (if given) on its
    episode's last token, and log pi_old and V left at 0 (a policy's `score` reads them when needed).
    encode: prompt text -> ids (default: the course tokenizer's <bos> + ids); pad_id: default tokenizer.pad_id."""
    B, T = len(completions), max(1, max(len(c) for c in completions))
    pad_id = tokenizer.pad_id if pad_id is None else pad_id
    actions, mask = torch.full((B, T), pad_id, dtype=torch.long), torch.zeros(B, T)
    for i, c in enumerate(completions):
        actions[i, :len(c)], mask[i, :len(c)] = torch.as_tensor(list(c), dtype=torch.long), 1.0
    token_rewards = last_token_rewards(rewards, mask) if rewards is not None else torch.zeros(B, T)
    encoded, prompt_index = distinct_texts(prompts, encode or (lambda p: tokenizer.encode(p, add_bos=True)))
    return Rollout(tasks=list(tasks) if tasks is not None else [None] * B, episodes=list(episodes or []),
                   prompts=encoded, prompt_index=prompt_index, actions=actions, logprobs=torch.zeros(B, T),
                   values=torch.zeros(B, T), mask=mask, rewards=token_rewards, bootstrap=torch.zeros(B))


@torch.no_grad()
def collect_rollout(model, tokenizer, tasks, *, allowed: torch.Tensor, temperature: float,
                    max_new_tokens: int, generator: torch.Generator, reward_fn=None,
                    timeout: float = 2.0, bootstrap_truncated: bool = False) -> Rollout:
    """Sample one episode per task in lockstep; score them all with ONE run_tests_batch call.

    Only the episodes still running are fed to the network at each step (finished rows
    drop out of the batch), so a few long episodes do not make every row pay for them.
    The network runs on the model's device; each step's logits come back to the CPU, where the
    token is drawn with `generator` (a CPU generator, whatever the device) and the Rollout is kept.
    A GPU's logits differ from a CPU's in the last bits, so a GPU run's samples drift from a CPU run's.
    """
    env = BatchedCodeGen(tokenizer, max_new_tokens=max_new_tokens, reward_fn=reward_fn or fraction_passed,
                         alphabet=allowed.nonzero().flatten().tolist(), timeout=timeout)
    model.eval()
    device = model.embed.weight.device
    B = len(tasks)
    obs = env.reset(tasks)
    prompts, prompt_index = distinct_prompts(tasks, tokenizer)
    logits, values, hidden = model.prefill(prompts)  # each distinct prompt read once
    logits, values = logits.cpu()[prompt_index], values.cpu()[prompt_index]
    hidden = hidden[:, prompt_index.to(device)].contiguous()
    actions = torch.full((B, max_new_tokens), tokenizer.pad_id, dtype=torch.long)
    logprobs, step_values = torch.zeros(B, max_new_tokens), torch.zeros(B, max_new_tokens)
    mask = torch.zeros(B, max_new_tokens)
    rows = torch.arange(B)              # the episodes still running, in the order of `logits`
    for t in range(max_new_tokens):
        dist_logits = masked_logits(logits, allowed, temperature)
        action = torch.multinomial(torch.softmax(dist_logits, -1), 1, generator=generator).squeeze(-1)
        logprobs[rows, t] = torch.log_softmax(dist_logits, -1).gather(-1, action[:, None]).squeeze(-1)
        actions[rows, t], step_values[rows, t], mask[rows, t] = action, values, 1.0
        all_actions = np.full(B, tokenizer.eos_id)
        all_actions[rows.numpy()] = action.numpy()
        obs = env.step(all_actions)          # rows already done ignore their action
        if obs.done.all():
            break
        logits, values, hidden = model.step(action.to(device), hidden)
        keep = torch.as_tensor(~obs.done[rows.numpy()])
        rows, logits, values = rows[keep], logits.cpu()[keep], values.cpu()[keep]
        hidden = hidden[:, keep.to(device)].contiguous()
    episodes = env.results()  # the sandbox runs every program here, in one batch

    T = int(mask.sum(1).max())
    rewards = last_token_rewards([e.reward for e in episodes], mask[:, :T])
    bootstrap = torch.zeros(B)
    truncated = torch.tensor([e.truncated for e in episodes])
    if bootstrap_truncated and truncated.any():
        # V(state after the cut): the truncated rows are exactly those still in `rows`; one more critic step.
        _, next_values, _ = model.step(actions[rows, -1].to(device), hidden)
        bootstrap[rows] = next_values.cpu()
    return Rollout(tasks=list(tasks), episodes=episodes, prompts=prompts, prompt_index=prompt_index,
                   actions=actions[:, :T], logprobs=logprobs[:, :T], values=step_values[:, :T],
                   mask=mask[:, :T], rewards=rewards, bootstrap=bootstrap)


def run_gru(model, tokens: torch.Tensor, lengths: torch.Tensor, hidden: torch.Tensor | None = None):
    """model(tokens, hidden) -> logits, values, computing each row only for its own length.

    Packing skips the padding at the end of short rows: the cost is the real tokens,
    not rows x longest row. Outputs past a row's length are zeros (to be masked).
    """
    packed = pack_padded_sequence(model.embed(tokens), lengths.clamp(min=1).cpu(), batch_first=True,
                                  enforce_sorted=False)
    out, _ = model.gru(packed, hidden)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
    return model.policy_head(out), model.value_head(out).squeeze(-1)


def evaluate_actions(model, prompts, prompt_index, actions, mask, *, allowed, temperature):
    """Re-read the episodes with the current weights: log pi(a_t), entropy H_t and V(s_t), each [B, T].

    Each distinct prompt is read once (`prefill`); its final state starts the GRU over
    that prompt's episodes. The state before generated token t is the prompt's for
    t = 0 and the output after token t - 1 otherwise. Gradients flow through both.
    The outputs are on the model's device (`GRUActor` brings them to the rollout's, the CPU).
    """
    device = model.embed.weight.device
    prompt_index, actions, mask, allowed = (x.to(device) for x in (prompt_index, actions, mask, allowed))
    first_logits, first_values, hidden = model.prefill(prompts)
    logits, values = first_logits[prompt_index, None], first_values[prompt_index, None]
    if actions.shape[1] > 1:
        lengths = mask.sum(1).long() - 1   # tokens fed back in: all but the last
        rest_logits, rest_values = run_gru(model, actions[:, :-1], lengths, hidden[:, prompt_index].contiguous())
        logits, values = torch.cat([logits, rest_logits], 1), torch.cat([values, rest_values], 1)
    real = mask.bool()
    actions = torch.where(real, actions, allowed.nonzero()[0])  # padding: any allowed id, so no -inf is picked
    log_p = torch.log_softmax(masked_logits(logits, allowed, temperature), -1)
    new_logprobs = log_p.gather(-1, actions[..., None]).squeeze(-1)
    entropy = -(log_p.exp() * log_p.masked_fill(~allowed, 0.0)).sum(-1)  # 0 * -inf would be nan
    zero = torch.zeros((), device=device)
    return torch.where(real, new_logprobs, zero), torch.where(real, entropy, zero), torch.where(real, values, zero)


def minibatch(ro: Rollout, rows: torch.Tensor):
    """The rows' distinct prompts, their prompt index into those, and the slice of length T they need."""
    used = sorted(set(ro.prompt_index[rows].tolist()))
    remap = {old: new for new, old in enumerate(used)}
    T = int(ro.mask[rows].sum(1).max())
    return ([ro.prompts[i] for i in used], torch.tensor([remap[i] for i in ro.prompt_index[rows].tolist()]), T)


class GRUActor:
    """The GRU policy as the RL core sees it (`course_lib.rl.Policy`): it re-reads a rollout's own ids.

    allowed and temperature are the rollout policy's (the action mask, softmax(logits / T));
    reference: a frozen copy of the starting model for the KL term, or None.
    The network runs on its device; what `score` returns is on the CPU, with the Rollout, so the loss
    is computed there (gradients flow back through the copy), as for the language model's `LMActor`.
    """

    def __init__(self, model, *, allowed: torch.Tensor, temperature: float, reference=None):
        self.model, self.allowed, self.temperature, self.reference = model, allowed, temperature, reference

    def score(self, ro: Rollout, rows: torch.Tensor):
        prompts, prompt_index, T = minibatch(ro, rows)
        return tuple(x.cpu() for x in evaluate_actions(self.model, prompts, prompt_index, ro.actions[rows, :T],
                                                       ro.mask[rows, :T], allowed=self.allowed,
                                                       temperature=self.temperature))

    @torch.no_grad()
    def reference_logprobs(self, ro: Rollout, rows: torch.Tensor) -> torch.Tensor:
        prompts, prompt_index, T = minibatch(ro, rows)
        return evaluate_actions(self.reference, prompts, prompt_index, ro.actions[rows, :T], ro.mask[rows, :T],
                                allowed=self.allowed, temperature=self.temperature)[0].cpu()
