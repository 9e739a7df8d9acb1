"""The RL core (course_lib.core.rl): one update for both policies, the GRU and the language model.

What is checked: both go through the same `rl.learn` (a chapter swaps the policy, never the loop);
the language model scores exactly the ids it sampled; the advantage estimators by hand; the method table
that both policies' settings read, and the setting a method cannot use refused.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.lm import llm_rl, lm_policy
from course_lib.config import ConfigError
from course_lib.core import rl, update
from course_lib.core.advantages import compute_gae, normalize_advantages
from course_lib.core.rollout import Rollout
from course_lib.gru.trainer import PPOConfig, PPOTrainer

GRU_RUN = dict(hidden_dim=16, embed_dim=8, pretrain_epochs=1, updates=1, episodes_per_update=8, group_size=2,
               minibatch_size=4, epochs=2, max_new_tokens=12, eval_every=0, explore_episodes=0, teacher_batch_size=4)


def spy_on_the_core(monkeypatch) -> list:
    """Wrap rl.Trainer.step and rl.learn so that each call records (who stepped, which policy learned)."""
    calls, real_step, real_learn = [], rl.Trainer.step, rl.learn

    def step(self):
        calls.append(("step", type(self).__name__))
        return real_step(self)

    def learn(policy, *args, **kwargs):
        calls.append(("learn", type(policy).__name__))
        return real_learn(policy, *args, **kwargs)

    monkeypatch.setattr(rl.Trainer, "step", step)
    monkeypatch.setattr(rl, "learn", learn)
    return calls


class Bandit(torch.nn.Module):
    """A one-step policy over 5 actions: the smallest thing the core can train. It counts the rows of
    every reference_logprobs call, and answers the uniform policy's log-probabilities."""

    def __init__(self):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(5))
        self.reference_calls = []

    def score(self, ro, rows):
        return torch.log_softmax(self.logits, -1)[ro.actions[rows, :1]], None, None

    def reference_logprobs(self, ro, rows):
        self.reference_calls.append(rows.tolist())
        return torch.full((len(rows), 1), float(np.log(0.2)))


def bandit_rollout(B: int, rewarded: int) -> tuple[Rollout, torch.Tensor, torch.Tensor]:
    """B one-step episodes of actions 0, 1, 2, 3, 4, 0, ... sampled uniformly, reward 1 for `rewarded`:
    (the rollout, its batch-mean advantages, its returns)."""
    actions = torch.arange(B)[:, None] % 5
    ro = Rollout(tasks=[None] * B, episodes=[], prompts=[[0]], prompt_index=torch.zeros(B, dtype=torch.long),
                 actions=actions, logprobs=torch.full((B, 1), float(np.log(0.2))), values=torch.zeros(B, 1),
                 mask=torch.ones(B, 1), rewards=(actions == rewarded).float(), bootstrap=torch.zeros(B))
    return (ro, *rl.advantages(ro, "batch"))


def test_the_gru_and_the_language_model_go_through_the_same_trainer_step(small_dir, tasks, monkeypatch):
    """Chapter 6's GRU and chapter 10's language model (each of its methods) take the same rl.Trainer.step,
    which calls the same rl.learn: neither trainer overrides the step."""
    assert "step" not in vars(PPOTrainer) and "step" not in vars(llm_rl.LMTrainer)
    calls = spy_on_the_core(monkeypatch)
    PPOTrainer(PPOConfig(**GRU_RUN), None, progress=False).train()            # chapter 6's loop
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)      # chapter 10's
    for method in rl.METHODS:
        llm_rl.train_rl(model, tokenizer, [t for t in tasks if t.split == "train"], method=method, steps=1,
                        prompts_per_step=2, group_size=2, max_new_tokens=8, progress=False)
    assert calls == [("step", "PPOTrainer"), ("learn", "GRUActor")] + [("step", "LMTrainer"), ("learn", "LMActor")] * 4


