"""Pretraining the policy by teacher forcing, and measuring what it learned (chapter 4).

One training example is a (prompt, target) pair. The model reads

    <bos> prompt target <eos>

and at every position is scored on the NEXT token (teacher forcing: it is fed
the true text, never its own guesses). Only target tokens and the final <eos>
are scored: the prompt is given, not written, and padding is not text at all.

Two pretraining regimes (`pretraining_texts`), a teaching choice:

    memorise  the training tasks' prompt -> solution pairs (what the character-level PPO work log did)
    broad     the same pairs plus short functions from Python's standard library,
              cut like our tasks: signature + first docstring line -> body

Held-out answers never enter either: no val/test solution is in the data (a
test checks the actual data, and `drop_leaks` filters any example that holds one).
"""

from __future__ import annotations

import random
from typing import Sequence

import torch
import torch.nn.functional as F

from course_lib.corpus import Example, IGNORE_INDEX, batches, pretraining_texts
from course_lib.gru.models import GRUConfig, GRUPolicy, generate
from course_lib.progress import tqdm
from course_lib.sandbox import task_reports
from course_lib.scoring import score

# -----------------------------------------------------------------------------
# teacher forcing

def make_batch(tokenizer, examples: Sequence[Example]):
    """inputs, targets [B, T] (token ids) and loss_mask [B, T] (True where the loss counts).

    Row i is <bos> prompt target <eos>, cut into inputs = all but the last token
    and targets = all but the first: targets[t] is the token that follows inputs[t].
    loss_mask is True only where the target is a target-text token or the final
    <eos>; False for prompt positions and for the <pad> filling short rows.
    """
    rows, masks = [], []
    for e in examples:
        prompt = tokenizer.encode(e.prompt, add_bos=True)
        target = tokenizer.encode(e.target, add_eos=True)
        rows.append(prompt + target)
        masks.append([False] * (len(prompt) - 1) + [True] * len(target))  # aligned with row[1:]
    width = max(len(r) for r in rows) - 1
    inputs = torch.full((len(rows), width), tokenizer.pad_id, dtype=torch.long)
    targets = torch.full((len(rows), width), tokenizer.pad_id, dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (row, mask) in enumerate(zip(rows, masks)):
        n = len(row) - 1
        inputs[i, :n] = torch.tensor(row[:-1])
        targets[i, :n] = torch.tensor(row[1:])
        loss_mask[i, :n] = torch.tensor(mask)
    return inputs, targets, loss_mask


def token_loss(logits: torch.Tensor, targets: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions where loss_mask is True.

    Prompt and padding positions get IGNORE_INDEX, which cross_entropy leaves out
    of both the sum and the count: they neither pull the model nor dilute the mean.
    """
    targets = targets.masked_fill(~loss_mask, IGNORE_INDEX)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE_INDEX)


def pretrain(model: GRUPolicy, tokenizer, examples: Sequence[Example], *, epochs: int, lr: float,
             batch_size: int, seed: int, progress: bool = True, clip_norm: float = 1.0) -> list[float]:
    """Teacher-forced training; returns the loss of every batch (nats per target token).

    The learning rate decays along a cosine from lr to lr/10 over the run.
    """
    torch.manual_seed(seed)
    rng = random.Random(seed)
    plan = [b for _ in range(epochs) for b in batches(examples, batch_size, rng)]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(plan), eta_min=lr / 10)
    model.train()
    losses = []
    for batch in tqdm(plan, desc="pretraining", disable=not progress, unit="batch"):
        inputs, targets, loss_mask = make_batch(tokenizer, batch)
        logits, _, _ = model(inputs.to(model.embed.weight.device))
        loss = token_loss(logits, targets.to(logits.device), loss_mask.to(logits.device))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


# Chapter 4's saved model: the "broad" regime with the chapter's default settings (about 30 s on 2 cores).
BROAD_RECIPE = dict(embed_dim=64, hidden_dim=256, train_repeats=4, max_body_chars=150, epochs=15, lr=2e-2,
                    batch_size=32)


def pretrain_broad(tokenizer, *, seed: int = 0, progress: bool = True) -> GRUPolicy:
    """Chapter 4's model, made again: what a later chapter pretrains when chapter 4's checkpoint is missing."""
    r = BROAD_RECIPE
    torch.manual_seed(seed)
    model = GRUPolicy(GRUConfig(len(tokenizer), embed_dim=r["embed_dim"], hidden_dim=r["hidden_dim"]))
    data = pretraining_texts("broad", tokenizer=tokenizer, train_repeats=r["train_repeats"],
                             max_body_chars=r["max_body_chars"])
    pretrain(model, tokenizer, data, epochs=r["epochs"], lr=r["lr"], batch_size=r["batch_size"], seed=seed,
             progress=progress)
    return model


@torch.no_grad()
def evaluate_loss(model: GRUPolicy, tokenizer, examples: Sequence[Example], batch_size: int = 64) -> float:
    """Teacher-forced loss per target token on examples (e.g. val tasks' solutions: measured, not trained on)."""
    total, count = 0.0, 0
    device = model.embed.weight.device
    for i in range(0, len(examples), batch_size):
        inputs, targets, loss_mask = make_batch(tokenizer, examples[i:i + batch_size])
        logits, _, _ = model(inputs.to(device))
        n = int(loss_mask.sum())
        total += token_loss(logits, targets.to(device), loss_mask.to(device)).item() * n
        count += n
    return total / count


# -----------------------------------------------------------------------------
# does the code it writes pass the tests?

def attempts(model: GRUPolicy, tokenizer, tasks, *, n: int = 1, temperature: float = 1.0, greedy: bool = False,
             max_new_tokens: int = 160, allowed_ids=None, generator: torch.Generator | None = None,
             timeout: float = 2.0) -> tuple[list, list[str], list]:
    """n completions of every task (task by task), each run against its task's tests in one sandbox batch:
    (the task of each attempt, the completions, the sandbox's TestReports)."""
    rows = [t for t in tasks for _ in range(n)]
    completions = generate(model, tokenizer, [t.prompt for t in rows], max_new_tokens=max_new_tokens,
                           temperature=temperature, greedy=greedy, allowed_ids=allowed_ids, generator=generator)
    return rows, completions, task_reports(rows, completions, timeout=timeout)


def evaluate_policy(model: GRUPolicy, tokenizer, tasks, *, allowed_ids, greedy: bool = True, n_samples: int = 0,
                    temperature: float = 1.0, seed: int = 0, ks: Sequence[int] = (1, 5, 10),
                    max_new_tokens: int = 160, timeout: float = 2.0, skip: dict[str, str] | None = None) -> dict:
    """The GRU's programs for every task, scored by `course_lib.scoring.score` (its keys, per split and near/far):
    greedy: one greedy program per task ("{group}_greedy_pass@1"); n_samples > 0: that many programs per task
    sampled at temperature, drawn with a generator seeded with seed ("{group}_pass@1", "{group}_pass@{k}"),
    each sampled task's row adding its programs as "completions".
    skip: {task id: reason} of tasks not run (a prompt the vocabulary cannot encode); each counts as failed."""
    tasks = list(tasks)
    skip = skip or {}
    readable = [t for t in tasks if t.id not in skip]

    def write(n: int, **how) -> list[str]:
        """n programs per task, task by task ("" for a task not run)."""
        written = generate(model, tokenizer, [t.prompt for t in readable for _ in range(n)],
                           max_new_tokens=max_new_tokens, allowed_ids=allowed_ids, **how) if readable else []
        by_id = {t.id: written[k * n:(k + 1) * n] for k, t in enumerate(readable)}
        return [c for t in tasks for c in by_id.get(t.id, [""] * n)]

    greedy_programs = write(1, greedy=True) if greedy else None
    samples = None
    if n_samples:  # tokens are drawn on the CPU, whatever the model's device
        samples = write(n_samples, temperature=temperature, generator=torch.Generator().manual_seed(seed))
    result = score(tasks, greedy=greedy_programs, samples=samples, temperature=temperature, ks=ks, skip=skip,
                   timeout=timeout)
    if samples is not None:
        for k, row in enumerate(result["per_task"]):
            row["completions"] = samples[k * n_samples:(k + 1) * n_samples]
    return result


def evaluate_pass_rate(model: GRUPolicy, tokenizer, tasks, *, temperature: float = 1.0, greedy: bool = False,
                       max_new_tokens: int = 160, n_samples: int = 1, seed: int = 0, allowed_ids=None,
                       ks: Sequence[int] = (1, 5, 10), timeout: float = 2.0) -> dict:
    """Chapter 4's measure: n_samples programs per task at temperature, or one greedy program per task
    (greedy, or temperature 0: decoding is then deterministic), scored like every policy's (`evaluate_policy`).

    Keys: "{group}_pass@1" (pass@1 from n_samples samples at temperature: the mean over tasks of the fraction
    of their samples that pass) and "{group}_pass@{k}", or, greedy, "{group}_greedy_pass@1"; "per_task": one row
    per task (n and c, and its programs as "completions"; greedy: greedy_passed and greedy_completion).
    """
    greedy = greedy or temperature == 0
    return evaluate_policy(model, tokenizer, tasks, allowed_ids=allowed_ids, greedy=greedy,
                           n_samples=0 if greedy else n_samples, temperature=temperature, seed=seed, ks=ks,
                           max_new_tokens=max_new_tokens, timeout=timeout)
