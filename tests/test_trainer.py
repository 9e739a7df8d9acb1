"""The PPO trainer and its command line: resume, evaluation files, errors, the split rules, learning."""

from __future__ import annotations

import json

import pytest
import torch

from course_lib.cli import ppo_cli
from course_lib.gru import ppo_run
from course_lib.gru import trainer as tr
from course_lib.__main__ import main
from course_lib.gru.checkpoints import save_checkpoint
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.tokenizers import CharTokenizer, course_tokenizer
from course_lib.gru.ppo_run import run
from course_lib.gru.trainer import ConfigError, PPOConfig, PPOTrainer, TaskSampler
from toy_tasks import TRAIN, VAL, write_toy_tasks  # tests/toy_tasks.py

# A run small enough for a test: a 16-unit GRU, one pretraining step, four updates of eight episodes.
TINY = dict(hidden_dim=16, embed_dim=8, pretrain_epochs=1, pretrain_batch_size=64, updates=4,
            episodes_per_update=8, group_size=2, minibatch_size=4, epochs=2, max_new_tokens=12,
            eval_every=2, save_every=1, teacher_batch_size=4, sandbox_timeout=2.0, explore_episodes=8)


def without_timings(rows):
    return [{k: v for k, v in row.items() if k not in tr.TIMING_KEYS} for row in rows]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    result = run(PPOConfig(**TINY), out, progress=False, log=lambda *a: None)
    return out, result


