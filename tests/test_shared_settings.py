"""One name per setting across both policies: the knobs the GRU's PPOConfig and the language model's RLConfig
share are declared once, in course_lib.core.rl.RLSettings, with one help and one check; each policy gives only
its own default. A config stored under an old name (course_lib.config.RENAMED) still loads."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from course_lib.cli import llm_cli, ppo_cli
from course_lib.config import RENAMED, ConfigError, renamed
from course_lib.core import rl
from course_lib.gru.ppo_config import PPOConfig
from course_lib.lm.llm_rl import RLConfig

# each shared knob: (the GRU's default, the language model's default)
SHARED = {"group_size": (8, 4), "max_grad_norm": (1.0, 1.0), "sandbox_timeout": (2.0, 2.0),
          "rollout_splits": (("train", "val"), ("train", "val"))}


def _fields(cls) -> dict:
    return {f.name: f for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", SHARED)
def test_each_shared_knob_has_one_name_one_help_and_each_policys_default(name):
    base = _fields(rl.RLSettings)[name]
    for cls, default in zip((PPOConfig, RLConfig), SHARED[name]):
        field = _fields(cls)[name]
        assert dict(field.metadata) == dict(base.metadata)  # the base's help and type: declared once
        assert field.default == default and getattr(cls(), name) == default


def test_no_knob_is_declared_twice_and_no_old_name_is_left():
    gru, lm, base = _fields(PPOConfig), _fields(RLConfig), _fields(rl.RLSettings)
    assert set(gru) & set(lm) <= set(base), sorted(set(gru) & set(lm) - set(base))
    assert not set(RENAMED) & (set(gru) | set(lm)), "an old name is a field again"
    assert set(RENAMED.values()) <= set(base)


@pytest.mark.parametrize("cls", [PPOConfig, RLConfig])
@pytest.mark.parametrize("change, message", [
    (dict(method="grpo", group_size=1), "group_size must be >= 2"), (dict(group_size=0), "group_size must be at least 1"),
    (dict(max_grad_norm=0.0), "max_grad_norm must be positive"),
    (dict(sandbox_timeout=-1.0), "sandbox_timeout must be positive"),
    (dict(rollout_splits=("train", "test")), "never trained on"), (dict(rollout_splits=("dev",)), "unknown split"),
])
def test_both_policies_check_a_shared_knob_the_same_way(cls, change, message):
    with pytest.raises(ConfigError, match=message):
        cls(**change)


def test_rollout_splits_read_as_a_list_or_a_comma_separated_string():
    for value in ("train", ["train"], "train,", ("train",)):
        assert PPOConfig(rollout_splits=value).rollout_splits == ("train",)
    assert RLConfig.from_dict({"rollout_splits": "val,train"}).rollout_splits == ("val", "train")


def test_a_config_stored_under_the_old_names_still_loads(tmp_path):
    """A run's config.json (resume, ppo_benchmark) or a state's settings written before the rename."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"episodes_per_task": 4, "rl_splits": "train,val", "sandbox_timeout": 3.0,
                                "max_grad_norm": 0.5, "episodes_per_update": 16, "minibatch_size": 8}))
    gru = PPOConfig.load(path)
    assert (gru.group_size, gru.rollout_splits, gru.sandbox_timeout, gru.max_grad_norm) == (4, ("train", "val"), 3.0, 0.5)
    lm = RLConfig.from_dict({"group_size": 2, "splits": ["val"], "timeout": 1.5, "clip_norm": 0.25})
    assert (lm.group_size, lm.rollout_splits, lm.sandbox_timeout, lm.max_grad_norm) == (2, ("val",), 1.5, 0.25)
    old_state = {**dataclasses.asdict(RLConfig()), "splits": ["train", "val"], "timeout": 2.0, "clip_norm": 1.0}
    for new in ("rollout_splits", "sandbox_timeout", "max_grad_norm"):
        del old_state[new]
    assert renamed(old_state) == {**dataclasses.asdict(RLConfig()), "rollout_splits": ["train", "val"]}
    with pytest.raises(ConfigError, match="unknown setting"):
        PPOConfig.from_dict({"episode_per_task": 4})  # a misspelt name is still an error


