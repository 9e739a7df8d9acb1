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

import ast
import functools
import os
import random
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from course_lib.models import GRUConfig, GRUPolicy, generate
from course_lib.progress import tqdm
from course_lib.sandbox import task_reports
from course_lib.tasks import load_tasks, split_groups
from course_lib.tokenizers import course_tokenizer

IGNORE_INDEX = -100  # cross_entropy skips targets equal to this
REGIMES = ("memorise", "broad")


@dataclass(frozen=True)
class Example:
    prompt: str   # the text the model is given (no loss)
    target: str   # the text it learns to write (loss on every token, then on <eos>)
    source: str   # where it came from, e.g. "train:add" or "stdlib:posixpath.basename"


# -----------------------------------------------------------------------------
# the data

def task_examples(tasks) -> list[Example]:
    """prompt -> solution pairs of the TRAIN tasks among tasks (other splits are refused, not skipped)."""
    held_out = [t.id for t in tasks if t.split != "train"]
    if held_out:
        raise ValueError(f"only train tasks may be pretrained on; got {len(held_out)} others, "
                         f"e.g. {held_out[:3]} (use load_tasks('train'))")
    return [Example(t.prompt, t.solution, f"train:{t.id}") for t in tasks]


def stdlib_functions(tokenizer, *, max_body_chars: int = 150, methods: bool = False) -> list[Example]:
    """Short documented functions from the standard library's top-level modules, shaped like our tasks.

    prompt = the `def` line(s) + the docstring's first line; target = the body
    after the docstring, without comment or blank lines, dedented to column 0
    (methods too). Kept only if every character is in the tokenizer's vocabulary
    (no new tokens) and the body has at most max_body_chars characters. methods=False
    skips anything that mentions `self` or `cls`: plain functions look like our tasks.
    The source ships with Python (no network); another Python version gives slightly
    other data.
    """
    vocab = set(tokenizer.vocab[3:])
    return [e for e in _stdlib_candidates()
            if len(e.target) <= max_body_chars and set(e.prompt + e.target) <= vocab
            and (methods or not re.search(r"\b(self|cls)\b", e.prompt + e.target))]


@functools.lru_cache(maxsize=1)
def _stdlib_candidates() -> tuple[Example, ...]:
    """Every documented function of the stdlib's top-level modules, in a fixed order (parsed once)."""
    out = []
    for path in sorted(Path(os.__file__).parent.glob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        out += [e for node in ast.walk(tree) if (e := _function_example(node, lines, path.stem))]
    return tuple(out)


def _function_example(node, lines: list[str], module: str) -> Example | None:
    if not isinstance(node, ast.FunctionDef) or len(node.body) < 2:
        return None
    doc = ast.get_docstring(node)
    docline = lines[node.body[0].lineno - 1].strip()
    if not doc or not doc.strip() or not docline.startswith('"""') or node.body[0].end_lineno >= node.body[1].lineno:
        return None
    indent = len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())
    head = [line for line in lines[node.lineno - 1:node.body[0].lineno - 1] if line.strip()]
    body = [line for line in lines[node.body[1].lineno - 1:node.end_lineno]
            if line.strip() and not line.lstrip().startswith("#")]
    if any(line[:indent].strip() for line in head + body):  # e.g. a continuation line less indented
        return None
    first = doc.strip().splitlines()[0].strip().replace('"""', "")
    prompt = "".join(line[indent:] for line in head) + f'    """{first}"""\n'
    target = "".join(line[indent:] for line in body)
    if not target.endswith("\n"):
        target += "\n"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for an odd escape: not ours to report
            compile(prompt + target, module, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return Example(prompt, target, f"stdlib:{module}.{node.name}")


def held_out_solutions(tasks) -> dict[str, str]:
    """task id -> stripped solution, for every val and test task: text that must never be trained on."""
    return {t.id: t.solution.strip() for t in tasks if t.split != "train"}


def find_leaks(examples: Sequence[Example], tasks) -> list[tuple[str, str]]:
    """(example source, task id) for every example whose text holds a val/test solution as a substring."""
    solutions = held_out_solutions(tasks)
    return [(e.source, task_id) for e in examples for task_id, s in solutions.items()
            if s in e.prompt + e.target]


def holds_solution(text: str, solutions) -> bool:
    """Whether text holds one of solutions (held_out_solutions(tasks).values()) as a substring."""
    return any(s in text for s in solutions)


def drop_leaks(examples: Sequence[Example], tasks) -> list[Example]:
    """The examples that hold no val/test solution (a short one like `return a - b` can occur by chance)."""
    solutions = held_out_solutions(tasks).values()
    return [e for e in examples if not holds_solution(e.prompt + e.target, solutions)]


def pretraining_texts(regime: str, *, tasks=None, tokenizer=None, train_repeats: int = 4,
                      max_body_chars: int = 150, methods: bool = False) -> list[Example]:
    """The pretraining data of a regime ("memorise" or "broad"); no val/test solution is in it.

    broad: each train pair appears train_repeats times among the stdlib functions,
    so our tasks' style is not drowned out.
    """
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; choose one of {REGIMES}")
    tasks = load_tasks() if tasks is None else list(tasks)
    tokenizer = course_tokenizer() if tokenizer is None else tokenizer
    pairs = task_examples([t for t in tasks if t.split == "train"])
    if regime == "memorise":
        examples = pairs
    else:
        examples = stdlib_functions(tokenizer, max_body_chars=max_body_chars, methods=methods) + pairs * train_repeats
    return drop_leaks(examples, tasks)


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


def batches(examples: Sequence[Example], batch_size: int, rng: random.Random) -> list[list[Example]]:
    """Shuffled batches of similar lengths (less padding): shuffle, sort within windows of 8 batches, cut."""
    order = list(examples)
    rng.shuffle(order)
    window = 8 * batch_size
    out = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window], key=lambda e: len(e.prompt) + len(e.target))
        out += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


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


