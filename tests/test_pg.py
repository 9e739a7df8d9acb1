"""REINFORCE and its baselines (course_lib.gru.pg): the estimate is right on average, a baseline keeps it right
and makes it less noisy, and padding never counts."""

import numpy as np
import pytest
import torch

from course_lib.gru.pg import (BernoulliBandit, RunningMeanBaseline, SoftmaxPolicy, analytic_gradient,
                               grad_variance, gru_policy, leave_one_out_baseline, sequence_logprobs)
from course_lib.core.losses import reinforce_loss, value_loss

MEANS = [0.2, 0.7]


def _policy(logits):
    policy = SoftmaxPolicy(len(logits))
    with torch.no_grad():
        policy.logits.copy_(torch.tensor(logits))
    return policy


def _bandit_stats(policy, baseline, repeats=200, batch=256, offset=0.0):
    bandit = BernoulliBandit(MEANS, seed=1)
    gen = torch.Generator().manual_seed(2)

    def loss_fn(r):
        arms, logprobs = policy.sample(batch, generator=gen)
        return reinforce_loss(logprobs, bandit.pull(arms) + offset, baseline)

    return grad_variance(loss_fn, [policy.logits], repeats)


def test_reinforce_matches_the_analytic_gradient_on_a_two_armed_bandit():
    policy = _policy([0.3, -0.2])
    exact = analytic_gradient(policy.probs().detach(), torch.tensor(MEANS))
    stats = _bandit_stats(policy, baseline=None)
    # the loss is -J, so its gradient is -grad J; the average of 200 x 256 samples is within a few percent
    assert torch.allclose(-stats.mean, exact, atol=0.01), (stats.mean, exact)
    assert abs(float(exact.sum())) < 1e-6  # softmax: adding a constant to all logits changes nothing


def test_a_baseline_keeps_the_expected_gradient_and_reduces_its_variance():
    policy = _policy([0.3, -0.2])
    exact = analytic_gradient(policy.probs().detach(), torch.tensor(MEANS))
    expected_reward = float((policy.probs().detach().double() * torch.tensor(MEANS)).sum())
    plain = _bandit_stats(policy, baseline=None, offset=1.0)   # rewards 1 or 2: far from 0
    based = _bandit_stats(policy, baseline=expected_reward + 1.0, offset=1.0)
    assert torch.allclose(-plain.mean, exact, atol=0.02) and torch.allclose(-based.mean, exact, atol=0.01)
    assert based.variance < plain.variance / 5, (based.variance, plain.variance)


def test_reinforce_loss_ignores_padding_even_when_it_holds_infinities():
    logprobs = torch.tensor([[-0.5, -1.0, -0.2], [-0.3, -0.7, -0.1]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    returns = torch.tensor([1.0, 0.5])
    loss = reinforce_loss(logprobs, returns, baseline=0.25, mask=mask)
    by_hand = -((-0.5 - 1.0) * 0.75 + (-0.3) * 0.25) / 2
    assert loss.item() == pytest.approx(by_hand)
    loss.backward()
    assert torch.allclose(logprobs.grad, torch.tensor([[-0.375, -0.375, 0.0], [-0.125, 0.0, 0.0]]))
    padded = torch.tensor([[-0.5, -1.0, float("-inf")], [-0.3, float("nan"), 5.0]], requires_grad=True)
    same = reinforce_loss(padded, returns, baseline=0.25, mask=mask)
    assert same.item() == pytest.approx(by_hand)
    same.backward()
    assert torch.isfinite(padded.grad).all()


def test_value_loss_and_baselines():
    values = torch.tensor([[0.5, 0.0], [1.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert value_loss(values, torch.tensor([1.0, 1.0]), mask).item() == pytest.approx(0.5 * (0.25 + 1.0 + 0.0) / 3)
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.5, 0.5, 1.0])
    assert torch.allclose(leave_one_out_baseline(rewards, 3), torch.tensor([0.0, 0.5, 0.5, 0.75, 0.75, 0.5]))
    with pytest.raises(ValueError, match="groups"):
        leave_one_out_baseline(rewards, 4)
    running = RunningMeanBaseline(decay=0.5)
    assert running.update([1.0, 0.0]) == 0.5 and running.update([1.0]) == 0.75


def test_sequence_logprobs_match_step_by_step_decoding_and_ignore_padding():
    from course_lib.gru.models import GRUConfig, GRUPolicy
    from course_lib.tokenizers import CharTokenizer

    tok = CharTokenizer("abc\n ")
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    allowed = [tok.eos_id] + tok.token_ids("abc")
    prompts, completions = ["ab\n", "c"], [tok.encode("cab") + [tok.eos_id], tok.encode("a")]
    scores = sequence_logprobs(model, tok, prompts, completions, allowed_ids=allowed)
    assert scores.mask.tolist() == [[1, 1, 1, 1], [1, 0, 0, 0]]
    assert (scores.logprobs[1, 1:] == 0).all() and torch.isfinite(scores.logprobs).all()
    # the same numbers, one token at a time, as the sampler sees them
    for i, (p, c) in enumerate(zip(prompts, completions)):
        logits, value, hidden = model.prefill([tok.encode(p, add_bos=True)])
        for t, a in enumerate(c):
            masked = torch.full_like(logits, float("-inf"))
            masked[:, allowed] = logits[:, allowed]
            assert torch.log_softmax(masked, -1)[0, a].item() == pytest.approx(scores.logprobs[i, t].item(), abs=1e-5)
            assert value.item() == pytest.approx(scores.values[i, t].item(), abs=1e-5)
            logits, value, hidden = model.step(torch.tensor([a]), hidden)
    # a third, longer row adds padding to the first two: their scores do not change
    longer = sequence_logprobs(model, tok, prompts + ["a"], completions + [tok.encode("abcabcab")], allowed_ids=allowed)
    assert torch.allclose(longer.logprobs[:2, :4], scores.logprobs, atol=1e-6)


def test_gru_policy_writes_through_the_environment_within_the_mask():
    from course_lib.gru.batched_env import rollout_batch
    from course_lib.gru.models import GRUConfig, GRUPolicy
    from course_lib.tasks import load_tasks
    from course_lib.tokenizers import course_tokenizer

    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    tasks = load_tasks("train")[:2]
    alphabet = np.array(sorted(tok.token_ids("ab1+ \n") + [tok.eos_id]))
    episodes = rollout_batch(gru_policy(model, tok, generator=torch.Generator().manual_seed(0)), tasks, n=2,
                             tokenizer=tok, max_new_tokens=12, alphabet=alphabet, score=False)
    assert len(episodes) == 4 and all(e.out_of_mask == 0 and 1 <= e.steps <= 12 for e in episodes)
    assert all(set(e.actions) <= set(alphabet.tolist()) for e in episodes)
    scores = sequence_logprobs(model, tok, [t.prompt for t in tasks for _ in range(2)],
                               [e.actions for e in episodes], allowed_ids=alphabet)
    assert torch.isfinite(scores.logprobs).all() and (scores.logprobs <= 0).all()