def test_resume_gives_the_same_metrics_as_an_uninterrupted_run(finished_run, tmp_path):
    full_dir, full_result = finished_run
    config = PPOConfig(**TINY)
    assert run(config, tmp_path, stop_after=2, progress=False, log=lambda *a: None) is None  # "interrupted"
    assert len(ppo_run.read_metrics(tmp_path)) == 2 and (tmp_path / tr.STATE_FILE).exists()
    resumed = run(config, tmp_path, resume=True, progress=False, log=lambda *a: None)

    assert without_timings(ppo_run.read_metrics(tmp_path)) == without_timings(ppo_run.read_metrics(full_dir))
    drop = {"wall_seconds", "pretrain_seconds"}
    assert {k: v for k, v in resumed.items() if k not in drop} == {k: v for k, v in full_result.items() if k not in drop}
    a = torch.load(full_dir / tr.POLICY_FILE, weights_only=True)["state_dict"]
    b = torch.load(tmp_path / tr.POLICY_FILE, weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_with_other_settings_is_refused(tmp_path):
    run(PPOConfig(**TINY), tmp_path, stop_after=1, progress=False, log=lambda *a: None)
    with pytest.raises(ConfigError, match="lr was 0.003, now 0.002"):
        run(PPOConfig(**{**TINY, "lr": 0.002}), tmp_path, resume=True, progress=False)
    with pytest.raises(ConfigError, match="already holds a run"):
        run(PPOConfig(**TINY), tmp_path, progress=False)


def test_eval_json_has_every_promised_field(finished_run):
    out, _ = finished_run
    result = json.loads((out / tr.EVAL_FILE).read_text())
    keys = ["train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1", "val_near_greedy_pass@1",
            "val_far_greedy_pass@1", "test_near_greedy_pass@1", "test_far_greedy_pass@1"]
    for key in keys:
        assert 0.0 <= result[key] <= 1.0
        assert 0.0 <= result["baseline"][key] <= 1.0
    ids = [row["id"] for row in result["per_task"]]
    assert len(ids) == len(set(ids)) == 76
    assert {row["split"] for row in result["per_task"]} == {"train", "val", "test"}
    assert set(result["per_task"][0]) >= {"id", "split", "novelty", "greedy_passed", "greedy_fraction",
                                          "greedy_status", "greedy_completion"}
    metrics = ppo_run.read_metrics(out)
    assert [m["update"] for m in metrics] == [0, 1, 2, 3]
    for key in ("reward_mean", "approx_kl", "clip_frac", "explained_variance", "entropy", "ratio_mean",
                "ratio_std", "value_loss", "policy_loss", "lr", "wall_s", "train_pass_rate_sampled",
                "val_pass_rate_sampled"):
        assert key in metrics[-1], key
    assert "val_pass_rate_greedy" in metrics[1] and "test_pass_rate_greedy" not in metrics[1]
    assert PPOConfig.load(out / tr.CONFIG_FILE) == PPOConfig(**TINY)


def test_no_test_task_is_ever_rolled_out(monkeypatch):
    rolled = []
    real = tr.collect_rollout

    def spy(model, tokenizer, tasks, **kw):
        rolled.extend(tasks)
        return real(model, tokenizer, tasks, **kw)

    monkeypatch.setattr(tr, "collect_rollout", spy)
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    trainer = PPOTrainer(PPOConfig(**{**TINY, "updates": 3, "episodes_per_update": 32, "group_size": 1}),
                         model=model, tokenizer=tok, progress=False)
    trainer.train()
    assert {t.split for t in rolled} == {"train", "val"}  # val is rolled out (for its tests), test never
    assert not [i for i in trainer.sampler.drawn if trainer.tasks_by_id[i].split == "test"]
    with pytest.raises(ConfigError, match="never trained on"):
        PPOConfig(rollout_splits=("train", "val", "test"))
    with pytest.raises(ValueError, match="refuses test tasks"):
        TaskSampler(trainer.tasks, seed=0, unsolved_weight=1.0, min_weight=0.05)


def test_a_tiny_run_raises_the_reward_on_a_toy_task(tmp_path):
    write_toy_tasks(tmp_path)
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    config = PPOConfig(tasks_dir=str(tmp_path), updates=8, episodes_per_update=32, group_size=16,
                       minibatch_size=16, epochs=4, lr=0.02, warmup_updates=0, max_new_tokens=8, temperature=1.0,
                       bc_coef=0.0, sil_coef=0.0, eval_every=0, target_kl=None, explore_episodes=0)
    trainer = PPOTrainer(config, model=model, tokenizer=tok, progress=False)
    rewards = [m["reward_mean"] for m in trainer.train()]
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.2, rewards


def test_ppo_coef_zero_leaves_only_the_teacher_terms(tmp_path):
    """ppo_coef=0 switches the PPO objective off: with no teacher terms either, nothing learns."""
    write_toy_tasks(tmp_path)
    tok = course_tokenizer()

    def weights_after(**kw):
        torch.manual_seed(0)
        model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
        config = PPOConfig(tasks_dir=str(tmp_path), updates=1, episodes_per_update=8, group_size=8,
                           minibatch_size=8, epochs=1, max_new_tokens=6, eval_every=0, explore_episodes=0,
                           bc_coef=0.0, sil_coef=0.0, warmup_updates=0, **kw)
        trainer = PPOTrainer(config, model=model, tokenizer=tok, progress=False)
        before = [p.detach().clone() for p in trainer.model.parameters()]
        trainer.train()
        return before, list(trainer.model.parameters())

    before, after = weights_after(ppo_coef=0.0)
    assert all(torch.equal(b, a) for b, a in zip(before, after))
    before, after = weights_after()  # the default, 1.0: the same update moves the policy
    assert not all(torch.equal(b, a) for b, a in zip(before, after))
    with pytest.raises(ConfigError, match="ppo_coef"):
        PPOConfig(ppo_coef=-1.0)


# -- the command line -----------------------------------------------------------------------

def test_config_file_and_options_combine(tmp_path):
    path = tmp_path / "c.json"
    PPOConfig(lr=0.005, updates=7).save(path)
    assert PPOConfig.load(path) == PPOConfig(lr=0.005, updates=7)
    import argparse
    parser = argparse.ArgumentParser()
    ppo_cli.add_arguments(parser)
    args = parser.parse_args(["--out", "x", "--config", str(path), "--updates", "9", "--no-norm-adv",
                              "--value-clip-eps", "none"])
    config = ppo_cli.config_from_args(args)
    assert (config.lr, config.updates, config.norm_adv, config.value_clip_eps) == (0.005, 9, False, None)


def test_cli_rejects_bad_options(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["ppo", "--out", str(tmp_path), "--clip-eps", "abc"])
    assert e.value.code == 2 and "--clip-eps" in capsys.readouterr().err
    assert main(["ppo", "--out", str(tmp_path), "--rollout-splits", "train", "test"]) == 2
    assert "never trained on" in capsys.readouterr().out
    assert main(["ppo", "--out", str(tmp_path), "--minibatch-size", "100", "--episodes-per-update", "64"]) == 2
    assert "cannot exceed" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text('{"learning_rate": 0.1}')
    assert main(["ppo", "--out", str(tmp_path), "--config", str(tmp_path / "bad.json")]) == 2
    assert "unknown setting(s) ['learning_rate']" in capsys.readouterr().out
    assert main(["ppo", "--out", str(tmp_path / "new"), "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().out


def test_cli_rejects_mismatched_checkpoints(tmp_path, capsys):
    other = CharTokenizer.from_texts(["def f(x):\n    return x\n"])
    save_checkpoint(tmp_path / "other.pt", GRUPolicy(GRUConfig(len(other), embed_dim=8, hidden_dim=16)), other)
    assert main(["ppo", "--out", str(tmp_path / "run"), "--pretrained", str(tmp_path / "other.pt")]) == 2
    assert "another vocabulary" in capsys.readouterr().out
    assert main(["eval", "--checkpoint", str(tmp_path / "other.pt")]) == 2
    assert "cannot read" in capsys.readouterr().out
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    assert main(["eval", "--checkpoint", str(tmp_path / "junk.pt")]) == 2
    assert "junk.pt is not a course checkpoint" in capsys.readouterr().out
    assert main(["eval", "--checkpoint", str(tmp_path / "missing.pt")]) == 2
    tok = course_tokenizer()
    save_checkpoint(tmp_path / "ours.pt", GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16)), tok)
    assert main(["ppo", "--out", str(tmp_path / "run2"), "--pretrained", str(tmp_path / "ours.pt"),
                 "--hidden-dim", "32", "--updates", "1"]) == 2
    assert "hidden_dim" in capsys.readouterr().out


def test_cli_eval_on_another_task_folder(tmp_path, capsys):
    write_toy_tasks(tmp_path)
    tok = course_tokenizer()
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "ours.pt", GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16)), tok)
    assert main(["eval", "--checkpoint", str(tmp_path / "ours.pt"), "--tasks", str(tmp_path),
                 "--max-new-tokens", "4", "--out", str(tmp_path / "e.json")]) == 0
    result = json.loads((tmp_path / "e.json").read_text())
    assert [r["id"] for r in result["per_task"]] == ["nothing", "nothing_val"]
    assert "train_greedy_pass@1" in capsys.readouterr().out

    # a held-out task the vocabulary cannot read (and with no novelty label) fails; the others still run
    accented = VAL.replace("nothing_val", "nothing_ete").replace('novelty = "near"\n', "").replace(
        "Return nothing.", "Return nothing, d\u00e9j\u00e0 vu.")
    (tmp_path / "toy.toml").write_text(TRAIN + VAL + accented)
    assert main(["eval", "--checkpoint", str(tmp_path / "ours.pt"), "--tasks", str(tmp_path),
                 "--max-new-tokens", "4", "--out", str(tmp_path / "e.json")]) == 0
    rows = {r["id"]: r for r in json.loads((tmp_path / "e.json").read_text())["per_task"]}
    assert rows["nothing_ete"]["greedy_status"] == "unreadable" and not rows["nothing_ete"]["greedy_passed"]
    assert "U+00E9" in rows["nothing_ete"]["reason"] and rows["nothing_val"]["greedy_status"] != "unreadable"
    assert "cannot read 1 of 3 tasks (nothing_ete)" in capsys.readouterr().out

    # a set none of whose tasks it can read, a file with no task, a file of no known type: errors, no traceback
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "toy.toml").write_text('family = "toy"\n' + accented)
    (tmp_path / "empty.toml").write_text('family = "empty"\ntask = []\n')
    (tmp_path / "tasks.json").write_text("[]\n")
    for tasks, message in ((alone, "cannot read 1 of the 1 tasks, e.g. task 'nothing_ete'"),
                           (tmp_path / "empty.toml", "no tasks in"), (tmp_path / "tasks.json", "unknown task file type")):
        assert main(["eval", "--checkpoint", str(tmp_path / "ours.pt"), "--tasks", str(tasks)]) == 2
        assert message in capsys.readouterr().out


