"""Task variants: many small functions in the train tasks' own idioms, for a pretraining experiment (chapter 4).

Pretrained on the 46 train pairs, the GRU recites them and answers a new task with its nearest
sibling's program (`x * 2` for "multiplied by 5"). Would more data of the same kind teach it to
*read* the docstring? The variants are that data: the train tasks' idioms (`x * k`,
`[x * k for x in xs]`, `sum(1 for c in s if ...)`, `f"Hello, {name}!"`, ...) with other constants,
conditions and words, phrased the way our docstrings are phrased:

    double(x):  "Return x multiplied by 2."                              ->  return x * 2   (a train task)
    f(x):       "Return x multiplied by 7."                              ->  return x * 7   (a variant)
    solve(x):   "Return True if x is greater than 4, otherwise False."  ->  return x > 4

With a generic name (f, solve, ...) only the docstring says what to write.

Held-out programs never enter: `safe_variants` runs every variant against the tests of every val and
test task with as many arguments (in the sandbox) and drops those that pass one (and, by
pretrain's text rule, any whose text holds a held-out solution). So no function in the data passes
`quintuple`'s tests, under any name or wording. Pieces of held-out programs can
still appear, as in the train tasks: `[x * 5 for x in xs]` passes no held-out task and stays.
`benchmarks/variants_pretraining.py` runs the experiment; chapter 4 reads its results.
"""

from __future__ import annotations

import ast
import functools
import random
from dataclasses import dataclass

from course_lib.corpus import held_out_solutions, holds_solution
from course_lib.sandbox import run_tests_batch


# -----------------------------------------------------------------------------
# the pieces: a phrase, and the code it means (v is the variable it applies to)

# number -> number, as in "Return x {phrase}." and "every number of xs {phrase}."
def _transforms(ks):
    return ([(f"multiplied by {k}", f"{{v}} * {k}", f"times_{k}") for k in ks if k > 1]
            + [(f"plus {k}", f"{{v}} + {k}", f"add_{k}") for k in ks]
            + [(f"minus {k}", f"{{v}} - {k}", f"subtract_{k}") for k in ks]
            + [(f"divided by {k}, rounded down", f"{{v}} // {k}", f"div_{k}") for k in ks if k > 1]
            + [(f"modulo {k}", f"{{v}} % {k}", f"mod_{k}") for k in ks if k > 1])


_TRANSFORMS = [
    ("multiplied by itself", "{v} * {v}", "square"), ("squared", "{v} * {v}", "squared"),
    ("cubed", "{v} * {v} * {v}", "cubed"), ("with its sign flipped", "-{v}", "flip"),
    ("multiplied by minus one", "-{v}", "negate"), ("plus one, squared", "({v} + 1) * ({v} + 1)", "inc_square"),
    ("multiplied by ten", "{v} * 10", "times_ten"),
]
# "the sum of the {noun} of the numbers in xs"
_NOUNS = ([("squares", "{v} * {v}"), ("cubes", "{v} * {v} * {v}"), ("doubles", "{v} * 2"),
           ("triples", "{v} * 3"), ("negatives", "-{v}"), ("absolute values", "abs({v})")]
          + [(f"remainders modulo {k}", f"{{v}} % {k}") for k in range(2, 8)]
          + [("halves, rounded down,", "{v} // 2")])
# number -> bool, as in "Return True if x is {phrase}, otherwise False." and "the numbers of xs that are ..."
def _conditions(ks):
    return ([(f"divisible by {k}", f"{{v}} % {k} == 0", f"multiple_of_{k}") for k in ks if k > 1]
            + [(f"not divisible by {k}", f"{{v}} % {k} != 0", f"not_multiple_of_{k}") for k in ks if k > 1]
            + [(f"greater than {k}", f"{{v}} > {k}", f"above_{k}") for k in ks]
            + [(f"less than {k}", f"{{v}} < {k}", f"below_{k}") for k in ks]
            + [(f"equal to {k}", f"{{v}} == {k}", f"equal_{k}") for k in ks])


