"""Chapter 5's REINFORCE (course_lib.gru.reinforce): the RL core's Trainer with the GRU and four baselines.

What is checked: the step is one gradient step on -(R - b) log pi with the baseline each name promises,
computed by hand with `pg.sequence_logprobs` and `pg.reinforce_loss`; the critic learns only as the baseline.
"""

from __future__ import annotations

import copy

import pytest
import torch

from course_lib.core import rl
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.gru.pg import init_critic, leave_one_out_baseline, sequence_logprobs
from course_lib.core.losses import reinforce_loss, value_loss
from course_lib.gru.reinforce import BASELINES, ReinforceTrainer, train_reinforce
from course_lib.tokenizers import course_tokenizer


def length_reward(task, completion, report) -> float:
    """A reward that varies between samples even for an untrained model: the completion's length mod 3."""
    return (len(completion) % 3) / 2


@pytest.fixture(scope="module")
def setup(tasks):
    tokenizer = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tokenizer), embed_dim=8, hidden_dim=16))
    init_critic(model, 0.3)
    return model, tokenizer, [t for t in tasks if t.split == "train"][:3]


@pytest.mark.parametrize("baseline", BASELINES)
def test_a_reinforce_step_is_one_gradient_step_on_minus_r_minus_b_log_pi(setup, baseline):
    model, tokenizer, tasks = setup
    n = 3
    settings = dict(samples_per_task=n, lr=0.01, baseline=baseline, max_new_tokens=10, seed=0,
                    reward_fn=length_reward, clip_norm=1e9, vf_coef=0.5)
    trainer = ReinforceTrainer(copy.deepcopy(model), tokenizer, tasks, **settings)
    if baseline == "mean":  # the running mean of EARLIER batches: 0 before the first, then the first's mean
        trainer.step()
    before = copy.deepcopy(trainer.model)
    ro, _ = trainer.collect()
    R = ro.rewards.sum(1)
    assert len(set(R.tolist())) > 1  # the rewards differ, so every baseline changes the gradient
    scores = sequence_logprobs(before, tokenizer, [t.prompt for t in ro.tasks], [e.actions for e in ro.episodes],
                               allowed_ids=trainer.alphabet)
    b = {"none": torch.zeros_like(R), "leave_one_out": leave_one_out_baseline(R, n),
         "value": scores.values.detach()}.get(baseline)
    if baseline == "mean":
        b = torch.full_like(R, trainer.history[0]["reward"])
    assert torch.allclose(ro.values, (b[:, None] if b.dim() == 1 else b) * ro.mask, atol=1e-6)
    loss = reinforce_loss(scores.logprobs, R, b, scores.mask)
    if baseline == "value":
        loss = loss + 0.5 * value_loss(scores.values, R, scores.mask)
    loss.backward()
    by_hand = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in before.parameters()]

    adv, returns = rl.advantages(ro, trainer.estimator)
    logs, epochs, _ = rl.learn(trainer.actor, ro, adv, returns, trainer.loss_settings, torch.optim.SGD(
        trainer.params, lr=0.0), trainer.params, trainer.rng)
    assert epochs == 1 and len(logs) == 1  # one pass, one gradient step
    grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in trainer.params]
    for g, expected in zip(grads, by_hand):
        assert torch.allclose(g, expected, atol=1e-6)
    critic = trainer.model.value_head.weight.grad
    assert (critic is not None and critic.abs().sum() > 0) == (baseline == "value")  # it learns only as the baseline


def test_train_reinforce_logs_one_row_per_update_and_refuses_bad_settings(setup):
    model, tokenizer, tasks = setup
    history = train_reinforce(copy.deepcopy(model), tokenizer, tasks, updates=2, samples_per_task=2, lr=0.01,
                              baseline="leave_one_out", max_new_tokens=8, reward_fn=length_reward, progress=False)
    assert [h["update"] for h in history] == [0, 1]
    assert all(len(h["rewards"]) == 6 and h["length"] >= 1 and h["grad_norm"] >= 0 for h in history)
    with pytest.raises(ValueError, match="unknown baseline 'critic'"):
        ReinforceTrainer(model, tokenizer, tasks, samples_per_task=2, lr=0.01, baseline="critic")
    with pytest.raises(ValueError, match="samples_per_task must be >= 2"):
        ReinforceTrainer(model, tokenizer, tasks, samples_per_task=1, lr=0.01, baseline="leave_one_out")
