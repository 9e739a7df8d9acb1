"""The code-generation environment: writing a function, one token at a time (chapter 3).

An *environment* is the world a policy acts in. Gymnasium's contract:

    observation, info = env.reset(seed=..., options=...)        # a new episode
    observation, reward, terminated, truncated, info = env.step(action)

In ``CodeGenEnv``:

    episode      one task: the policy continues the task's prompt
    observation  <bos> + prompt + the tokens written so far, as ids, padded with <pad>
                 to a fixed size, plus the number of valid ids ("length")
    action       the id of the next token (a character, with `CharTokenizer`)
    end          <eos> ends the episode: terminated (the policy says "done");
                 max_new_tokens written without <eos>: truncated (we cut it off)
    reward       0 at every step; at the end, the sandbox runs prompt + completion
                 against the task's tests and `reward_fn(task, completion, report)`
                 turns the report into one number (default: fraction of tests passed)

Many episodes in lockstep (``BatchedCodeGen``, ``rollout_batch``) and the simple policies that
drive them are in `course_lib.gru.batched_env`.

Importing this module does not import torch.
"""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from course_lib.rewards import RewardFn, fraction_passed, reward_of
from course_lib.sandbox import run_tests
from course_lib.tasks import Task, load_tasks
from course_lib.tokenizers import course_tokenizer, id_mask

ENV_ID = "CodeGen-v0"
DEFAULT_MAX_NEW_TOKENS = 160  # the longest reference solution (146 characters) + <eos> fits


# -----------------------------------------------------------------------------
# reward


# -----------------------------------------------------------------------------
# the action alphabet and its mask

def action_alphabet(tasks: Sequence[Task], tokenizer) -> np.ndarray:
    """The token ids a policy may write: every character of the TRAINING solutions, plus <eos>.

    One alphabet for all tasks. The character-level PPO work log allowed, for each task, that task's own
    characters: on a validation task this tells the policy which characters the
    hidden answer uses (and forbids the others), which leaks the answer. Here
    val/test solutions never shape the alphabet, whatever tasks are passed.
    Returns the ids sorted, as an int64 array.
    """
    train = [t for t in tasks if t.split == "train"]
    if not train:
        raise ValueError("action_alphabet needs training tasks (split='train'): the alphabet is made "
                         "of their solutions' characters; got none. Pass load_tasks() or load_tasks('train').")
    chars = "".join(sorted(set("".join(t.solution for t in train))))
    return np.array(sorted(set(tokenizer.token_ids(chars)) | {tokenizer.eos_id}), dtype=np.int64)


def alphabet_mask(alphabet: Sequence[int], vocab_size: int) -> np.ndarray:
    """The action mask for an alphabet: 1 for allowed ids, 0 for the others (int8, gymnasium's convention)."""
    return id_mask(vocab_size, alphabet).astype(np.int8)


_COURSE_ALPHABETS: dict[str, np.ndarray] = {}  # by tokenizer fingerprint: loading the tasks takes a while


def course_alphabet(tokenizer) -> np.ndarray:
    """The course's alphabet: `action_alphabet` of the course's training tasks."""
    key = tokenizer.fingerprint()
    if key not in _COURSE_ALPHABETS:
        _COURSE_ALPHABETS[key] = action_alphabet(load_tasks("train"), tokenizer)
    return _COURSE_ALPHABETS[key].copy()


def _course_tokenizer():
    return course_tokenizer()


# -----------------------------------------------------------------------------
# one episode's result


# -----------------------------------------------------------------------------
# the environment