def test_baselines_run_and_never_sample_test_tasks(tmp_path):
    from course_lib.gru.baselines import best_of_n, expert_iteration
    from course_lib.tasks import load_tasks

    write_toy_tasks(tmp_path)
    tasks = load_tasks(tasks_dir=tmp_path)
    tok = course_tokenizer()
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    bon = best_of_n(model, tok, tasks, temperature=1.0, samples_per_round=8, rounds=2, max_new_tokens=4,
                    progress=False)
    assert set(bon["found"]) <= {"nothing", "nothing_val"} and len(bon["curve"]) >= 2
    ei = expert_iteration(model, tok, tasks, episodes_per_round=8, group_size=4, rounds=2, finetune_steps=1,
                          batch_size=2, max_new_tokens=4, progress=False)
    assert [row["round"] for row in ei["curve"]] == [1, 2] and "val_greedy_pass@1" in ei["curve"][-1]
    with pytest.raises(ValueError, match="test tasks"):
        best_of_n(model, tok, load_tasks("test")[:1], rounds=1, progress=False)


def test_the_device_option_says_what_this_machine_lacks(finished_run, tmp_path, capsys, monkeypatch):
    from course_lib.config import resolve_device

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="unknown device 'tpu'; choose cpu, cuda"):
        resolve_device("tpu")
    assert finished_run[1]["device"].startswith("cpu (")  # eval.json names what ran the network
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU.* on this machine.*pass --device cpu"):
            resolve_device("cuda")
        assert main(["ppo", "--out", str(tmp_path / "run"), "--device", "cuda", "--no-progress"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().out
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a machine with one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == "cuda:0" and resolve_device("auto") == "cuda"
    with pytest.raises(ConfigError, match="'cuda:1': torch sees 1 CUDA GPU"):
        resolve_device("cuda:1")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_run_on_the_gpu_trains_and_resumes_on_the_cpu(tmp_path):
    config = PPOConfig(**TINY)
    assert run(config, tmp_path, stop_after=2, progress=False, log=lambda *a: None, device="cuda") is None
    result = run(config, tmp_path, resume=True, progress=False, log=lambda *a: None, device="cpu")
    rows = ppo_run.read_metrics(tmp_path)
    assert len(rows) == config.updates and all(0 <= row["pass_rate_sampled"] <= 1 for row in rows)
    assert result["device"].startswith("cpu")


@pytest.mark.parametrize("method", ["grpo", "reinforce"])
def test_the_gru_trains_by_the_language_models_methods(method, monkeypatch):
    """method picks the same parts of the RL core for the GRU as for the language model (rl.METHODS):
    grpo's advantages are centred within each task's group and leave the critic alone; REINFORCE makes one pass."""
    config = PPOConfig(**{**TINY, "method": method, "updates": 2, "explore_episodes": 0, "eval_every": 0,
                          "bc_coef": 0.0, "sil_coef": 0.0})
    trainer = PPOTrainer(config, progress=False, log=lambda *a: None)
    seen = []
    real = tr.rl.advantages
    monkeypatch.setattr(tr.rl, "advantages", lambda ro, est, **kw: seen.append((ro, est, real(ro, est, **kw)))
                        or seen[-1][2])
    critic = trainer.model.value_head.weight.detach().clone()
    rows = trainer.train()
    ro, estimator, (adv, _) = seen[0]
    episode_adv = (adv * ro.mask).sum(1) / ro.mask.sum(1)  # the same advantage on every token of an episode
    if method == "grpo":
        assert estimator == "group"
        groups = episode_adv.view(-1, config.group_size)
        assert torch.allclose(groups.mean(1), torch.zeros(len(groups)), atol=1e-5)
        assert torch.equal(trainer.model.value_head.weight, critic)  # no critic is trained
        assert all(row["epochs_done"] == config.epochs for row in rows)
    else:
        assert estimator == "batch" and abs(float(episode_adv.mean())) < 1e-5
        assert all(row["epochs_done"] == 1 for row in rows)
