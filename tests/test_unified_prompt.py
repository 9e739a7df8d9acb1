"""The teacher-guided GRPO README's unified prompt and answer: <think> reasoning + one ```python block, written and read back."""

from __future__ import annotations

import pytest

from course_lib.lm.protocol import (INSTRUCT_TEMPLATE, extract_completion, extract_fenced_code,
                                    extract_thinking, format_prompt, format_response, stop_sequences_for,
                                    strip_thinking)
from course_lib.lm.evaluation import run_completions
from course_lib.tasks import load_tasks

CODE = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


def test_unified_prompt_holds_the_task_and_asks_for_both_parts(tasks):
    task = tasks[0]
    prompt = format_prompt(task, "instruct")
    assert task.prompt in prompt
    assert "<think>" in prompt and "</think>" in prompt and "```python" in prompt
    assert prompt == INSTRUCT_TEMPLATE.format(prompt=task.prompt)
    assert format_prompt(task) == task.prompt  # the base-model style is the bare prompt
    assert stop_sequences_for("instruct") == ()  # an answer's code may hold defs: only <eos> ends it
    with pytest.raises(ValueError, match="unknown prompt style"):
        format_prompt(task, "chat")


@pytest.mark.parametrize("thinking", ["Add a and b.", "  step 1\n  step 2  \n", "", None])
def test_format_response_round_trips(thinking):
    text = format_response(CODE, thinking)
    assert extract_completion(text, ()) == CODE
    assert extract_fenced_code(text) == CODE
    assert extract_thinking(text) == (None if thinking is None else thinking.strip())
    assert "<think>" not in strip_thinking(text)


def test_format_response_shape_and_errors():
    assert format_response("x = 1", "why") == "<think>\nwhy\n</think>\n\n```python\nx = 1\n```\n"
    with pytest.raises(ValueError, match="fence"):
        format_response("```python\nx = 1\n```", "why")
    with pytest.raises(ValueError, match="<think>"):
        format_response("x = 1", "<think>why</think>")


@pytest.mark.parametrize("text, thinking", [
    ("<think>\nplan\n</think>\n```python\nx\n```", "plan"),
    ("plan\n</think>\n```python\nx\n```", "plan"),             # the template opened the block
    ("<think>\nplan, cut off by the token limit", "plan, cut off by the token limit"),
    ("```python\nx\n```", None),                               # no reasoning at all
    ("<think>a</think> then <think>b</think>", "a"),           # the first block is the reasoning
])
def test_extract_thinking(text, thinking):
    assert extract_thinking(text) == thinking


def test_unified_answers_of_reference_solutions_pass_in_the_sandbox(tasks):
    """The whole function in the block, after the prompt: the prompt's stub is redefined, and the tests pass."""
    train = [t for t in tasks if t.split == "train"][:6]
    answers = [format_response(t.prompt + t.solution, f"Solve {t.entry_point}.") for t in train]
    completions = [extract_completion(a, stop_sequences_for("instruct")) for a in answers]
    assert all(run_completions(train, completions))
    # and the code alone, without its reasoning, is what the sandbox sees
    assert all("<think>" not in c and "Solve" not in c for c in completions)


def test_a_wrong_fenced_answer_fails_in_the_sandbox(tasks):
    task = next(t for t in tasks if t.split == "train")
    wrong = format_response(task.prompt + "    return None\n", "guess")
    assert run_completions([task], [extract_completion(wrong, ())]) == [False]


# --- standard errors for "is the gain real?" (used by chapter 11) ------------------------------------

def rows(split, cs, n=10):
    return [{"id": f"t{i}", "split": split, "n": n, "c": c} for i, c in enumerate(cs)]


def test_pass_rate_with_se():
    from course_lib.stats import pass_rate_with_se

    rate, se = pass_rate_with_se(rows("val", [0, 10]) + rows("test", [5, 5]), "val")
    assert rate == pytest.approx(0.5) and se == pytest.approx(0.5)  # std 0.707 / sqrt(2)
    assert pass_rate_with_se(rows("val", [3, 3, 3]))[1] == 0.0
    with pytest.raises(ValueError, match="at least 2 tasks"):
        pass_rate_with_se(rows("val", [1]))


def test_compare_pass_rates_is_paired_and_needs_two_standard_errors():
    from course_lib.stats import compare_pass_rates

    before = rows("val", [0, 2, 5, 9, 1])
    same_shift = rows("val", [1, 3, 6, 10, 2])  # +0.1 on every task: tiny, but perfectly consistent
    out = compare_pass_rates(same_shift, before, "val")
    assert out["difference"] == pytest.approx(0.1) and out["se"] == pytest.approx(0.0, abs=1e-12) and out["real"]
    one_task = rows("val", [0, 2, 5, 9, 2])     # one sample more on one task: not a real gain
    out = compare_pass_rates(one_task, before, "val")
    assert out["difference"] == pytest.approx(0.02) and not out["real"]
    assert not compare_pass_rates(before, before, "val")["real"]
    with pytest.raises(ValueError, match="same val tasks"):
        compare_pass_rates(before[:3], before, "val")
