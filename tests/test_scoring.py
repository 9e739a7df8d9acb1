"""One evaluator for both policies: `course_lib.scoring.score` gives the GRU's and the language model's
evaluations the same keys, and the GRU's numbers are the ones its evaluator gave before it scored through it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from course_lib.gru import pretrain  # noqa: E402
from course_lib.lm import evaluation  # noqa: E402
from course_lib.scoring import pass_at_k, score  # noqa: E402
from course_lib.tasks import Task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RIGHT, WRONG = "    return x\n", "    return 0\n"
TASKS = [Task(id=f"t{i}", prompt=f"def f{i}(x):\n", entry_point=f"f{i}", solution=RIGHT,
              tests=(f"assert f{i}(3) == 3", f"assert f{i}(0) == 0"), family="t", split=split, novelty=novelty)
         for i, (split, novelty) in enumerate([("train", None), ("train", None), ("val", "near"), ("test", "far")])]
GREEDY = [RIGHT, WRONG, WRONG, RIGHT]
SAMPLES = [[RIGHT] * 4, [RIGHT, WRONG, WRONG, RIGHT], [WRONG] * 4, [WRONG, WRONG, WRONG, RIGHT]]
LM_ADDS = {"style", "max_new_tokens", "greedy_avg_gen_len", "avg_gen_len"}  # what the language model adds
LM_ROW_ADDS = {"greedy_tokens", "greedy_finish"}
GRU_ROW_ADDS = {"completions"}  # a sampled task's programs


def test_score_defines_every_measure_once():
    r = score(TASKS, greedy=GREEDY, samples=sum(SAMPLES, []), temperature=0.8, ks=(1, 2, 10))
    assert [r[f"{g}_greedy_pass@1"] for g in ("train", "val", "val_near", "test", "test_far")] == [0.5, 0, 0, 1, 1]
    assert r["train_pass@1"] == (1 + 0.5) / 2 and r["val_pass@1"] == 0 and r["test_pass@1"] == 0.25
    assert r["train_pass@2"] == round((1 + pass_at_k(4, 2, 2)) / 2, 4) and "train_pass@10" not in r  # k > n
    assert r["train_tasks"] == 2 and r["val_near_tasks"] == 1 and "val_far_tasks" not in r
    assert (r["n_samples"], r["temperature"]) == (4, 0.8) and list(r)[-1] == "per_task"
    row = r["per_task"][1]
    assert row == {"id": "t1", "split": "train", "novelty": None, "greedy_passed": False, "greedy_fraction": 0.5,
                   "greedy_status": "failed", "greedy_completion": WRONG, "n": 4, "c": 2}
    greedy_only = score(TASKS, greedy=GREEDY)
    assert (greedy_only["n_samples"], greedy_only["temperature"]) == (0, None)
    assert not any(k.endswith("_pass@1") and "greedy" not in k for k in greedy_only)
    assert "n" not in greedy_only["per_task"][0] and "greedy_passed" not in score(
        TASKS, samples=GREEDY, temperature=1.0)["per_task"][0]


def test_a_skipped_task_counts_as_failed_and_says_why():
    r = score(TASKS, greedy=[RIGHT] * 4, samples=[RIGHT] * 8, temperature=1.0, skip={"t3": "cannot read it"})
    row = r["per_task"][3]
    assert (row["greedy_passed"], row["greedy_status"], row["reason"], row["c"]) == (False, "unreadable",
                                                                                     "cannot read it", 0)
    assert r["test_greedy_pass@1"] == r["test_pass@1"] == 0 and r["train_greedy_pass@1"] == 1


@pytest.mark.parametrize("kwargs, says", [
    ({}, "nothing to score"), ({"greedy": [RIGHT]}, "one completion per task"),
    ({"samples": [RIGHT] * 5, "temperature": 1.0}, "the same number"), ({"samples": [RIGHT] * 4}, "temperature")])
def test_score_refuses_what_it_cannot_score(kwargs, says):
    with pytest.raises(ValueError, match=says):
        score(TASKS, **kwargs)


def _fixed_gru(monkeypatch):
    """The GRU's generate replaced by GREEDY and SAMPLES (prompts come task by task, each task's n in a row)."""
    by_prompt = {t.prompt: k for k, t in enumerate(TASKS)}

    def fake_generate(model, tokenizer, prompts, *, greedy=False, **kwargs):
        drawn = {}
        out = []
        for p in prompts:
            k = by_prompt[p]
            out.append(GREEDY[k] if greedy else SAMPLES[k][drawn.get(k, 0)])
            drawn[k] = drawn.get(k, 0) + 1
        return out

    monkeypatch.setattr(pretrain, "generate", fake_generate)


def _fixed_lm(monkeypatch):
    def fake_generate(model, tokenizer, prompts, *, n_samples=1, temperature=0.0, **kwargs):
        if temperature == 0:
            return [evaluation.Generation(k, a, a, 3, "eos") for k, a in enumerate(GREEDY)]
        return [evaluation.Generation(k, x, x, 5, "eos") for k, a in enumerate(SAMPLES) for x in a[:n_samples]]

    monkeypatch.setattr(evaluation, "generate", fake_generate)


@pytest.mark.parametrize("kind", ["greedy", "sampled", "both"])
def test_both_policies_evaluators_give_the_same_keys_and_numbers(monkeypatch, kind):
    _fixed_gru(monkeypatch)
    _fixed_lm(monkeypatch)
    greedy, n = kind != "sampled", 0 if kind == "greedy" else 4
    gru = pretrain.evaluate_policy(None, None, TASKS, allowed_ids=None, greedy=greedy, n_samples=n,
                                   temperature=0.8, ks=(1, 2))
    lm = evaluation.evaluate(None, None, TASKS, greedy=greedy, n_samples=n, temperature=0.8, ks=(1, 2))
    assert set(gru) == set(lm) - LM_ADDS
    assert {k: v for k, v in gru.items() if k != "per_task"} == {k: lm[k] for k in gru if k != "per_task"}
    for g, m in zip(gru["per_task"], lm["per_task"]):
        assert set(g) - GRU_ROW_ADDS == set(m) - LM_ROW_ADDS
        assert {k: g[k] for k in set(g) - GRU_ROW_ADDS} == {k: m[k] for k in set(m) - LM_ROW_ADDS}
    assert any(k.endswith("_greedy_pass@1") for k in gru) == greedy
    assert ("train_pass@1" in gru) == bool(n) and ("train_pass@2" in gru) == bool(n)


def test_chapter_4s_measure_is_greedy_at_temperature_0(monkeypatch):
    _fixed_gru(monkeypatch)
    cold = pretrain.evaluate_pass_rate(None, None, TASKS, temperature=0.0, n_samples=4)
    assert cold == pretrain.evaluate_policy(None, None, TASKS, allowed_ids=None)
    warm = pretrain.evaluate_pass_rate(None, None, TASKS, temperature=1.0, n_samples=4)
    assert warm["train_pass@1"] == 0.75 and warm["per_task"][1]["completions"] == SAMPLES[1]


# Computed with the evaluator before it scored through `course_lib.scoring` (then "{split}_pass_rate" and
# "pass_rate"): chapter 4's checkpoint, the course's tasks, 80 new tokens at most.
BEFORE_GREEDY = {"train": 0.8696, "val": 0.0, "val_near": 0.0, "val_far": 0.0, "test": 0.0, "test_near": 0.0,
                 "test_far": 0.0}
BEFORE_GREEDY_PASSED = [
    "abs_value", "add", "average", "count_below", "count_char", "count_digits", "count_words", "double",
    "double_all", "filter_even", "filter_greater", "filter_long_words", "filter_positive", "first_n_chars",
    "format_pair", "gcd", "grade_word", "greet", "is_divisible", "is_even", "is_palindrome", "is_positive",
    "join_words", "max_of_list", "max_of_two", "min_of_list", "perimeter_of_square", "power", "remove_digits",
    "reverse_list", "reverse_string", "square", "square_all", "sum_list", "sum_of_squares", "sum_to_n", "to_lower",
    "to_upper", "triple", "word_lengths"]
BEFORE_GREEDY_SHA = "eb402025481db4ee"      # of the greedy programs, task by task
BEFORE_SAMPLED_C = [2, 2, 2, 1, 2, 3, 1, 0, 0, 2, 0, 1]  # 3 samples at T = 1, seed 0, of the first 12 train tasks
BEFORE_SAMPLED_SHA = "6224b072a26de85e"     # of those 36 programs
BEFORE_SAMPLED_RATE = 0.4444               # "pass_rate" then: 16 of 36


def _sha(texts) -> str:
    return hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()[:16]


def test_the_grus_numbers_are_the_ones_its_evaluator_gave_before(tasks):
    from course_lib.gru.checkpoints import load_checkpoint
    from course_lib.tokenizers import course_tokenizer

    model, tokenizer, extra = load_checkpoint(ROOT / "notebooks/checkpoints/gru_pretrained.pt",
                                              tokenizer=course_tokenizer())
    alphabet = extra["alphabet"]
    greedy = pretrain.evaluate_policy(model, tokenizer, tasks, allowed_ids=alphabet, max_new_tokens=80)
    assert {g: greedy[f"{g}_greedy_pass@1"] for g in BEFORE_GREEDY} == BEFORE_GREEDY
    assert sorted(r["id"] for r in greedy["per_task"] if r["greedy_passed"]) == BEFORE_GREEDY_PASSED
    assert _sha(r["greedy_completion"] for r in greedy["per_task"]) == BEFORE_GREEDY_SHA
    train = [t for t in tasks if t.split == "train"][:12]
    sampled = pretrain.evaluate_pass_rate(model, tokenizer, train, temperature=1.0, n_samples=3, seed=0,
                                          allowed_ids=alphabet, max_new_tokens=80)
    assert [r["c"] for r in sampled["per_task"]] == BEFORE_SAMPLED_C
    assert _sha(c for r in sampled["per_task"] for c in r["completions"]) == BEFORE_SAMPLED_SHA
    assert sampled["train_pass@1"] == BEFORE_SAMPLED_RATE and (sampled["n_samples"], sampled["temperature"]) == (3, 1)