_CONDITIONS = [
    ("even", "{v} % 2 == 0", "even"), ("odd", "{v} % 2 == 1", "odd"),
    ("greater than zero", "{v} > 0", "positive"), ("less than zero", "{v} < 0", "negative"),
    ("equal to zero", "{v} == 0", "zero"), ("not zero", "{v} != 0", "nonzero"),
    ("at least zero", "{v} >= 0", "non_negative"), ("at most zero", "{v} <= 0", "non_positive"),
]
# character -> bool: (plural, singular, code, name)
_CHAR_CLASSES = [
    ("uppercase letters", "uppercase letter", "{c}.isupper()", "upper"),
    ("lowercase letters", "lowercase letter", "{c}.islower()", "lower"),
    ("decimal digits", "decimal digit", "{c}.isdigit()", "digit"),
    ("letters", "letter", "{c}.isalpha()", "alpha"),
    ("whitespace characters", "whitespace character", "{c}.isspace()", "space"),
    ("letters or digits", "letter or digit", "{c}.isalnum()", "alnum"),
]
_WORDS = ["Hello", "Hi", "Hey", "Welcome", "Thanks", "Bye", "Goodbye", "Good night", "Good morning",
          "Good luck", "Cheers", "Sorry", "Congratulations", "Well done", "See you", "Dear", "Howdy",
          "Greetings", "Farewell", "Hooray", "Ciao", "Hallo", "Bravo", "Nice", "Go", "Run", "Stop"]
_NUMBER_ARGS = ["x", "n", "a", "y", "k", "value", "num"]
_LIST_ARGS = ["xs", "nums", "values", "items", "numbers"]
_TEXT_ARGS = ["s", "text", "word", "line"]


@dataclass(frozen=True)
class Variant:
    name: str       # the function's name
    prompt: str     # signature + one-line docstring, as in a task
    solution: str   # the body
    arity: int      # number of arguments (variants are only checked against held-out tasks with as many)

    @property
    def doc(self) -> str:
        """The docstring: what the variant asks for, whatever its name."""
        return self.prompt.split('"""')[1]


# Families of functions over a condition: (name, return type, docstring, body) templates. For the numbers
# of a list: {xs} the list, {y} one number, {phrase} the condition in words, {test} it in code on {y}.
_LIST_CONDITION_FAMILIES = [
    ("filter_{name}", "list", "Return the numbers of {xs} that are {phrase}, in their original order.",
     "return [{y} for {y} in {xs} if {test}]"),
    ("sum_{name}", "int", "Return the sum of the numbers in {xs} that are {phrase}.",
     "return sum({y} for {y} in {xs} if {test})"),
    ("count_{name}", "int", "Return how many numbers in {xs} are {phrase}.", "return sum(1 for {y} in {xs} if {test})"),
    ("any_{name}", "bool", "Return True if at least one number of {xs} is {phrase}, otherwise False.",
     "return any({test} for {y} in {xs})"),
]
_ONLY_FAMILY = [("only_{name}", "list", "Return the {phrase} numbers of {xs}, in their original order.",
                 "return [{y} for {y} in {xs} if {test}]")]
# For the characters of a text: {s} the text, {c} one character, {plural} / {singular} the class, {test} on {c}.
_CHAR_CLASS_FAMILIES = [
    ("count_{name}", "int", "Return how many characters of {s} are {plural}.", "return sum(1 for {c} in {s} if {test})"),
    ("has_{name}", "bool", "Return True if {s} contains at least one {singular}, otherwise False.",
     "return any({test} for {c} in {s})"),
    ("all_{name}", "bool", "Return True if every character of {s} is a {singular}, otherwise False.",
     "return all({test} for {c} in {s})"),
    ("keep_{name}", "str", "Return the {plural} of {s}, in their original order.",
     'return "".join({c} for {c} in {s} if {test})'),
    ("drop_{name}", "str", "Return {s} with every one of its {plural} removed.",
     'return "".join({c} for {c} in {s} if not {test})'),
]

_GENERIC_NAMES = ["f", "g", "h", "solve", "compute", "answer", "func", "helper", "calc", "task", "run", "do_it"]


def _make(name: str, args: str, ret: str, doc: str, body: str) -> Variant:
    prompt = f'def {name}({args}) -> {ret}:\n    """{doc}"""\n'
    solution = "".join(f"    {line}\n" for line in body.split("\n"))
    return Variant(name, prompt, solution, _arity(prompt))