def test_both_commands_take_the_shared_knobs_under_the_same_option_names():
    options = ["--max-grad-norm", "0.5", "--sandbox-timeout", "3", "--rollout-splits", "train"]
    gru = argparse.ArgumentParser()
    ppo_cli.add_arguments(gru)
    config = ppo_cli.config_from_args(gru.parse_args(["--out", "x", "--group-size", "4", *options]))
    assert (config.group_size, config.max_grad_norm, config.sandbox_timeout, config.rollout_splits) == \
        (4, 0.5, 3.0, ("train",))
    lm = argparse.ArgumentParser()
    llm_cli.add_rl_arguments(lm)
    args = lm.parse_args(options)
    assert (args.max_grad_norm, args.sandbox_timeout, args.rollout_splits) == (0.5, 3.0, ["train"])
    assert {"--group-size", "--rollout-splits"} <= set(gru._option_string_actions) & set(lm._option_string_actions)


# a setting the chosen method would not read: (policy settings, method, setting, a value other than its default)
UNUSED = [
    (PPOConfig, "reinforce", "epochs", 4), (PPOConfig, "reinforce", "clip_eps", 0.3),
    (PPOConfig, "reinforce", "ent_coef", 0.05), (PPOConfig, "reinforce", "target_kl", 0.1),
    (PPOConfig, "grpo", "gae_lambda", 0.9), (PPOConfig, "grpo", "vf_coef", 1.0), (PPOConfig, "grpo", "critic", False),
    (PPOConfig, "grpo", "gamma", 0.99), (PPOConfig, "grpo", "norm_adv", False),
    (RLConfig, "reinforce", "epochs", 4), (RLConfig, "grpo", "gae_lambda", 0.9), (RLConfig, "grpo", "vf_coef", 1.0),
    (RLConfig, "ppo", "min_std", 0.1), (RLConfig, "grpo", "teacher_sft_weight", 0.5),
]


@pytest.mark.parametrize("cls, method, name, value", UNUSED)
def test_a_setting_the_method_does_not_read_is_an_error_that_names_it(cls, method, name, value):
    with pytest.raises(ConfigError, match=rf"{name}={value!r}: {method}.*would be ignored.*default"):
        cls(method=method, **{name: value, **({"group_size": 4} if method == "grpo" else {})})
    cls(method=method)  # left at its default, it is no error


def test_the_gru_without_a_critic_refuses_the_critic_settings():
    with pytest.raises(ConfigError, match="vf_coef=1.0: ppo without a critic"):
        PPOConfig(critic=False, vf_coef=1.0)
    PPOConfig(critic=False, gae_lambda=0.9)  # GAE with V = 0 still reads lambda


@pytest.mark.parametrize("cls", [PPOConfig, RLConfig])
def test_with_method_compares_methods_on_one_set_of_settings(cls):
    tuned = cls(method="ppo", epochs=4, clip_eps=0.3, gae_lambda=0.9, vf_coef=1.0, kl_coef=0.1)
    plain = tuned.with_method("reinforce")  # what reinforce does not read returns to its default
    defaults = cls()
    assert plain.method == "reinforce" and plain.lr == tuned.lr
    for name in ("epochs", "clip_eps", "gae_lambda", "vf_coef", "kl_coef"):
        assert getattr(plain, name) == getattr(defaults, name), name
    grouped = tuned.with_method("grpo")
    assert (grouped.epochs, grouped.clip_eps, grouped.kl_coef) == (4, 0.3, 0.1)  # grpo reads them: kept
    assert grouped.gae_lambda == defaults.gae_lambda
