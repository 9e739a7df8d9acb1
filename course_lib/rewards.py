"""Reward shaping: a program's reward as a weighted sum of small terms (chapter 7).

Every term has the environment's reward signature, ``term(task, completion, report) -> float``
(`report` is the sandbox's `TestReport` for ``task.program(completion)``); a term that also has a
parameter ``n_tokens`` is given the completion's length in tokens. A reward is a weighted sum of
terms, written as a short spec:

    reward = ShapedReward("pass=1,fraction=0.5,syntax=0.1,length=0.002,quality=0.1")
    reward(task, completion, report)          # -> 1.0 * pass + 0.5 * fraction + ... - 0.002 * length

The terms (``TERMS``; `register_term` adds your own):

    pass          1 if every test passes, else 0 (the sparse reward)
    fraction      the fraction of tests that pass (partial credit; a constant can game it)
    syntax        1 if the program compiles AND the function does something with its input
    naive_syntax  1 if the program compiles: the character-level PPO work log's bug, empty code collects it (kept to show the hack)
    length        minus the completion's length in characters (so its weight is the penalty alpha)
    tokens        minus its length in tokens / 100: with weight alpha, the DeepSeek-Coder LoRA-RL report's
                  `- alpha * tokens / 100` (the language model's reward, chapter 10: "pass=1,tokens=alpha")
    quality       1 minus 0.5 per problem the syntax tree shows (unused argument, unreachable code);
                  0 for an empty body or a program that does not parse

Nothing here runs the generated code: the tests ran in the sandbox (`report`), and the syntax
tree is only parsed (`ast.parse`), never executed.
"""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import dataclass
import inspect
from typing import Callable

from course_lib.sandbox import Status, TestReport
from course_lib.tasks import Task

TermFn = Callable[[object, str, TestReport], float]
TERMS: dict[str, TermFn] = {}
RewardFn = Callable[[Task, str, TestReport], float]


def fraction_passed(task: Task, completion: str, report: TestReport) -> float:
    """The default reward: the fraction of the task's tests that pass (0.0 to 1.0).

    Chapter 7 (`course_lib.rewards`) adds shaped variants with the same signature.
    """
    return float(report.fraction)


def takes_n_tokens(fn) -> bool:
    """Whether a reward function (or a reward term) has a parameter `n_tokens`: such a one is also given
    the completion's length in tokens, <eos> not counted (chapter 7's `ShapedReward` and its 'tokens' term)."""
    return "n_tokens" in inspect.signature(fn).parameters


def reward_of(reward_fn: RewardFn, task: Task, completion: str, report: TestReport, n_tokens: int | None) -> float:
    """reward_fn's value for one program, given n_tokens if it takes them (`takes_n_tokens`)."""
    if takes_n_tokens(reward_fn):
        return float(reward_fn(task, completion, report, n_tokens=n_tokens))
    return float(reward_fn(task, completion, report))


ISSUE_COST = 0.5  # what each problem found in the syntax tree costs the quality term
NO_PARSE, EMPTY_BODY = "does not parse", "empty body (only a docstring, pass or ...)"


class RewardSpecError(ValueError):
    """A reward spec names an unknown term or has a bad weight. The message says which and how to fix it."""


def register_term(name: str, fn: TermFn | None = None):
    """Add a reward term to TERMS so that specs (and PPOConfig.reward) can name it.

    register_term("mine", fn) or, as a decorator, @register_term("mine").
    """
    if not name.isidentifier():
        raise RewardSpecError(f"reward term name {name!r} must be a Python identifier, e.g. 'my_term'")
    if name in globals().get("BUILTIN_TERMS", ()):
        raise RewardSpecError(f"{name!r} is a built-in reward term; give your term another name")

    def add(fn: TermFn) -> TermFn:
        if not callable(fn):
            raise RewardSpecError(f"reward term {name!r} must be callable as fn(task, completion, report) -> float")
        TERMS[name] = fn
        return fn
    return add(fn) if fn is not None else add


# =====================================================================================
# What the syntax tree says (parsing only: the code never runs here)
# =====================================================================================