def _number_families(pick, _variant, ks) -> list[Variant]:
    """Numbers transformed, one at a time and over a list; sums of named sequences."""
    out = []
    for phrase, code, name in _transforms(ks) + _TRANSFORMS:
        v, xs, y = pick(_NUMBER_ARGS), pick(_LIST_ARGS), pick("xyvn")
        out.append(_variant(name, f"{v}: int", "int", f"Return {v} {phrase}.", f"return {code.format(v=v)}"))
        out.append(_variant(f"{name}_all", f"{xs}: list", "list",
                            f"Return a new list with every number of {xs} {phrase}.",
                            f"return [{code.format(v=y)} for {y} in {xs}]"))
    for noun, code in _NOUNS:
        xs, y = pick(_LIST_ARGS), pick("xyvn")
        out.append(_variant(f"sum_of_{noun.split()[0].rstrip(',')}", f"{xs}: list", "int",
                            f"Return the sum of the {noun} of the numbers in {xs}.",
                            f"return sum({code.format(v=y)} for {y} in {xs})"))
    return out


def _condition_families(pick, _variant, ks) -> list[Variant]:
    """Tests of a number, and of a list's numbers; classes of characters in a text."""
    out = []
    for phrase, code, name in _CONDITIONS + _conditions(ks):
        v, xs, y = pick(_NUMBER_ARGS), pick(_LIST_ARGS), pick("xyvn")
        out.append(_variant(f"is_{name}", f"{v}: int", "bool", f"Return True if {v} is {phrase}, otherwise False.",
                            f"return {code.format(v=v)}"))
        fill = dict(xs=xs, y=y, phrase=phrase, name=name, test=code.format(v=y))
        families = _LIST_CONDITION_FAMILIES + (_ONLY_FAMILY if " " not in phrase else [])  # "the even numbers of xs"
        for fname, ret, doc, body in families:
            out.append(_variant(fname.format(**fill), f"{xs}: list", ret, doc.format(**fill), body.format(**fill)))
    for plural, singular, code, name in _CHAR_CLASSES:
        s, c = pick(_TEXT_ARGS), pick("cx")
        fill = dict(s=s, c=c, plural=plural, singular=singular, name=name, test=code.format(c=c))
        for fname, ret, doc, body in _CHAR_CLASS_FAMILIES:
            out.append(_variant(fname.format(**fill), f"{s}: str", ret, doc.format(**fill), body.format(**fill)))
    return out


def _text_families(pick, _variant, ks) -> list[Variant]:
    """Greetings, formatted pairs and joined lists."""
    out = []
    for word in _WORDS:
        arg = pick(["name", "who", "person", "friend"])
        out.append(_variant(f"say_{word.lower().replace(' ', '_')}", f"{arg}: str", "str",
                            f"Return the message '{word}, <{arg}>!'.", f'return f"{word}, {{{arg}}}!"'))
        out.append(_variant(f"{word.lower().replace(' ', '_')}_line", f"{arg}: str", "str",
                            f"Return the text '{word} <{arg}>.'.", f'return f"{word} {{{arg}}}."'))
    for sep in [":", "-", "/", ", ", " x ", "|", "; ", " to ", "+"]:
        a, b = pick([("a", "b"), ("x", "y"), ("left", "right")])
        out.append(_variant(f"format_{a}_{b}", f"{a}: int, {b}: int", "str",
                            f"Return the pair written as '{a}{sep}{b}'.", f'return f"{{{a}}}{sep}{{{b}}}"'))
        words = pick(["words", "parts", "items"])
        out.append(_variant(f"join_{words}", f"{words}: list", "str",
                            f"Return the {words} joined into one string with '{sep}' between each pair.",
                            f'return "{sep}".join({words})'))
    return out


def _pair_families(pick, _variant, ks) -> list[Variant]:
    """Two numbers: arithmetic, comparisons, the larger or smaller."""
    out = []
    for a, b in [("a", "b"), ("x", "y"), ("m", "n")]:
        for phrase, code, name in [("the sum of", "+", "add"), ("the product of", "*", "mul"),
                                   ("the difference of", "-", "diff")]:
            out.append(_variant(f"{name}_{a}_{b}", f"{a}: int, {b}: int", "int",
                                f"Return {phrase} {a} and {b}.", f"return {a} {code} {b}"))
        for phrase, op in [("greater than", ">"), ("smaller than", "<"), ("less than", "<"), ("at least", ">="),
                           ("at most", "<="), ("equal to", "==")]:
            out.append(_variant(f"check_{a}_{b}", f"{a}: int, {b}: int", "bool",
                                f"Return True if {a} is {phrase} {b}, otherwise False.", f"return {a} {op} {b}"))
        for phrase, op, avoid in [("larger", ">", "max"), ("smaller", "<", "min"), ("bigger", ">", "max")]:
            out.append(_variant(f"pick_{a}_{b}", f"{a}: int, {b}: int", "int",
                                f"Return the {phrase} of {a} and {b} without using {avoid}().",
                                f"return {a} if {a} {op} {b} else {b}"))
    return out