def test_the_language_model_scores_the_ids_it_sampled(small_dir, tasks):
    """The rollout keeps the sampled ids; their log-probabilities, read in one padded batch, equal those of
    each prompt + ids read alone (no re-tokenisation of the text, no padding or position error)."""
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    config = llm_rl.RLConfig(group_size=3, max_new_tokens=10, temperature=1.0)
    pool = [t for t in tasks if t.split == "train"][:3]
    ro = llm_rl.rollout(model, tokenizer, pool, config, seed=0)
    assert ro.actions.shape[0] == 9 and len(ro.episodes) == 9
    for i, episode in enumerate(ro.episodes):
        n = int(ro.mask[i].sum())
        assert ro.actions[i, :n].tolist() == episode.actions and n >= 1
        prompt = ro.prompts[int(ro.prompt_index[i])]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + episode.actions])).logits[0].float()
        by_hand = torch.log_softmax(logits[len(prompt) - 1:len(prompt) - 1 + n], -1)
        by_hand = by_hand.gather(-1, torch.tensor(episode.actions)[:, None]).squeeze(-1)
        assert torch.allclose(ro.logprobs[i, :n], by_hand, atol=1e-4)
        assert torch.all(ro.logprobs[i, n:] == 0)
        assert ro.rewards[i, n - 1] == pytest.approx(episode.reward) and ro.rewards[i].sum() == pytest.approx(episode.reward)
    actor = lm_policy.LMActor(model, tokenizer, config.temperature)
    rows = torch.tensor([1, 4, 8])
    logprobs, entropy, values = actor.score(ro, rows)
    assert torch.allclose(logprobs, ro.logprobs[rows, :logprobs.shape[1]], atol=1e-5) and values is None



def test_rows_of_similar_length_scored_in_chunks_give_one_pass_s_numbers_and_gradients(small_dir, tasks):
    """`LMActor` scores a rollout in length-sorted chunks (`score_tokens`): the same log-probabilities,
    values and LoRA gradients as one padded pass over every row, up to float32 rounding."""
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    config = llm_rl.RLConfig(group_size=4, max_new_tokens=24, temperature=1.0)
    ro = llm_rl.rollout(model, tokenizer, [t for t in tasks if t.split == "train"][:3], config, seed=1)
    rows = torch.tensor([0, 2, 3, 5, 6, 7, 8, 9, 11])
    lengths = ro.mask[rows].sum(1)
    assert lengths.max() > lengths.min()  # completions of different lengths, so the chunks differ from one pass
    head = lm_policy.value_head_for(model)
    torch.nn.init.normal_(head.weight, std=0.1)
    one_pass = lm_policy.LMActor(model, tokenizer, 1.0, head, score_tokens=None)
    widest = max(len(p) for p in ro.prompts) + int(lengths.max())
    chunked = lm_policy.LMActor(model, tokenizer, 1.0, head, score_tokens=2 * widest)
    chunks = lm_policy.length_chunks(ro, rows, 2 * widest)
    assert len(chunks) >= 3 and sorted(torch.cat(chunks).tolist()) == list(range(len(rows)))
    assert all(len(c) <= 2 for c in chunks)
    grads = []
    for actor in (one_pass, chunked):
        model.zero_grad()
        head.zero_grad()
        logprobs, _, values = actor.score(ro, rows)
        (logprobs.sum() + values.sum()).backward()
        grads.append([p.grad.clone() for p in list(model.parameters()) + list(head.parameters()) if p.requires_grad])
        if actor is one_pass:
            expected = (logprobs.detach(), values.detach())
    assert logprobs.shape == expected[0].shape and torch.allclose(logprobs, expected[0], atol=1e-4)
    assert torch.allclose(values, expected[1], atol=1e-4)
    assert all(torch.allclose(a, b, rtol=1e-3, atol=1e-5) for a, b in zip(*grads))
    with torch.no_grad():
        assert torch.allclose(chunked.reference_logprobs(ro, rows), one_pass.reference_logprobs(ro, rows), atol=1e-4)
    bf16 = lm_policy.LMActor(model, tokenizer, 1.0, dtype="bfloat16")
    with torch.no_grad():
        coarse = bf16.score(ro, rows)[0]
    mask = ro.mask[rows, :coarse.shape[1]]
    assert ((coarse - expected[0]).abs() * mask).sum() / mask.sum() < 0.1  # bfloat16 rounds, it does not change the policy
    with pytest.raises(ValueError, match="unknown learner dtype"):
        lm_policy.LMActor(model, tokenizer, 1.0, dtype="float16")
    with pytest.raises(ValueError, match="score_tokens must be at least 1"):
        llm_rl.RLConfig(score_tokens=0).validate()

