"""Reward shaping: each term on hand-made programs, the spec parser, the trainer's use of it."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib import rewards
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.rewards import (BUILTIN_TERMS, RewardSpec, RewardSpecError, ShapedReward, code_issues,
                                code_quality, is_trivial, length_penalty, naive_syntax_bonus, register_term,
                                syntax_bonus)
from course_lib.sandbox import Status, run_tests_batch
from course_lib.tasks import Task
from course_lib.tokenizers import course_tokenizer
from course_lib.gru.trainer import ConfigError, PPOConfig, PPOTrainer

ABS = Task(id="abs_value", prompt='def abs_value(x: int) -> int:\n    """Return |x|."""\n', entry_point="abs_value",
           solution="    return x if x >= 0 else -x\n", family="toy", split="train",
           tests=("assert abs_value(5) == 5", "assert abs_value(-3) == 3", "assert abs_value(0) == 0"))

PROGRAMS = {  # name -> completion of ABS
    "empty": "",
    "pass": "    pass\n",
    "constant": "    return 0\n",
    "identity": "    return x\n",
    "solution": ABS.solution,
    "broken": "    return x +\n",
    "unreachable": "    return x if x >= 0 else -x\n    print(x)\n",
}


@pytest.fixture(scope="module")
def reports():
    return dict(zip(PROGRAMS, run_tests_batch([(ABS.program(c), ABS.tests) for c in PROGRAMS.values()])))


def test_the_sandbox_reports_the_fraction_of_tests_passed(reports):
    assert reports["solution"].fraction == 1.0 and reports["solution"].all_passed
    assert reports["constant"].passed == 1 and reports["constant"].total == 3  # abs_value(0) == 0
    assert math.isclose(reports["identity"].fraction, 2 / 3)
    assert reports["broken"].status is Status.SYNTAX_ERROR and reports["broken"].fraction == 0.0


def test_pass_and_fraction_terms(reports):
    r = ShapedReward("pass=1,fraction=1")
    assert [r.terms(ABS, PROGRAMS[k], reports[k])["pass"] for k in ("solution", "identity", "empty")] == [1, 0, 0]
    assert math.isclose(r.terms(ABS, PROGRAMS["identity"], reports["identity"])["fraction"], 2 / 3)


def test_empty_and_trivial_code_collects_the_naive_bonus_but_not_the_fixed_one(reports):
    for name in ("empty", "pass", "constant"):
        assert naive_syntax_bonus(ABS, PROGRAMS[name], reports[name]) == 1.0, name  # the character-level PPO work log's bug
        assert syntax_bonus(ABS, PROGRAMS[name], reports[name]) == 0.0, name
        assert is_trivial(ABS, PROGRAMS[name])
    assert syntax_bonus(ABS, PROGRAMS["identity"], reports["identity"]) == 1.0
    assert syntax_bonus(ABS, PROGRAMS["broken"], reports["broken"]) == 0.0
    assert naive_syntax_bonus(ABS, PROGRAMS["broken"], reports["broken"]) == 0.0


def test_length_penalty_counts_characters(reports):
    assert length_penalty(ABS, "", reports["empty"]) == 0.0
    assert length_penalty(ABS, PROGRAMS["identity"], reports["identity"]) == -len("    return x\n")
    r = ShapedReward("pass=1,length=0.01")
    c = PROGRAMS["solution"]
    assert math.isclose(r(ABS, c, reports["solution"]), 1 - 0.01 * len(c))  # the DeepSeek-Coder LoRA-RL report's r - alpha * length


def test_quality_reads_the_syntax_tree(reports):
    assert code_issues(ABS, PROGRAMS["solution"]) == []
    assert code_quality(ABS, PROGRAMS["solution"], reports["solution"]) == 1.0
    assert code_issues(ABS, PROGRAMS["constant"]) == ["unused argument 'x'"]
    assert code_quality(ABS, PROGRAMS["constant"], reports["constant"]) == 0.5
    assert any("unreachable" in i for i in code_issues(ABS, PROGRAMS["unreachable"]))
    assert code_quality(ABS, PROGRAMS["unreachable"], reports["unreachable"]) == 0.5
    for name in ("empty", "pass", "broken"):
        assert code_quality(ABS, PROGRAMS[name], reports[name]) == 0.0, name
    # unreachable code inside a nested block, and a break that ends a loop body
    loop = "    for i in range(3):\n        break\n        i += 1\n    return x\n"
    assert any("after break" in i for i in code_issues(ABS, loop))


def test_the_custom_hook_is_called_with_task_completion_and_report(reports):
    calls = []

    def shortness(task, completion, report):
        calls.append((task.id, completion, report.passed))
        return 1.0 / (1 + len(completion))

    r = ShapedReward("pass=1,short=2", custom={"short": shortness})
    value = r(ABS, PROGRAMS["solution"], reports["solution"])
    assert calls == [("abs_value", PROGRAMS["solution"], 3)]
    assert math.isclose(value, 1 + 2 / (1 + len(PROGRAMS["solution"])))
    assert r.drain() == [{"pass": 1.0, "short": 1 / (1 + len(PROGRAMS["solution"]))}] and r.history == []
    bad = ShapedReward("nan_term=1", custom={"nan_term": lambda *a: float("nan")})
    with pytest.raises(RewardSpecError, match="nan_term.*finite"):
        bad(ABS, "", reports["empty"])


def test_register_term_makes_a_term_known_to_specs(monkeypatch):
    monkeypatch.setattr(rewards, "TERMS", dict(rewards.TERMS))
    register_term("always_one", lambda task, completion, report: 1.0)
    assert RewardSpec.parse("always_one=1").names == ("always_one",)
    with pytest.raises(RewardSpecError, match="built-in"):
        register_term("pass", lambda *a: 0.0)
    with pytest.raises(RewardSpecError, match="identifier"):
        register_term("my term", lambda *a: 0.0)


@pytest.mark.parametrize("text, problem", [
    ("", "empty"),
    ("pass=1,bogus=0.5", "unknown term 'bogus'"),
    ("pass", "has no weight"),
    ("pass=one", "not a number"),
    ("pass=-1", "must be a finite number >= 0"),
    ("pass=inf", "must be a finite number >= 0"),
    ("pass=1,pass=2", "appears twice"),
    ("pass=0,length=0", "every weight is 0"),
])
def test_the_spec_parser_names_the_problem(text, problem):
    with pytest.raises(RewardSpecError, match=problem):
        RewardSpec.parse(text)


def test_spec_round_trip_and_spaces():
    spec = RewardSpec.parse(" pass = 1, fraction=0.5 ,syntax=0.1,length=0.002,quality=0.1")
    assert spec.weights == (("pass", 1.0), ("fraction", 0.5), ("syntax", 0.1), ("length", 0.002), ("quality", 0.1))
    assert RewardSpec.parse(str(spec)) == spec
    with pytest.raises(RewardSpecError, match="clash"):
        ShapedReward("pass=1", custom={"pass": lambda *a: 0.0})


# -- the trainer ---------------------------------------------------------------------------

TINY = dict(updates=2, episodes_per_update=8, group_size=4, minibatch_size=4, epochs=1, max_new_tokens=12,
            eval_every=0, bc_coef=0.0, sil_coef=0.0, temperature=1.0, explore_episodes=0)


def tiny_trainer(**changes):
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    return PPOTrainer(PPOConfig(**{**TINY, **changes}), model=model, tokenizer=tok, progress=False)


def test_the_trainer_refuses_a_bad_reward_spec():
    with pytest.raises(ConfigError, match="reward: .*unknown term 'bogus'"):
        PPOConfig(reward="pass=1,bogus=2")
    assert PPOConfig().reward == "fraction=1"  # chapter 6's reward stays the default


def test_the_trainer_logs_every_term_and_rewards_their_weighted_sum():
    trainer = tiny_trainer(reward="pass=1,syntax=0.5,length=0.01")
    for m in trainer.train():
        assert {f"term_{n}" for n in BUILTIN_TERMS} <= set(m)
        expected = m["term_pass"] + 0.5 * m["term_syntax"] + 0.01 * m["term_length"]
        assert math.isclose(m["reward_mean"], expected, abs_tol=1e-5), m
        assert m["term_length"] <= 0 and 0 <= m["term_naive_syntax"] <= 1


def test_the_default_reward_is_the_fraction_of_tests_passed():
    m = tiny_trainer().train()[0]
    assert math.isclose(m["reward_mean"], m["term_fraction"], abs_tol=1e-6)


def test_a_registered_term_is_called_by_the_trainer_once_per_episode(monkeypatch):
    monkeypatch.setattr(rewards, "TERMS", dict(rewards.TERMS))
    seen = []
    register_term("count_me", lambda task, completion, report: seen.append(task.split) or 1.0)
    trainer = tiny_trainer(reward="count_me=1", updates=1)
    m = trainer.train()[0]
    assert len(seen) == 8 and "test" not in seen
    assert m["reward_mean"] == 1.0 and m["term_count_me"] == 1.0


def test_the_length_penalty_counts_characters_or_tokens(reports):
    """One penalty, two units: 'length' (characters, chapter 7) and 'tokens' (per 100 tokens, the
    DeepSeek-Coder LoRA-RL report's, chapter 10). A term with an n_tokens parameter is given the count."""
    reward = ShapedReward("pass=1,tokens=0.01,length=0.001")
    solution = PROGRAMS["solution"]
    value = reward(ABS, solution, reports["solution"], n_tokens=50)
    assert value == 1.0 + 0.01 * (-50 / 100) + 0.001 * -len(solution)
    assert reward.drain() == [{"pass": 1.0, "tokens": -0.5, "length": -float(len(solution))}]
    with pytest.raises(RewardSpecError, match="n_tokens="):
        reward(ABS, solution, reports["solution"])  # the token count is not known: say how to give it
    seen = []
    mine = ShapedReward("mine=1", custom={"mine": lambda task, completion, report, n_tokens: seen.append(n_tokens) or 0.0})
    mine(ABS, "", reports["empty"], n_tokens=7)
    assert seen == [7]