def _sequence_families(pick, _variant, ks) -> list[Variant]:
    """Slices and methods of a text, facts of a list, sums up to n and running totals."""
    out = []
    for s in _TEXT_ARGS:
        for phrase, code, name in [("the first n characters of {s} (all of {s} if it is shorter)", "{s}[:n]", "head"),
                                   ("the last n characters of {s}, for n >= 1 (all of {s} if it is shorter)",
                                    "{s}[-n:]", "tail"),
                                   ("{s} without its first n characters", "{s}[n:]", "skip"),
                                   ("{s} repeated n times", "{s} * n", "repeat")]:
            out.append(_variant(f"{name}_chars", f"{s}: str, n: int", "str",
                                f"Return {phrase.format(s=s)}.", f"return {code.format(s=s)}"))
        for phrase, code, name in [("with every letter converted to uppercase", "{s}.upper()", "upper"),
                                   ("with every letter converted to lowercase", "{s}.lower()", "lower"),
                                   ("with its characters in reverse order", "{s}[::-1]", "reverse"),
                                   ("without leading and trailing whitespace", "{s}.strip()", "strip"),
                                   ("written twice", "{s} + {s}", "twice")]:
            out.append(_variant(f"{name}_{s}", f"{s}: str", "str", f"Return {s} {phrase}.",
                                f"return {code.format(s=s)}"))
        out.append(_variant(f"length_of_{s}", f"{s}: str", "int", f"Return the number of characters in {s}.",
                            f"return len({s})"))
    for xs in _LIST_ARGS:
        for phrase, code, name in [("the largest number in", "max({xs})", "largest"),
                                   ("the smallest number in", "min({xs})", "smallest"),
                                   ("the number of elements in", "len({xs})", "size"),
                                   ("the first element of", "{xs}[0]", "first"),
                                   ("the last element of", "{xs}[-1]", "last"),
                                   ("the largest minus the first number in", "max({xs}) - {xs}[0]", "gain"),
                                   ("the sum of the numbers in", "sum({xs})", "total"),
                                   ("the largest number plus the smallest number in", "max({xs}) + min({xs})", "ends")]:
            out.append(_variant(f"{name}_of_{xs}", f"{xs}: list", "int",
                                f"Return {phrase} the non-empty list {xs}.", f"return {code.format(xs=xs)}"))
        out.append(_variant(f"sorted_{xs}", f"{xs}: list", "list", f"Return the numbers of {xs} in increasing order.",
                            f"return sorted({xs})"))
    for n in ["n", "m", "k"]:
        for phrase, code, name in [("the sum of the numbers from 1 to {n} inclusive", "sum(range(1, {n} + 1))", "sum"),
                                   ("the sum of the even numbers from 1 to {n} inclusive",
                                    "sum(range(2, {n} + 1, 2))", "sum_even"),
                                   ("the sum of the multiples of 3 from 1 to {n} inclusive",
                                    "sum(range(3, {n} + 1, 3))", "sum_threes"),
                                   ("the sum of the squares of the numbers from 1 to {n} inclusive",
                                    "sum(i * i for i in range(1, {n} + 1))", "sum_squares"),
                                   ("the numbers from 1 to {n} inclusive, as a list", "list(range(1, {n} + 1))", "upto"),
                                   ("the number of decimal digits of the non-negative integer {n}",
                                    "len(str({n}))", "digits"),
                                   ("the largest decimal digit of the non-negative integer {n}",
                                    "max(int(c) for c in str({n}))", "max_digit")]:
            out.append(_variant(f"{name}_to_{n}", f"{n}: int", "int", f"Return {phrase.format(n=n)}.",
                                f"return {code.format(n=n)}"))
        for phrase, start, op in [("running totals", "0", "+="), ("running products", "1", "*=")]:
            xs = pick(_LIST_ARGS)
            out.append(_variant(f"running_{phrase.split()[1]}", f"{xs}: list", "list", f"Return the {phrase} of {xs}.",
                                f"acc = {start}\nout = []\nfor x in {xs}:\n    acc {op} x\n    out.append(acc)\n"
                                f"return out"))
    return out