def evaluate_pass_rate(model: GRUPolicy, tokenizer, tasks, *, temperature: float = 1.0, greedy: bool = False,
                       max_new_tokens: int = 160, n_samples: int = 1, seed: int = 0, allowed_ids=None,
                       timeout: float = 2.0) -> dict:
    """Generate n_samples completions per task and run each against the task's tests in the sandbox.

    Returns {"pass_rate": fraction of all samples that pass every test,
             "per_task": {task id: fraction of its samples that pass},
             "completions": {task id: [completion, ...]}}.
    Greedy decoding is deterministic, so it uses one sample per task.
    """
    tasks = list(tasks)
    n = 1 if (greedy or temperature == 0) else n_samples
    generator = torch.Generator().manual_seed(seed)  # tokens are drawn on the CPU, whatever the model's device
    _, completions, reports = attempts(model, tokenizer, tasks, n=n, temperature=temperature, greedy=greedy,
                                       max_new_tokens=max_new_tokens, allowed_ids=allowed_ids, generator=generator,
                                       timeout=timeout)
    passed = [bool(r.all_passed) for r in reports]
    per_task = {t.id: sum(passed[k * n:(k + 1) * n]) / n for k, t in enumerate(tasks)}
    return {"pass_rate": sum(passed) / len(passed), "per_task": per_task,
            "completions": {t.id: completions[k * n:(k + 1) * n] for k, t in enumerate(tasks)}}


def evaluate_policy(model: GRUPolicy, tokenizer, tasks, *, allowed_ids, max_new_tokens: int = 160,
                    timeout: float = 2.0, skip: dict[str, str] | None = None) -> dict:
    """Greedy decoding on every task: the pass rate of each split (and near/far), and each task's result.
    skip: {task id: reason} of tasks not run (a prompt the vocabulary cannot encode); each counts as failed."""
    skip = skip or {}
    tasks = list(tasks)
    readable = [t for t in tasks if t.id not in skip]
    done = {}
    if readable:
        run, completions, reports = attempts(model, tokenizer, readable, greedy=True, max_new_tokens=max_new_tokens,
                                             allowed_ids=allowed_ids, timeout=timeout)
        done = {t.id: (c, r) for t, c, r in zip(run, completions, reports)}
    per_task = []
    for t in tasks:
        row = {"id": t.id, "split": t.split, "novelty": t.novelty}
        if t.id in skip:
            row.update(passed=False, fraction=0.0, status="unreadable", completion="", reason=skip[t.id])
        else:
            c, r = done[t.id]
            row.update(passed=r.all_passed, fraction=round(r.fraction, 4),
                       status=getattr(r.status, "value", str(r.status)), completion=c)
        per_task.append(row)
    out = {f"{group}_pass_rate": round(sum(r["passed"] for r in rows) / len(rows), 4)
           for group, rows in split_groups(per_task).items()}
    out["per_task"] = per_task
    return out
