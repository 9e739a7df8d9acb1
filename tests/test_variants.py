"""Task variants (course_lib.gru.variants): well-formed, deterministic, and never a held-out answer."""

from __future__ import annotations

import ast
import re

import pytest

from course_lib.gru import variants as variants_module
from course_lib.sandbox import Status, TestReport, run_tests_batch
from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer
from course_lib.gru.variants import _GENERIC_NAMES, all_variants, held_out_matches, safe_variants


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


@pytest.fixture(scope="module")
def safe(tasks):
    return safe_variants(tasks, vocab=course_tokenizer().vocab[3:])


def test_every_variant_is_a_task_shaped_function():
    for v in all_variants():
        tree = ast.parse(v.prompt + v.solution)
        (function,) = tree.body
        assert isinstance(function, ast.FunctionDef) and function.name == v.name
        assert ast.get_docstring(function).startswith("Return ")
        assert len(function.args.args) == v.arity
        assert v.prompt.count("\n") == 2 and v.solution.startswith("    ") and v.solution.endswith("\n")


def test_the_generator_is_deterministic_and_its_options_do_what_they_say():
    assert all_variants(seed=3) == all_variants(seed=3)
    assert {v.name for v in all_variants(generic_names=1.0)} <= set(_GENERIC_NAMES)
    assert not {v.name for v in all_variants(generic_names=0.0)} & set(_GENERIC_NAMES)
    canonical = {"x", "xs", "s", "n", "name", "a", "b", "words", "m", "k", "y", "text", "word", "line",
                 "numbers", "nums", "values", "items", "parts", "left", "right"}
    for v in all_variants(vary_args=False):
        assert {a.arg for a in ast.parse(v.prompt + v.solution).body[0].args.args} <= canonical
    assert {a.arg for v in all_variants(vary_args=True) for a in ast.parse(v.prompt + v.solution).body[0].args.args} \
        > {a.arg for v in all_variants(vary_args=False) for a in ast.parse(v.prompt + v.solution).body[0].args.args}


def test_the_docstring_says_what_the_code_does():
    """Spot checks, in the sandbox: the numbers in the phrase are the numbers in the behaviour."""
    jobs, expected = [], []
    for v in all_variants():
        doc = v.doc
        if m := re.fullmatch(r"Return x (multiplied by|plus|minus) (\d)\.", doc):
            k = int(m[2])
            value = {"multiplied by": 7 * k, "plus": 7 + k, "minus": 7 - k}[m[1]]
            jobs.append((v.prompt + v.solution, [f"assert {v.name}(7) == {value}"]))
        elif m := re.fullmatch(r"Return True if x is greater than (\d), otherwise False\.", doc):
            k = int(m[1])
            jobs.append((v.prompt + v.solution, [f"assert {v.name}({k}) is False", f"assert {v.name}({k + 1}) is True"]))
        elif m := re.fullmatch(r"Return the message '([A-Za-z ]+), <name>!'\.", doc):
            jobs.append((v.prompt + v.solution, [f"assert {v.name}('Ann') == '{m[1]}, Ann!'"]))
        else:
            continue
        expected.append(v.prompt)
    assert len(jobs) > 40
    reports = run_tests_batch(jobs)
    assert [p for p, r in zip(expected, reports) if not r.all_passed] == []


@pytest.mark.slow
def test_no_kept_variant_passes_a_held_out_task(tasks, safe):
    """Checked the slow way, one (variant, task) job at a time, on every 4th kept variant."""
    held_out = [t for t in tasks if t.split != "train"]
    jobs, pairs = [], []
    for v in safe[::4]:
        for t in held_out:
            if variants_module._arity(t.prompt) == v.arity:
                jobs.append((v.prompt + v.solution + f"{t.entry_point} = {v.name}\n", t.tests))
                pairs.append((v.prompt, t.id))
    reports = run_tests_batch(jobs)
    assert len(jobs) > 500
    assert [pair for pair, r in zip(pairs, reports) if r.all_passed] == []


def test_held_out_answers_the_generator_writes_are_dropped(tasks, safe):
    written = {v.doc for v in all_variants()}
    kept = {v.doc for v in safe}
    for doc, task_id in [("Return x multiplied by 5.", "quintuple"), ("Return True if x is odd, otherwise False.", "is_odd"),
                         ("Return the message 'Goodbye, <name>!'.", "farewell")]:
        assert doc in written and doc not in kept
        assert any(task_id in ids for prompt, ids in held_out_matches(all_variants(), tasks).items() if doc in prompt)
    assert len(safe) > 900  # most survive: the check removes answers, not the idioms


def test_a_check_that_did_not_finish_lets_nothing_through(tasks, monkeypatch):
    def unfinished(jobs, **kwargs):
        return [TestReport(0, len(tests), Status.TIMEOUT, 60.0, (None,) * len(tests), "timed out")
                for _, tests in jobs]

    monkeypatch.setattr("course_lib.gru.variants.run_tests_batch", unfinished)
    variants_module._held_out_passes.cache_clear()
    with pytest.raises(RuntimeError, match="did not finish"):
        safe_variants(tasks, seed=7)
    variants_module._held_out_passes.cache_clear()


def test_arity_is_read_by_the_parser_not_by_counting_colons():
    assert variants_module._arity('def f(a, sep: str = ":", *, k: int = 1) -> str:\n    """Join."""\n') == 3
    assert variants_module._arity('def f(\n    a: int,\n    b: int,\n) -> int:\n    """Add."""\n') == 2


def test_extra_constants_add_two_digit_blanks_and_leave_the_default_alone():
    base, more = all_variants(), all_variants(extra_constants=5)
    two_digit = [v for v in more if re.search(r"\b[1-9][0-9]\b", v.doc)]
    assert len(more) > len(base) and len(two_digit) > 100
    assert all(re.search(r"\b[1-9][0-9]\b", v.solution) for v in two_digit if "multiplied by" in v.prompt)
    assert base == all_variants(extra_constants=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_saved_copying_models_load_and_match_their_records(seed, tasks):
    """Chapter 6 starts PPO from these checkpoints; their greedy val passes are the ones recorded."""
    import json
    from pathlib import Path

    from course_lib.gru.checkpoints import load_checkpoint
    from course_lib.gru.pretrain import evaluate_pass_rate

    root = Path(__file__).resolve().parents[1]
    model, tokenizer, extra = load_checkpoint(root / f"notebooks/checkpoints/variants_gpu/two_digit_seed{seed}.pt",
                                              tokenizer=course_tokenizer())
    record = json.loads((root / f"notebooks/data/variants_gpu/two_digit_seed{seed}.json").read_text())
    assert extra["benchmark"]["seed"] == seed and model.config.hidden_dim == record["settings"]["hidden_dim"]
    result = evaluate_pass_rate(model, tokenizer, [t for t in tasks if t.split == "val"], greedy=True)
    assert sorted(r["id"] for r in result["per_task"] if r["greedy_passed"]) == record["passed"]["val"]


def test_kept_variants_also_follow_the_text_rule(tasks):
    """`return x * 5` inside `return x * 57` passes no held-out test, but its text holds a held-out solution."""
    from course_lib.corpus import Example, find_leaks

    written = all_variants(extra_constants=40)
    kept = safe_variants(tasks, extra_constants=40)
    assert find_leaks([Example(v.prompt, v.solution, v.name) for v in written], tasks)
    assert find_leaks([Example(v.prompt, v.solution, v.name) for v in kept], tasks) == []