def _parse(program: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal" in generated code: not our problem
            warnings.simplefilter("ignore")
            return ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: null bytes
        return None


def entry_function(task, completion: str) -> ast.FunctionDef | None:
    """The task's function in the syntax tree of task.program(completion); None if it does not parse."""
    tree = _parse(task.program(completion))
    if tree is None:
        return None
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    named = [f for f in functions if f.name == task.entry_point]
    return (named or functions or [None])[0]


def _real_statements(fn: ast.FunctionDef) -> list[ast.stmt]:
    """The body without its docstring, `pass` and `...`: what the function actually does."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return [s for s in body if not isinstance(s, ast.Pass)
            and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis)]


def _parameters(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return names + [p.arg for p in (a.vararg, a.kwarg) if p is not None]


def _names_read(fn: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def is_trivial(task, completion: str) -> bool:
    """True for code that cannot be an attempt: no parse, an empty body (docstring, pass, ...),
    or a function that never reads any of its arguments (`return 0`, `return True`)."""
    fn = entry_function(task, completion)
    if fn is None or not _real_statements(fn):
        return True
    params = _parameters(fn)
    return bool(params) and not (set(params) & _names_read(fn))


def code_issues(task, completion: str) -> list[str]:
    """The problems the syntax tree of the task's function shows, in words (empty list: none)."""
    fn = entry_function(task, completion)
    if fn is None:
        return [NO_PARSE]
    if not _real_statements(fn):
        return [EMPTY_BODY]
    issues = [f"unused argument {name!r}" for name in _parameters(fn) if name not in _names_read(fn)]
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block[:-1]):
                if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                    issues.append(f"unreachable code after {type(stmt).__name__.lower()} (line {stmt.lineno})")
                    break
    return issues


# =====================================================================================
# The terms
# =====================================================================================

@register_term("pass")
def all_tests_pass(task, completion: str, report: TestReport) -> float:
    """1 if every test passes, else 0: the reward we care about, and the sparsest."""
    return 1.0 if report.all_passed else 0.0


# The fraction of tests that pass (partial credit) is chapter 3's default reward, `env.fraction_passed`.
fraction_of_tests = register_term("fraction", fraction_passed)


@register_term("naive_syntax")
def naive_syntax_bonus(task, completion: str, report: TestReport) -> float:
    """THE WORK LOG'S BUG, kept to demonstrate it: 1 if the program compiles. The prompt (signature +
    docstring) compiles on its own, so the EMPTY completion collects the bonus. Use `syntax`."""
    return 0.0 if report.status is Status.SYNTAX_ERROR else 1.0


@register_term("syntax")
def syntax_bonus(task, completion: str, report: TestReport) -> float:
    """1 if the program compiles AND is not trivial (see `is_trivial`): empty code gets nothing."""
    if report.status is Status.SYNTAX_ERROR:
        return 0.0
    return 0.0 if is_trivial(task, completion) else 1.0


@register_term("length")
def length_penalty(task, completion: str, report: TestReport) -> float:
    """Minus the completion's length in characters (= tokens for the character tokenizer).
    With weight alpha it is `- alpha * characters`; the DeepSeek-Coder LoRA-RL report's
    `- alpha * tokens / 100` is this term at weight alpha / 100 (or the `tokens` term at weight alpha)."""
    return 0.0 - len(completion)


@register_term("tokens")
def token_length_penalty(task=None, completion: str = "", report: TestReport | None = None,
                         n_tokens: int | None = None) -> float:
    """Minus the completion's length in tokens, per 100 tokens: the length term counted as the
    DeepSeek-Coder LoRA-RL report counts it. With weight alpha it is its `- alpha * tokens / 100`."""
    if n_tokens is None:
        raise RewardSpecError("the 'tokens' term needs the completion's token count: call "
                              "reward(task, completion, report, n_tokens=...), or use 'length' (characters)")
    return 0.0 - n_tokens / 100


@register_term("quality")
def code_quality(task, completion: str, report: TestReport) -> float:
    """1 - 0.5 per problem in the syntax tree (unused argument, unreachable code), at least 0;
    0 when the program does not parse or the body is empty."""
    issues = code_issues(task, completion)
    if issues[:1] in ([NO_PARSE], [EMPTY_BODY]):
        return 0.0
    return max(0.0, 1.0 - ISSUE_COST * len(issues))


BUILTIN_TERMS = tuple(TERMS)  # the terms above, in this order


# =====================================================================================
# The spec and the reward
# =====================================================================================