def _generate(rng: random.Random, generic_names: float, vary_args: bool, extra_constants: int) -> list[Variant]:
    ks = list(range(1, 10)) + sorted(rng.sample(range(10, 100), extra_constants))

    def pick(pool):  # an argument name: the pool's first (the train tasks' own) unless vary_args
        return rng.choice(pool) if vary_args else pool[0]

    def _variant(name, args, ret, doc, body):  # with a generic name drawn now and then
        return _make(rng.choice(_GENERIC_NAMES) if rng.random() < generic_names else name, args, ret, doc, body)

    out = []
    for family in (_number_families, _condition_families, _text_families, _pair_families, _sequence_families):
        out += family(pick, _variant, ks)  # in this order: rng's draws are those of one long loop
    return out


def all_variants(seed: int = 0, copies: int = 2, generic_names: float = 1.0,
                 vary_args: bool = False, extra_constants: int = 0) -> list[Variant]:
    """Every variant the generator writes, held-out answers not yet removed (distinct prompts, fixed order).

    copies: how many times each template is written (with other names drawn); generic_names: the
    share of functions named f, solve, ... instead of after what they do (the name then says nothing
    and only the docstring does); vary_args: draw argument names (else the train tasks' x, xs, s, n);
    extra_constants: how many two-digit constants (drawn) join 1..9 in the number templates.
    """
    out, seen = [], set()
    for copy in range(copies):
        for v in _generate(random.Random(seed * 1000 + copy), generic_names, vary_args, extra_constants):
            if v.prompt not in seen:
                seen.add(v.prompt)
                out.append(v)
    return out


@functools.lru_cache(maxsize=4)
def _held_out_passes(variants: tuple[Variant, ...], tasks: tuple) -> tuple[tuple[str, ...], ...]:
    """For each variant, the val/test tasks whose tests it passes: one sandbox job per held-out task,
    one test per variant (its definition, `entry_point = name`, then the task's asserts)."""
    held_out = [t for t in tasks if t.split != "train"]
    candidates = [[k for k, v in enumerate(variants) if v.arity == _arity(t.prompt)] for t in held_out]
    jobs = [("", [variants[k].prompt + variants[k].solution + f"{t.entry_point} = {variants[k].name}\n"
                  + "\n".join(t.tests) for k in ks]) for t, ks in zip(held_out, candidates)]
    passes = [[] for _ in variants]
    for t, ks, report in zip(held_out, candidates, run_tests_batch(jobs, timeout=60.0)):
        if any(r is None for r in report.results):  # a check that never ran must not let a variant through
            raise RuntimeError(f"the leak check against {t.id!r} did not finish ({report.status.value}: "
                               f"{report.error}); no variant is used unchecked")
        for k, passed in zip(ks, report.results):
            if passed:
                passes[k].append(t.id)
    return tuple(tuple(p) for p in passes)


def _arity(prompt: str) -> int:
    """How many arguments the function of a prompt (signature + docstring) takes, read by Python's parser."""
    function = ast.parse(prompt + "    pass\n").body[0]
    return len(function.args.posonlyargs) + len(function.args.args) + len(function.args.kwonlyargs)


def held_out_matches(variants, tasks) -> dict[str, list[str]]:
    """prompt -> the val/test tasks whose tests its variant passes (run in the sandbox), for those that pass any."""
    variants = tuple(variants)
    passes = _held_out_passes(variants, tuple(tasks))
    return {v.prompt: list(p) for v, p in zip(variants, passes) if p}


def safe_variants(tasks, vocab=None, **options) -> list[Variant]:
    """The variants of all_variants(**options) that may be trained on.

    Dropped: a variant that passes any val/test task's tests (by behaviour), one whose text holds a
    val/test solution (pretrain's text rule: `return x * 5` is in `return x * 57`), and one with a
    character outside vocab (if given). The behaviour check runs on every variant written, so
    `held_out_matches(all_variants(**options), tasks)` reuses it.
    """
    written = tuple(all_variants(**options))
    passes = _held_out_passes(written, tuple(tasks))
    solutions = held_out_solutions(tasks).values()
    return [v for v, p in zip(written, passes)
            if not p and (vocab is None or set(v.prompt + v.solution) <= set(vocab))
            and not holds_solution(v.prompt + v.solution, solutions)]
