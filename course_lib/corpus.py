"""The text both policies are trained on before RL, and the check that keeps held-out solutions out of it.

    Example              prompt -> target text, with where it came from
    task_examples        the train tasks' prompt -> solution pairs (other splits are refused)
    held_out_solutions   the val and test tasks' solutions: text that must never be trained on
    find_leaks, drop_leaks, holds_solution   which examples hold one of them, and the examples that do not
    stdlib_functions     short documented functions of Python's standard library, shaped like the tasks
    pretraining_texts    the pretraining data of a regime ("memorise": the train pairs; "broad": with the stdlib)
    batches              shuffled batches of similar-length examples

Both policies' pretraining, fine-tuning and teacher data pass through `drop_leaks`.
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

from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer


IGNORE_INDEX = -100  # cross_entropy skips targets equal to this


@dataclass(frozen=True)
class Example:
    prompt: str   # the text the model is given (no loss)
    target: str   # the text it learns to write (loss on every token, then on <eos>)
    source: str   # where it came from, e.g. "train:add" or "stdlib:posixpath.basename"


def task_examples(tasks) -> list[Example]:
    """prompt -> solution pairs of the TRAIN tasks among tasks (other splits are refused, not skipped)."""
    held_out = [t.id for t in tasks if t.split != "train"]
    if held_out:
        raise ValueError(f"only train tasks may be pretrained on; got {len(held_out)} others, "
                         f"e.g. {held_out[:3]} (use load_tasks('train'))")
    return [Example(t.prompt, t.solution, f"train:{t.id}") for t in tasks]


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


REGIMES = ("memorise", "broad")


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