@dataclass(frozen=True)
class RewardSpec:
    """Which terms, with which weights: parsed from text like "pass=1,fraction=0.5,length=0.002"."""
    weights: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, text: str, custom: dict[str, TermFn] | None = None) -> "RewardSpec":
        if isinstance(text, RewardSpec):
            return text
        if not isinstance(text, str) or not text.strip():
            raise RewardSpecError(f"reward spec {text!r} is empty; write terms as name=weight separated by commas, "
                                  "e.g. 'pass=1,fraction=0.5'")
        known = {**TERMS, **(custom or {})}
        weights: dict[str, float] = {}
        for part in text.split(","):
            part = part.strip()
            if "=" not in part:
                raise RewardSpecError(f"reward spec {text!r}: {part!r} has no weight; write it as name=weight, "
                                      f"e.g. '{part or 'pass'}=1'")
            name, _, value = (s.strip() for s in part.partition("="))
            if name not in known:
                raise RewardSpecError(f"reward spec {text!r}: unknown term {name!r}; known terms: "
                                      f"{', '.join(known)} (add your own with course_lib.rewards.register_term)")
            if name in weights:
                raise RewardSpecError(f"reward spec {text!r}: term {name!r} appears twice; give it once")
            try:
                weight = float(value)
            except ValueError:
                raise RewardSpecError(f"reward spec {text!r}: the weight of {name!r} is {value!r}, not a number") from None
            if not math.isfinite(weight) or weight < 0:
                raise RewardSpecError(f"reward spec {text!r}: the weight of {name!r} must be a finite number >= 0, "
                                      f"got {value!r} (the length term is already a penalty: its weight is alpha)")
            weights[name] = weight
        if not any(w > 0 for w in weights.values()):
            raise RewardSpecError(f"reward spec {text!r}: every weight is 0, so the policy would learn nothing; "
                                  "give at least one term a positive weight")
        return cls(tuple(weights.items()))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.weights)

    def __str__(self) -> str:
        return ",".join(f"{name}={weight:g}" for name, weight in self.weights)


class ShapedReward:
    """A reward function for the environment and the trainer: sum of weight * term.

    custom: your own terms {name: fn(task, completion, report) -> float}, usable in the spec.
    log_also: terms computed and recorded (not rewarded) on top of the spec's, to watch them.
    Each call records every term's value in `history`; `drain()` returns and clears it
    (the trainer logs each term's mean per update from it).
    """

    def __init__(self, spec: "RewardSpec | str", custom: dict[str, TermFn] | None = None,
                 log_also: tuple[str, ...] = ()):
        self.custom = dict(custom or {})
        clash = sorted(set(self.custom) & set(BUILTIN_TERMS))
        if clash:
            raise RewardSpecError(f"custom term name(s) {clash} clash with built-in terms; choose other names")
        self.spec = RewardSpec.parse(spec, custom=self.custom)
        self.fns = {**TERMS, **self.custom}
        unknown = [n for n in log_also if n not in self.fns]
        if unknown:
            raise RewardSpecError(f"log_also: unknown term(s) {unknown}; known: {', '.join(self.fns)}")
        self.logged = tuple(dict.fromkeys(self.spec.names + tuple(log_also)))
        self.counts_tokens = {n for n in self.logged if takes_n_tokens(self.fns[n])}
        self.history: list[dict[str, float]] = []

    def terms(self, task, completion: str, report: TestReport, n_tokens: int | None = None) -> dict[str, float]:
        """Every logged term's (unweighted) value for one program (n_tokens: its length in tokens)."""
        values = {}
        for name in self.logged:
            extra = {"n_tokens": n_tokens} if name in self.counts_tokens else {}
            value = float(self.fns[name](task, completion, report, **extra))
            if not math.isfinite(value):
                raise RewardSpecError(f"reward term {name!r} returned {value} for task {task.id!r}; "
                                      "a term must return a finite number")
            values[name] = value
        return values

    def __call__(self, task, completion: str, report: TestReport, n_tokens: int | None = None) -> float:
        values = self.terms(task, completion, report, n_tokens)
        self.history.append(values)
        return self.weighted(values)

    def weighted(self, values: dict[str, float]) -> float:
        """The reward from the terms' values: sum of weight * value over the spec's terms."""
        return sum(weight * values[name] for name, weight in self.spec.weights)

    def drain(self) -> list[dict[str, float]]:
        rows, self.history = self.history, []
        return rows

    def __repr__(self) -> str:
        return f"ShapedReward({str(self.spec)!r})"
