"""PPO's maths checked against hand computations."""

import math

import pytest
import torch

from course_lib.core.advantages import compute_gae, normalize_advantages
from course_lib.core.losses import explained_variance, masked_mean, ppo_loss
from course_lib.core.schedules import warmup_cosine


def test_gae_matches_a_hand_computed_episode():
    # One terminated episode of 3 steps, reward only at the end (as in the code environment).
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.7]])
    mask = torch.ones(1, 3)
    gamma, lam = 0.9, 0.8
    adv, ret = compute_gae(rewards, values, mask, gamma=gamma, lam=lam)
    d2 = 1.0 + gamma * 0.0 - 0.7          # terminated: nothing after the last step
    d1 = 0.0 + gamma * 0.7 - 0.6
    d0 = 0.0 + gamma * 0.6 - 0.5
    a2 = d2
    a1 = d1 + gamma * lam * a2
    a0 = d0 + gamma * lam * a1
    assert torch.allclose(adv, torch.tensor([[a0, a1, a2]]))
    assert torch.allclose(ret, adv + values)


def test_gae_bootstraps_only_truncated_episodes_and_ignores_padding():
    rewards = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    values = torch.tensor([[0.2, 0.3, 0.4], [0.5, 0.6, 9.9]])   # 9.9 sits on padding
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    bootstrap = torch.tensor([0.8, 0.0])   # episode 0 truncated (critic says 0.8), episode 1 terminated
    adv, _ = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0, bootstrap_values=bootstrap)
    # lambda = gamma = 1: A_t = (sum of future rewards + bootstrap) - V(s_t)
    assert torch.allclose(adv[0], torch.tensor([0.8 - 0.2, 0.8 - 0.3, 0.8 - 0.4]))
    assert torch.allclose(adv[1], torch.tensor([1.0 - 0.5, 1.0 - 0.6, 0.0]))


def test_gae_lambda_zero_is_one_step_td():
    rewards = torch.tensor([[0.1, 0.2, 0.3]])
    values = torch.tensor([[1.0, 2.0, 3.0]])
    adv, _ = compute_gae(rewards, values, torch.ones(1, 3), gamma=0.5, lam=0.0)
    assert torch.allclose(adv, torch.tensor([[0.1 + 0.5 * 2 - 1, 0.2 + 0.5 * 3 - 2, 0.3 - 3]]))


def test_normalize_advantages_uses_real_steps_only():
    adv = torch.tensor([[1.0, 3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = normalize_advantages(adv, mask)
    assert torch.allclose(out, torch.tensor([[-1.0, 1.0, 0.0]]), atol=1e-6)


def direct_ppo_loss(new_lp, old_lp, adv, mask, eps, new_v, old_v, ret, veps, ent, vf, ec):
    """The same objective written element by element, as in the paper."""
    terms, vterms, eterms, n = 0.0, 0.0, 0.0, 0
    for i in range(len(new_lp)):
        for t in range(len(new_lp[0])):
            if mask[i][t] == 0:
                continue
            r = math.exp(new_lp[i][t] - old_lp[i][t])
            a = adv[i][t]
            terms += min(r * a, max(min(r, 1 + eps), 1 - eps) * a)
            vc = old_v[i][t] + max(min(new_v[i][t] - old_v[i][t], veps), -veps)
            vterms += max((new_v[i][t] - ret[i][t]) ** 2, (vc - ret[i][t]) ** 2)
            eterms += ent[i][t]
            n += 1
    return -terms / n + vf * 0.5 * vterms / n - ec * eterms / n


def test_ppo_loss_matches_a_direct_computation():
    g = torch.Generator().manual_seed(0)
    shape = (3, 5)
    new_lp = -torch.rand(shape, generator=g)
    old_lp = -torch.rand(shape, generator=g)
    adv = torch.randn(shape, generator=g)
    new_v, old_v, ret = (torch.randn(shape, generator=g) for _ in range(3))
    ent = torch.rand(shape, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float32)
    loss, stats = ppo_loss(new_lp, old_lp, adv, mask, clip_eps=0.2, new_values=new_v, old_values=old_v,
                           returns=ret, value_clip_eps=0.3, entropy=ent, vf_coef=0.5, ent_coef=0.01)
    expected = direct_ppo_loss(new_lp.tolist(), old_lp.tolist(), adv.tolist(), mask.tolist(), 0.2,
                               new_v.tolist(), old_v.tolist(), ret.tolist(), 0.3, ent.tolist(), 0.5, 0.01)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    ratio = (new_lp - old_lp).exp()
    real = mask.bool()
    assert stats["clip_frac"] == pytest.approx(((ratio[real] - 1).abs() > 0.2).float().mean().item())
    assert stats["approx_kl"] >= 0


def test_ppo_loss_gradient_is_zero_once_clipped_in_the_advantage_direction():
    old = torch.zeros(1, 1)
    new = torch.full((1, 1), math.log(1.5), requires_grad=True)   # ratio 1.5 > 1 + eps
    loss, stats = ppo_loss(new, old, torch.ones(1, 1), torch.ones(1, 1), clip_eps=0.2)
    loss.backward()
    assert new.grad.item() == 0.0 and stats["clip_frac"] == 1.0
    new2 = torch.full((1, 1), math.log(1.5), requires_grad=True)   # negative advantage: not clipped
    loss2, _ = ppo_loss(new2, old, -torch.ones(1, 1), torch.ones(1, 1), clip_eps=0.2)
    loss2.backward()
    assert new2.grad.item() == pytest.approx(1.5)


def test_kl_to_reference_is_zero_at_the_reference_and_positive_elsewhere():
    lp = torch.log(torch.tensor([[0.5, 0.25]]))
    mask = torch.ones(1, 2)
    _, same = ppo_loss(lp, lp, torch.zeros(1, 2), mask, ref_logprobs=lp, kl_coef=0.1)
    _, diff = ppo_loss(lp, lp, torch.zeros(1, 2), mask, ref_logprobs=lp - 0.3, kl_coef=0.1)
    assert same["kl_ref"] == pytest.approx(0.0) and diff["kl_ref"] > 0


def test_explained_variance():
    ret = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones(1, 4)
    assert explained_variance(ret, ret, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(ret, 2.5), ret, mask) == pytest.approx(0.0)


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 100, 10) == pytest.approx(0.1)
    assert warmup_cosine(9, 100, 10) == pytest.approx(1.0)
    assert warmup_cosine(100, 100, 10) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="total_steps"):
        warmup_cosine(0, 0, 0)


def test_masked_mean_ignores_padding():
    assert masked_mean(torch.tensor([1.0, 3.0, 50.0]), torch.tensor([1.0, 1.0, 0.0])).item() == 2.0
