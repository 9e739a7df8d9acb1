"""Each symptom of book/troubleshooting.md, reproduced small: what the reader sees, and that the fix removes it."""

from __future__ import annotations

import pytest
import torch

from course_lib.runs import CheckpointMismatchError
from course_lib.gru.checkpoints import load_checkpoint, save_checkpoint
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.tokenizers import CharTokenizer, course_tokenizer
from course_lib.gru.ppo_run import run
from course_lib.gru.trainer import ConfigError, PPOConfig, PPOTrainer
from toy_tasks import write_toy_tasks  # tests/toy_tasks.py


def tiny_model(seed=0):
    tok = course_tokenizer()
    torch.manual_seed(seed)
    return GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16)), tok


def toy_config(tmp_path, **changes):
    write_toy_tasks(tmp_path, with_val=False)
    base = dict(tasks_dir=str(tmp_path), updates=6, episodes_per_update=32, group_size=16, minibatch_size=16,
                epochs=4, lr=0.02, warmup_updates=0, max_new_tokens=8, temperature=1.0, bc_coef=0.0, sil_coef=0.0,
                eval_every=0, target_kl=None, plots=False, explore_episodes=0)
    return PPOConfig(**{**base, **changes})


def test_reward_stuck_at_zero_without_a_pretrained_start():
    """Symptom: "reward_mean": 0.0 on every update. Cause: an untrained policy never writes a passing program."""
    model, tok = tiny_model()
    config = PPOConfig(updates=2, episodes_per_update=16, group_size=8, minibatch_size=16, max_new_tokens=40,
                       eval_every=0, bc_coef=0.0, sil_coef=0.0, plots=False, explore_episodes=0)
    metrics = PPOTrainer(config, model=model, tokenizer=tok, progress=False).train()
    assert [m["reward_mean"] for m in metrics] == [0.0, 0.0]
    assert [m["pass_rate_sampled"] for m in metrics] == [0.0, 0.0]


def test_entropy_collapse_with_a_large_step_and_no_entropy_bonus(tmp_path):
    """Symptom: "entropy" falling towards 0 within a few updates. Fix: a smaller lr and an entropy bonus."""
    model, tok = tiny_model()
    collapsed = PPOTrainer(toy_config(tmp_path, lr=0.1, ent_coef=0.0), model=model, tokenizer=tok,
                           progress=False).train()
    assert collapsed[-1]["entropy"] < 0.25 * collapsed[0]["entropy"], [m["entropy"] for m in collapsed]
    model, tok = tiny_model()
    gentle = PPOTrainer(toy_config(tmp_path, lr=0.003, ent_coef=0.05), model=model, tokenizer=tok,
                        progress=False).train()
    assert gentle[-1]["entropy"] > 0.5 * gentle[0]["entropy"]


def test_kl_blow_up_and_the_early_stop(tmp_path):
    """Symptom: "approx_kl" far above target_kl. Fix: target_kl stops the update's epochs ("early_stop": true)."""
    model, tok = tiny_model()
    wild = PPOTrainer(toy_config(tmp_path, lr=0.3, updates=2), model=model, tokenizer=tok, progress=False).train()
    assert max(m["approx_kl"] for m in wild) > 0.1, [m["approx_kl"] for m in wild]
    model, tok = tiny_model()
    guarded = PPOTrainer(toy_config(tmp_path, lr=0.3, updates=2, target_kl=0.02), model=model, tokenizer=tok,
                         progress=False).train()
    assert all(m["early_stop"] for m in guarded)
    assert all(m["minibatches"] < wild[0]["minibatches"] for m in guarded)


def test_memory_grows_with_the_minibatch_not_the_update():
    """Out of memory: the learner's activations scale with minibatch_size x the longest episode, so lowering
    minibatch_size (not episodes_per_update) is the fix; the setting is checked against the batch."""
    with pytest.raises(ConfigError, match="minibatch_size"):
        PPOConfig(episodes_per_update=32, minibatch_size=64)
    from course_lib.gru.actor import evaluate_actions
    model, tok = tiny_model()
    allowed = torch.ones(len(tok), dtype=torch.bool)
    sizes = {}
    for rows in (4, 16):
        actions = torch.randint(3, len(tok), (rows, 50))
        logp, _, _ = evaluate_actions(model, [tok.encode("def f():\n", add_bos=True)], torch.zeros(rows, dtype=torch.long),
                                      actions, torch.ones(rows, 50), allowed=allowed, temperature=1.0)
        sizes[rows] = logp.numel() * len(tok)  # the [rows, T, vocab] log-softmax the loss keeps for backward
    assert sizes[16] == 4 * sizes[4]


def test_checkpoint_mismatch_messages(tmp_path):
    """Symptom: CheckpointMismatchError (another vocabulary) or ConfigError (resume with other settings)."""
    other = CharTokenizer.from_texts(["def f(x):\n    return x\n"])
    save_checkpoint(tmp_path / "other.pt", GRUPolicy(GRUConfig(len(other), embed_dim=8, hidden_dim=16)), other)
    with pytest.raises(CheckpointMismatchError, match="another vocabulary"):
        load_checkpoint(tmp_path / "other.pt", tokenizer=course_tokenizer())
    config = PPOConfig(hidden_dim=16, embed_dim=8, pretrain_epochs=1, updates=2, episodes_per_update=8,
                       group_size=2, minibatch_size=4, max_new_tokens=8, eval_every=0, teacher_batch_size=4,
                       save_every=1, plots=False)
    run(config, tmp_path / "run", stop_after=1, progress=False, log=lambda *a: None)
    with pytest.raises(ConfigError, match="was written by a run with other settings: lr was 0.003, now 0.001"):
        run(config.replace(lr=0.001), tmp_path / "run", resume=True, progress=False, log=lambda *a: None)