def test_advantage_estimators_by_hand():
    B, T = 4, 3
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
    rewards = torch.zeros(B, T)
    final = torch.tensor([1.0, 0.0, 0.5, 0.0])
    rewards[torch.arange(B), mask.sum(1).long() - 1] = final
    values = torch.rand(B, T) * mask
    ro = Rollout(tasks=[None] * B, episodes=[], prompts=[[0]], prompt_index=torch.zeros(B, dtype=torch.long),
                 actions=torch.zeros(B, T, dtype=torch.long), logprobs=torch.zeros(B, T), values=values, mask=mask,
                 rewards=rewards, bootstrap=torch.zeros(B))
    adv, returns = rl.advantages(ro, "gae", gamma=1.0, lam=0.9)
    gae, gae_returns = compute_gae(rewards, values, mask, gamma=1.0, lam=0.9)
    assert torch.allclose(adv, normalize_advantages(gae, mask)) and torch.allclose(returns, gae_returns)
    adv, returns = rl.advantages(ro, "batch", normalise=False)
    assert torch.allclose(adv, (final - final.mean())[:, None] * mask) and torch.allclose(returns, final[:, None] * mask)
    adv, _ = rl.advantages(ro, "group", group_size=2)
    first = (final[:2] - final[:2].mean()) / (final[:2].std(unbiased=False) + 1e-6)
    assert torch.allclose(adv[:2, 0], first) and torch.allclose(adv[2:, 0], torch.tensor([1.0, -1.0]), atol=1e-4)
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        rl.advantages(ro, "vtrace")
    with pytest.raises(ValueError, match="unknown loss"):
        update.LossSettings(loss="dpo")


def test_learn_stops_its_epochs_once_the_policy_moves_too_far():
    """target_kl: the epochs stop at the first minibatch whose approx-KL passes it (here a tiny bound)."""
    torch.manual_seed(0)
    policy = Bandit()
    ro, adv, returns = bandit_rollout(8, rewarded=3)
    optimizer = torch.optim.SGD(policy.parameters(), lr=5.0)
    settings = update.LossSettings(epochs=10, minibatch_size=4, target_kl=1e-3)
    logs, epochs_done, early = rl.learn(policy, ro, adv, returns, settings, optimizer, list(policy.parameters()),
                                        np.random.default_rng(0))
    assert early and epochs_done < 10 and logs[-1]["approx_kl"] > 1e-3
    assert policy.logits.argmax().item() == 3  # the rewarded action is now the likeliest
    assert policy.reference_calls == []  # no KL term was asked for


@pytest.mark.parametrize("micro_batch_size", [None, 3])
def test_the_frozen_reference_is_scored_once_per_set_of_rows(micro_batch_size):
    """A KL term needs log pi_ref of the rows; epochs that revisit the same rows reuse it."""
    ro, adv, returns = bandit_rollout(6, rewarded=4)
    policy = Bandit()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    settings = update.LossSettings(epochs=3, kl_coef=0.5, micro_batch_size=micro_batch_size)
    logs, epochs_done, _ = rl.learn(policy, ro, adv, returns, settings, optimizer, list(policy.parameters()),
                                    np.random.default_rng(0))
    assert epochs_done == 3 and all(mb["kl_ref"] > 0 for mb in logs[1:])  # the KL term is there
    parts = [list(range(6))] if micro_batch_size is None else [[0, 1, 2], [3, 4, 5]]
    assert policy.reference_calls == parts  # three epochs over the same rows: the reference scored once
    assert policy.logits.argmax().item() == 4  # the update still learns the rewarded action

    # the same update as asking the reference again every epoch
    uncached = Bandit()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(update, "frozen_reference", lambda p, ro: lambda rows: p.reference_logprobs(ro, rows))
        again, _, _ = rl.learn(uncached, ro, adv, returns, settings, torch.optim.SGD(uncached.parameters(), lr=0.5),
                               list(uncached.parameters()), np.random.default_rng(0))
    assert len(uncached.reference_calls) == 3 * len(parts) and again == logs
    assert torch.equal(uncached.logits, policy.logits)


