"""The code-generation environment: gymnasium's contract, episode ends, rewards, the mask, batching."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import course_lib
import course_lib.gru.env
from course_lib.gru.batched_env import (BatchedCodeGen, random_policy, rollout_batch, run_episode,
                                        template_policy)
from course_lib.gru.env import ENV_ID, CodeGenEnv, action_alphabet
from course_lib.rewards import fraction_passed
from course_lib.core.rollout import pass_rate
from course_lib.tasks import Task, load_tasks
from course_lib.tokenizers import CharTokenizer, course_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return course_tokenizer()


@pytest.fixture(scope="module")
def all_tasks():
    return load_tasks()


@pytest.fixture
def env(tokenizer):
    return CodeGenEnv(tokenizer=tokenizer, max_new_tokens=16)


def _write(env, text):
    """Step the env through the ids of text; return the list of 5-tuples."""
    return [env.step(i) for i in env.tokenizer.encode(text)]


def test_check_env_passes_without_warnings(tokenizer):
    course_lib.gru.env.register()
    env = gym.make(ENV_ID, tokenizer=tokenizer, max_new_tokens=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_make_after_import():
    course_lib.gru.env.register()
    course_lib.gru.env.register()  # idempotent
    env = gym.make("CodeGen-v0", max_new_tokens=4)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info["task_id"] in {t.id for t in load_tasks("train")}


def test_reset_picks_the_requested_task_and_is_seeded(env):
    obs, info = env.reset(options={"task_id": "abs_value"})
    assert info["task_id"] == "abs_value" and info["steps"] == 0
    text = env.tokenizer.decode(obs["tokens"][:obs["length"]])
    assert text == env.task.prompt
    assert obs["tokens"][0] == env.tokenizer.bos_id and (obs["tokens"][obs["length"]:] == 0).all()
    drawn = [env.reset(seed=s)[1]["task_id"] for s in (3, 3, 4)]
    assert drawn[0] == drawn[1]
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "no_such_task"})


def test_eos_terminates_and_limit_truncates_never_both(env):
    eos = env.tokenizer.eos_id
    env.reset(options={"task_id": "abs_value"})
    _, _, terminated, truncated, info = env.step(eos)
    assert (terminated, truncated) == (True, False) and info["completion"] == ""

    env.reset(options={"task_id": "abs_value"})
    steps = _write(env, "x" * env.max_new_tokens)
    assert all(not term and not trunc for _, _, term, trunc, _ in steps[:-1])
    assert steps[-1][2:4] == (False, True)

    # <eos> as the very last allowed token is a termination, not a truncation
    env.reset(options={"task_id": "abs_value"})
    _write(env, "x" * (env.max_new_tokens - 1))
    _, _, terminated, truncated, _ = env.step(eos)
    assert (terminated, truncated) == (True, False)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(eos)


def test_reward_only_at_the_end(env):
    env.reset(options={"task_id": "abs_value"})
    steps = _write(env, "    return x") + [env.step(env.tokenizer.eos_id)]
    rewards = [r for _, r, _, _, _ in steps]
    assert rewards[:-1] == [0.0] * (len(steps) - 1)
    assert all("completion" not in info and "action_mask" in info for *_, info in steps[:-1])
    info = steps[-1][-1]
    assert info["completion"] == "    return x"
    assert (info["passed"], info["total"], info["status"]) == (2, 3, "failed")  # abs(-3) fails
    assert rewards[-1] == pytest.approx(2 / 3)


def test_empty_completion_compiles_but_earns_nothing(env):
    # The prompt's docstring is a valid body: an empty completion is not a syntax error.
    # The character-level PPO work log's syntax bonus paid for it; the default reward does not.
    env.reset(options={"task_id": "abs_value"})
    _, reward, _, _, info = env.step(env.tokenizer.eos_id)
    assert info["status"] == "failed" and reward == 0.0


def test_custom_reward_fn_is_called_once_at_the_end(tokenizer):
    calls = []

    def reward_fn(task, completion, report):
        calls.append((task.id, completion, report.total))
        return 42.0

    env = CodeGenEnv(tokenizer=tokenizer, max_new_tokens=3, reward_fn=reward_fn)
    env.reset(options={"task_id": "abs_value"})
    steps = _write(env, "abc")
    assert calls == [("abs_value", "abc", 3)] and steps[-1][1] == 42.0


def test_out_of_mask_actions_are_accepted_and_flagged(env, tokenizer):
    env.reset(options={"task_id": "abs_value"})
    outside = int(np.flatnonzero(env.action_mask == 0)[-1])  # a prompt-only character
    _, _, _, _, info = env.step(outside)
    assert info["in_mask"] is False
    _, _, _, _, info = env.step(tokenizer.eos_id)
    assert info["in_mask"] is True and info["out_of_mask"] == 1
    env.reset(options={"task_id": "abs_value"})
    for bad in (-1, len(tokenizer)):
        with pytest.raises(ValueError, match="not a token id"):
            env.step(bad)


def test_template_policy_solves_every_train_task(all_tasks, tokenizer):
    train = [t for t in all_tasks if t.split == "train"]
    episodes = rollout_batch(template_policy(train, tokenizer), train, tokenizer=tokenizer)
    assert [e.reward for e in episodes] == [1.0] * len(train)
    assert all(e.terminated and not e.truncated for e in episodes)
    assert all(e.completion == t.solution for e, t in zip(episodes, train))
    assert all(e.out_of_mask == 0 for e in episodes)  # train solutions are inside the alphabet
    # and through the single environment too
    env = CodeGenEnv(train, tokenizer)
    assert run_episode(env, template_policy(train, tokenizer), task_id=train[0].id).reward == 1.0


def _synthetic_tasks():
    def task(id, split, prompt_note, solution):
        return Task(id=id, prompt=f'def f(x):\n    """Return something. {prompt_note}"""\n', entry_point="f",
                    solution=solution, tests=("assert f(1) is not None",), family="syn", split=split,
                    novelty=None if split == "train" else "near")
    return [task("t1", "train", "", "    return x + 1\n"),
            task("v1", "val", "Uses @ and ~.", "    return '@' * ~x\n"),
            task("s1", "test", "Uses %.", "    return x % 7\n")]


def test_alphabet_has_no_character_seen_only_in_held_out_solutions():
    tasks = _synthetic_tasks()
    tok = CharTokenizer.from_tasks(tasks)
    alphabet = set(action_alphabet(tasks, tok).tolist())
    train_chars = set(tasks[0].solution)
    held_out_only = set(tasks[1].solution + tasks[2].solution) - train_chars
    assert {"@", "~", "%", "'", "7"} <= held_out_only
    for ch in held_out_only:
        if ch in tok.stoi:  # in the vocabulary (from a prompt), yet never in the alphabet
            assert tok.stoi[ch] not in alphabet, ch
    assert alphabet == set(tok.token_ids(tasks[0].solution)) | {tok.eos_id}
    # the same alphabet whichever tasks the environment is evaluated on
    env = CodeGenEnv(tasks[1:], tok, alphabet=action_alphabet(tasks, tok))
    _, info = env.reset(seed=0)
    assert set(np.flatnonzero(info["action_mask"]).tolist()) == alphabet
    with pytest.raises(ValueError, match="training tasks"):
        action_alphabet(tasks[1:], tok)


def test_course_alphabet_excludes_held_out_only_characters(all_tasks, tokenizer):
    env = CodeGenEnv(split="val", tokenizer=tokenizer)
    train_chars = set("".join(t.solution for t in all_tasks if t.split == "train"))
    for t in all_tasks:
        for ch in set(t.solution) - train_chars:
            assert env.action_mask[tokenizer.stoi[ch]] == 0


def test_batched_rollout_matches_sequential_episodes(all_tasks, tokenizer):
    tasks = [t for t in all_tasks if t.split == "train"][:4] + [t for t in all_tasks if t.split == "val"][:2]
    env = CodeGenEnv(tasks, tokenizer, max_new_tokens=40)
    for policy in (random_policy, template_policy(tasks, tokenizer)):
        batched = rollout_batch(policy, tasks, n=2, seed=100, tokenizer=tokenizer, max_new_tokens=40)
        episode_tasks = [t for t in tasks for _ in range(2)]
        sequential = [run_episode(env, policy, seed=100 + i, task_id=t.id) for i, t in enumerate(episode_tasks)]
        assert batched == sequential
    outcomes = {(e.terminated, e.truncated) for e in batched + sequential}
    assert (True, True) not in outcomes


def test_batched_rollout_mixes_ends_and_scores_all(all_tasks, tokenizer):
    tasks = [t for t in all_tasks if t.split == "train"][:8]
    episodes = rollout_batch(random_policy, tasks, n=4, seed=0, tokenizer=tokenizer, max_new_tokens=30)
    assert len(episodes) == 32 and [e.task_id for e in episodes[:4]] == [tasks[0].id] * 4
    assert {(e.terminated, e.truncated) for e in episodes} == {(True, False), (False, True)}
    assert all(e.steps == 30 for e in episodes if e.truncated)
    assert all(e.actions[-1] == tokenizer.eos_id for e in episodes if e.terminated)
    assert all(e.total == len(tasks[i // 4].tests) for i, e in enumerate(episodes))
    assert pass_rate(episodes) == 0.0
    unscored = rollout_batch(random_policy, tasks, n=4, seed=0, tokenizer=tokenizer, max_new_tokens=30, score=False)
    assert [e.completion for e in unscored] == [e.completion for e in episodes]
    assert all(np.isnan(e.reward) for e in unscored)


def test_batched_env_rejects_wrong_actions(all_tasks, tokenizer):
    env = BatchedCodeGen(tokenizer, max_new_tokens=5)
    env.reset(all_tasks[:3])
    with pytest.raises(ValueError, match="3 actions"):
        env.step([2, 2])
    with pytest.raises(ValueError, match="token ids"):
        env.step([2, 2, 999])


def test_default_reward_is_fraction_passed():
    class Report:
        fraction = 0.25
    assert fraction_passed(None, "", Report()) == 0.25


def test_a_reward_fn_with_n_tokens_is_given_the_length_in_tokens_without_eos(tokenizer):
    from course_lib.rewards import ShapedReward

    reward = ShapedReward("pass=1,tokens=0.5,length=0.01")  # the length in tokens and in characters
    env = CodeGenEnv(tokenizer=tokenizer, max_new_tokens=8, reward_fn=reward)
    env.reset(options={"task_id": "abs_value"})
    _write(env, "ab")
    env.step(env.tokenizer.eos_id)  # ended by <eos>: 2 tokens written, <eos> not counted
    [terms] = reward.drain()
    assert terms == {"pass": 0.0, "tokens": -0.02, "length": -2.0}  # one character per token: the two agree
    env.reset(options={"task_id": "abs_value"})
    _write(env, "abcdefgh")  # cut at max_new_tokens: all 8 count
    assert reward.drain()[0]["tokens"] == -0.08
