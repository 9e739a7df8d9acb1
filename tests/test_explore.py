"""Epsilon-greedy exploration (course_lib.gru.explore) and its use by the trainer: search near the greedy program."""

from __future__ import annotations

import pytest
import torch

from course_lib.gru.explore import epsilon_greedy, epsilon_greedy_generate, explore
from course_lib.gru.models import GRUConfig, GRUPolicy, generate
from course_lib.tasks import load_tasks
from course_lib.tokenizers import course_tokenizer
from course_lib.gru.trainer import ConfigError, PPOConfig, PPOTrainer
from toy_tasks import write_toy_tasks  # tests/toy_tasks.py

NEG = float("-inf")


def test_epsilon_zero_is_greedy_and_epsilon_one_never_is():
    logits = torch.tensor([[0.0, 3.0, 1.0, NEG], [2.0, NEG, 0.0, 1.0]]).repeat(500, 1)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(epsilon_greedy(logits, epsilon=0.0, generator=g), logits.argmax(-1))
    changed = epsilon_greedy(logits, epsilon=1.0, generator=g)
    assert not (changed == logits.argmax(-1)).any()                  # always another token...
    assert torch.isfinite(logits.gather(-1, changed[:, None])).all()  # ...and never a forbidden one


def test_the_changed_token_follows_the_policy_without_its_best():
    logits = torch.tensor([[0.0, 3.0, 1.0, NEG]]).repeat(20000, 1)
    token = epsilon_greedy(logits, epsilon=1.0, temperature=1.0, generator=torch.Generator().manual_seed(1))
    share_of_2 = (token == 2).float().mean().item()
    expected = torch.softmax(torch.tensor([0.0, 1.0]), 0)[1].item()  # token 2 against token 0, token 1 left out
    assert abs(share_of_2 - expected) < 0.02, (share_of_2, expected)


def test_epsilon_sets_how_often_the_greedy_choice_is_left():
    logits = torch.tensor([[0.0, 3.0, 1.0]]).repeat(20000, 1)
    token = epsilon_greedy(logits, epsilon=0.1, generator=torch.Generator().manual_seed(2))
    assert abs((token != 1).float().mean().item() - 0.1) < 0.01


def test_a_row_with_one_allowed_token_keeps_it():
    logits = torch.tensor([[NEG, 0.5, NEG]])
    assert epsilon_greedy(logits, epsilon=1.0).item() == 1


@pytest.mark.parametrize("kwargs, message", [(dict(epsilon=1.5), "epsilon is a probability"),
                                             (dict(epsilon=0.1, temperature=0.0), "temperature must be > 0")])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        epsilon_greedy(torch.zeros(1, 3), **kwargs)


def test_epsilon_zero_writes_the_greedy_program():
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    prompts = [t.prompt for t in load_tasks("val")[:3]]
    assert epsilon_greedy_generate(model, tok, prompts, epsilon=0.0, max_new_tokens=12) == \
        generate(model, tok, prompts, max_new_tokens=12, greedy=True)


def test_test_tasks_are_never_explored():
    tok = course_tokenizer()
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    with pytest.raises(ValueError, match="never explored"):
        explore(model, tok, load_tasks("test")[:1], epsilon=0.1)


def test_the_trainer_keeps_what_exploration_finds_for_self_imitation_only(tmp_path):
    write_toy_tasks(tmp_path)  # `nothing_val` passes when the program stops at once
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    config = PPOConfig(tasks_dir=str(tmp_path), updates=2, episodes_per_update=8, group_size=4,
                       minibatch_size=8, max_new_tokens=6, eval_every=0, explore_episodes=64, explore_epsilon=0.9)
    trainer = PPOTrainer(config, model=model, tokenizer=tok, progress=False)
    first = trainer.step()
    assert first["explore_episodes"] == 64 and first["explore_pass_rate"] > 0
    assert "nothing_val" in trainer.passing.programs        # found by search: self-imitation will teach it
    assert first["episodes"] <= config.episodes_per_update  # the PPO batch: the policy's own samples only
    assert trainer.step()["explore_episodes"] == 0          # nothing left to find: no exploring episodes


@pytest.mark.parametrize("change, message", [(dict(explore_episodes=-1), "explore_episodes must be >= 0"),
                                             (dict(explore_epsilon=2.0), "explore_epsilon is a probability"),
                                             (dict(explore_temperature=0.0), "explore_temperature must be positive")])
def test_bad_exploration_settings_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        PPOConfig(**change)