@pytest.mark.parametrize("method", ["ppo", "teacher-grpo"])
def test_a_resumed_language_model_run_equals_an_uninterrupted_one(small_dir, tasks, tmp_path, method):
    """Stopped after one step and resumed from its state file, a run ends where one run of three steps ends:
    the same rows and the same adapter (and value head, for PPO). Chapter 6's GRU: tests/test_trainer.py."""
    pool = [t for t in tasks if t.split != "test"]
    settings = dict(method=method, steps=3, prompts_per_step=2, group_size=2, max_new_tokens=8, progress=False)

    def trainable(model):
        return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    whole = llm_rl.train_rl(model, tokenizer, pool, **settings)
    expected = trainable(model)

    state = tmp_path / "rl_state.pt"
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    first = llm_rl.train_rl(model, tokenizer, pool, state_file=state, stop_after=1, **settings)
    assert len(first) == 1 and state.exists()
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)  # a fresh process, as after a crash
    resumed = llm_rl.train_rl(model, tokenizer, pool, state_file=state, resume=True, **settings)
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in resumed] == \
        [{k: v for k, v in r.items() if k not in drop} for r in whole]
    got = trainable(model)
    assert all(torch.equal(expected[n], got[n]) for n in expected)
    with pytest.raises(ValueError, match="lr was 0.001, now 0.002"):
        llm_rl.train_rl(model, tokenizer, pool, state_file=state, resume=True, **{**settings, "lr": 2e-3})


@pytest.mark.parametrize("method", ["reinforce", "ppo", "grpo", "teacher-grpo"])
def test_micro_batches_give_the_same_update_as_one_pass(small_dir, tasks, method, monkeypatch):
    """micro_batch_size only changes how many rows are in memory at once: the gradients accumulate to the
    same update (up to float rounding), extra SFT terms included, and the logged diagnostics agree."""
    from types import SimpleNamespace

    from course_lib import sandbox

    monkeypatch.setattr(sandbox, "run_tests_batch", lambda jobs, **kw: [  # every other sample passes
        SimpleNamespace(all_passed=i % 2 == 0, passed=int(i % 2 == 0), total=1, status="passed")
        for i in range(len(jobs))])
    pool = [t for t in tasks if t.split != "test"]
    settings = dict(method=method, steps=1, prompts_per_step=3, group_size=2, max_new_tokens=8, progress=False)
    accumulated, real_accumulate = [], update.accumulate
    monkeypatch.setattr(update, "accumulate", lambda *a, **kw: accumulated.append(1) or real_accumulate(*a, **kw))
    results = []
    for micro in (None, 4):  # 6 rows: one pass, or micro-batches of 4 and 2 (unequal shares)
        model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
        [row] = llm_rl.train_rl(model, tokenizer, pool, micro_batch_size=micro, **settings)
        results.append((row, {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}))
    (whole, w_whole), (parts, w_parts) = results
    assert len(accumulated) == (1 if method == "reinforce" else 2)  # once per minibatch of the micro run's epochs
    moved = max(w_whole[n].abs().max().item() for n in w_whole if "lora_B" in n)  # B starts at 0
    assert moved > 1e-4, "the step must change the adapter, or the comparison says nothing"
    assert all(torch.allclose(w_whole[n], w_parts[n], atol=1e-6, rtol=1e-4) for n in w_whole)
    for key in ("reward", "pass_rate", "avg_len", "policy_loss", "loss", "approx_kl", "clip_frac", "kl_ref",
                "value_loss", "ratio_mean", "ratio_std", "teacher_sft_loss", "self_sft_loss"):
        if key in whole:
            assert whole[key] == pytest.approx(parts[key], rel=1e-4, abs=1e-6), key


def test_micro_batches_refuse_what_they_cannot_weight_exactly():
    with pytest.raises(ValueError, match="micro_batch_size"):
        update.LossSettings(loss="reinforce", critic=True, micro_batch_size=2)
    with pytest.raises(ValueError, match="at least 1"):
        update.LossSettings(micro_batch_size=0)
    with pytest.raises(ValueError, match="micro_batch_size must be at least 1"):
        llm_rl.RLConfig(micro_batch_size=0)


def test_a_run_may_resume_with_another_micro_batch_size(small_dir, tasks, tmp_path):
    """micro_batch_size changes the memory, not the update: a run that ran out of memory resumes with one."""
    pool = [t for t in tasks if t.split != "test"]
    settings = dict(method="grpo", steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8, progress=False)
    state = tmp_path / "rl_state.pt"
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    llm_rl.train_rl(model, tokenizer, pool, state_file=state, stop_after=1, **settings)
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    rows = llm_rl.train_rl(model, tokenizer, pool, state_file=state, resume=True, micro_batch_size=1, **settings)
    assert [r["step"] for r in rows] == [1, 2]