class CodeGenEnv(gym.Env):
    """Write the body of a function, one token per step; the tests score it at the end.

    Args:
        tasks: the tasks episodes are drawn from. None: the course's tasks of `split`.
        tokenizer: None means `course_tokenizer()`.
        split: which split(s) to draw from when tasks is None.
        max_new_tokens: an episode is truncated after this many tokens without <eos>.
        reward_fn: reward_fn(task, completion, report) -> float, called once at the end.
        alphabet: allowed token ids. None: `course_alphabet(tokenizer)`, the same for every
            task and every split (pass `action_alphabet(your_tasks, tokenizer)` for your own tasks).
        timeout, memory_mb: the sandbox's limits for one program.

    Terminated vs truncated. `terminated` = the policy wrote <eos>: the program is
    finished. `truncated` = it hit max_new_tokens: we cut it. Never both: <eos> as
    the last allowed token is a termination. Gymnasium's general advice is to
    bootstrap (add gamma * V(next observation)) after a truncation, because a time
    limit usually cuts off rewards that were still to come. Not here: the objective
    is the score of the program written within max_new_tokens (what evaluation
    measures); the cut program is scored at the cut and paid in full, and nothing
    follows. So a learner treats both ends alike (value after the last step = 0);
    bootstrapping on truncation would promise a policy that never stops rewards it
    never gets. The flags stay distinct because "finished" and "cut off" are
    different outcomes: the truncation rate tells you the policy has not learned
    to stop, and a reward may treat them differently (chapter 7).

    Actions outside the mask: any id of the action space (the whole vocabulary) is
    accepted, as gymnasium environments do; masking is the policy's job. Such an
    action is written like any other and flagged: info["in_mask"] is False for
    that step and info["out_of_mask"] counts them at the end. An id outside the
    action space raises ValueError.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # fps: only for viewers that animate text

    def __init__(self, tasks: Sequence[Task] | None = None, tokenizer=None, *,
                 split: str | Sequence[str] = "train",
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 reward_fn: RewardFn = fraction_passed,
                 alphabet: Sequence[int] | None = None,
                 timeout: float = 2.0, memory_mb: int = 256,
                 render_mode: str | None = None):
        self.tasks = list(tasks) if tasks is not None else load_tasks(split)
        if not self.tasks:
            raise ValueError("CodeGenEnv needs at least one task")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.tokenizer = tokenizer if tokenizer is not None else _course_tokenizer()
        self.alphabet = np.asarray(alphabet if alphabet is not None else course_alphabet(self.tokenizer),
                                   dtype=np.int64)
        self.max_new_tokens = max_new_tokens
        self.reward_fn = reward_fn
        self.timeout, self.memory_mb = timeout, memory_mb
        self.render_mode = render_mode

        self._by_id = {t.id: t for t in self.tasks}
        self._prompt_ids = {t.id: np.array(self.tokenizer.encode(t.prompt, add_bos=True), dtype=np.int64)
                            for t in self.tasks}
        self.max_len = max(len(p) for p in self._prompt_ids.values()) + max_new_tokens
        vocab = len(self.tokenizer)
        self.action_mask = alphabet_mask(self.alphabet, vocab)
        self.action_space = spaces.Discrete(vocab)
        self.observation_space = spaces.Dict({
            "tokens": spaces.Box(0, vocab - 1, shape=(self.max_len,), dtype=np.int64),
            "length": spaces.Discrete(self.max_len + 1),
        })
        self.task: Task | None = None
        self._done = True

    # gymnasium API ------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode: options={"task_id": ...} picks the task, else it is drawn with the env's RNG."""
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        elif task_id in self._by_id:
            self.task = self._by_id[task_id]
        else:
            raise ValueError(f"unknown task_id {task_id!r}: this environment has {len(self.tasks)} tasks, "
                             f"e.g. {[t.id for t in self.tasks[:3]]}")
        prompt = self._prompt_ids[self.task.id]
        self._tokens = np.full(self.max_len, self.tokenizer.pad_id, dtype=np.int64)
        self._tokens[:len(prompt)] = prompt
        self._prompt_len = self._length = len(prompt)
        self._out_of_mask = 0
        self._done = False
        return self._observation(), self._info()

    def step(self, action):
        if self._done:
            raise RuntimeError("the episode is over (terminated or truncated): call reset() to start another")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not a token id: expected an integer in "
                             f"0..{self.action_space.n - 1} (the tokenizer's vocabulary)")
        action = int(action)
        in_mask = bool(self.action_mask[action])
        self._out_of_mask += not in_mask
        self._tokens[self._length] = action
        self._length += 1

        terminated = action == self.tokenizer.eos_id
        truncated = not terminated and self._length - self._prompt_len >= self.max_new_tokens
        reward = 0.0
        info = self._info(in_mask=in_mask)
        if terminated or truncated:  # the only step with a reward: run the tests
            self._done = True
            completion = self.completion
            report = run_tests(self.task.program(completion), self.task.tests,
                               timeout=self.timeout, memory_mb=self.memory_mb)
            reward = reward_of(self.reward_fn, self.task, completion, report,
                               n_tokens=self._length - self._prompt_len - int(terminated))
            info.update(completion=completion, passed=report.passed, total=report.total,
                        status=_status_name(report.status), out_of_mask=self._out_of_mask)
        return self._observation(), reward, terminated, truncated, info

    def render(self):
        """render_mode="ansi": the prompt and the code written so far, as text."""
        if self.render_mode == "ansi" and self.task is not None:
            return self.task.prompt + self.completion + ("" if self._done else "▌")
        return None

    # helpers ------------------------------------------------------------------
    @property
    def generated(self) -> np.ndarray:
        """The ids written so far in this episode (<eos> included if written)."""
        return self._tokens[self._prompt_len:self._length].copy()

    @property
    def completion(self) -> str:
        """The text written so far: the generated ids without <eos> (and other special tokens)."""
        return self.tokenizer.decode(self.generated, skip_special=True)

    def _observation(self) -> dict:
        return {"tokens": self._tokens.copy(), "length": np.int64(self._length)}

    def _info(self, **extra) -> dict:
        return {"task_id": self.task.id, "steps": self._length - self._prompt_len,
                "action_mask": self.action_mask.copy(), **extra}


def _status_name(status) -> str:
    return getattr(status, "value", status)


def register() -> None:
    """Register CodeGenEnv as "CodeGen-v0" with gymnasium (safe to call many times)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="course_lib.gru.env:CodeGenEnv")