def test_accumulate_calls_backward_once_per_micro_batch_whatever_the_extra_terms():
    """A multi-process backward (chapter 11's accelerate run) must be called equally often on every process:
    the extra terms ride on the last micro-batch's loss, so there is one call per micro-batch even when a
    process has no extra data (its extra terms are a constant 0 without a gradient)."""

    B = 7
    ro, adv, returns = bandit_rollout(B, rewarded=3)
    s = update.LossSettings(epochs=1, micro_batch_size=3)  # 7 rows: micro-batches of 3, 3 and 1
    for extra in (lambda loss, stats: loss, lambda loss, stats: loss + 0.1 * Bandit().logits.sum()):
        calls = []
        policy = Bandit()
        update.accumulate(policy, ro, torch.arange(B), adv, returns, s, add_terms=extra,
                      backward=lambda loss: calls.append(1) or loss.backward())
        assert len(calls) == 3


# the KL weight each method trained the language model with before the method table: grpo and teacher-grpo
# the README's 0.05, reinforce and ppo none (the DeepSeek-Coder LoRA-RL report's)
LM_KL_BEFORE = {"reinforce": 0.0, "ppo": 0.0, "grpo": 0.05, "teacher-grpo": 0.05}


@pytest.mark.parametrize("method", tuple(rl.METHODS))
def test_every_method_of_the_table_is_accepted_by_both_policies_settings(method):
    """Both settings offer exactly the table's methods, and each takes the table's parts; left unset, kl_coef
    gives the language model the weight it had before the table and the GRU none; set, it applies."""
    parts = rl.METHODS[method]
    for cls in (llm_rl.RLConfig, PPOConfig):
        assert cls.__dataclass_fields__["method"].metadata["choices"] == tuple(rl.METHODS)
    lm = llm_rl.RLConfig(method=method, group_size=2 if parts.grouped else 1)
    gru = PPOConfig(method=method, group_size=2)
    assert (lm.kl_coef, lm.kl_weight, gru.kl_coef, gru.kl_weight) == (None, LM_KL_BEFORE[method], 0.0, 0.0)
    if parts.uses_kl:
        assert lm.replace(kl_coef=0.1).kl_weight == gru.replace(kl_coef=0.1).kl_weight == 0.1
        assert gru.replace(kl_coef=None).kl_weight == parts.kl_coef  # none: the method's own
    assert lm.replace(kl_coef=0.0).kl_weight == gru.replace(kl_coef=0.0).kl_weight == 0.0  # 0 is off for any method


def test_a_kl_term_the_method_does_not_have_is_an_error_not_ignored():
    """reinforce's loss has no KL term: asking for one is a ConfigError that names the setting, the method and
    the fix, in both policies' settings and on the command line, instead of a weight silently set to 0."""
    for make in (lambda: llm_rl.RLConfig(method="reinforce", group_size=1, kl_coef=0.05),
                 lambda: PPOConfig(method="reinforce", kl_coef=0.05)):
        with pytest.raises(ConfigError, match=r"kl_coef=0.05: reinforce's loss has no KL term, so the setting would "
                                              r"be ignored; leave kl_coef unset \(none\) or 0, or choose a method "
                                              r"with one: ppo, grpo, teacher-grpo"):
            make()
    with pytest.raises(ConfigError, match="kl_coef must be >= 0"):
        llm_rl.RLConfig(kl_coef=-0.1)
    assert [name for name, parts in rl.METHODS.items() if not parts.uses_kl] == ["reinforce"]


def test_the_language_models_trainer_takes_the_kl_weight_its_settings_resolve(small_dir, tasks):
    """LMTrainer's loss weighs the KL term by kl_weight: the method's own when kl_coef is unset (grpo 0.05,
    ppo 0), and ppo's explicit weight when one is set (it has the term, as the GRU's ppo does)."""
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    pool = [t for t in tasks if t.split == "train"]
    for changes, weight in ((dict(method="grpo", group_size=2), 0.05), (dict(method="ppo", group_size=1), 0.0),
                            (dict(method="ppo", group_size=1, kl_coef=0.1), 0.1),
                            (dict(method="reinforce", group_size=1, kl_coef=0.0), 0.0)):
        trainer = llm_rl.LMTrainer(model, tokenizer, pool, llm_rl.RLConfig(**changes))
        assert trainer.loss_settings.kl_coef == weight


def test_a_resume_compares_the_kl_weight_not_how_it_was_written():
    """A state saved with kl_coef=0.05 for grpo and one saved with kl_coef unset run the same update."""
    unset, written = {"method": "grpo", "kl_coef": None}, {"method": "grpo", "kl_coef": 0.05}
    assert rl.with_kl_weight(unset) == rl.with_kl_weight(written)
    assert rl.with_kl_weight({"method": "ppo", "kl_coef": None})["kl_coef"] == 0.0
