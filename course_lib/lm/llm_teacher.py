"""A teacher for the language model (chapter 11, the teacher-guided GRPO README): who answers the train tasks.

    Teacher          the interface: solutions(tasks)[i] is the text to write after the task's prompt, or None
    OfflineTeacher   the train tasks' reference solutions, written in the prompt style's answer format
    HTTPTeacher      any OpenAI-compatible server (vLLM, a hosted model) asked for each train task
    teacher_examples asks a teacher once, keeps the answers that pass their task's tests in the sandbox,
                     and refuses any val/test task or any answer that holds a val/test solution

`course_lib.lm.llm_rl` adds the verified answers to teacher-guided GRPO's loss.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Protocol

from course_lib.corpus import Example, held_out_solutions
from course_lib.lm.evaluation import run_completions
from course_lib.lm.protocol import (CHAT, STYLES, answer_code, extract_completion, format_prompt, format_response,
                                    prompt_for, stop_sequences_for)

class Teacher(Protocol):
    """Anything that answers tasks: solutions(tasks)[i] is the text to write after
    prompt_for(tasks[i], style), or None when it has no answer."""

    style: str

    def solutions(self, tasks) -> list[str | None]: ...


def teacher_response(task, style: str, thinking: str = "") -> str:
    """A reference solution written as the student must write it: the body alone after a
    completion prompt; the whole function in a ```python block (`protocol.format_response`),
    after <think>...</think> for the instruct style, alone for the chat style."""
    if style == "completion":
        return task.solution
    return format_response(task.prompt + task.solution, None if style == CHAT else thinking)


class OfflineTeacher:
    """The reference solutions of `train` tasks (None for any other split: no held-out solution leaks)."""

    def __init__(self, style: str = "completion"):
        self.style = style

    def solutions(self, tasks) -> list[str | None]:
        return [teacher_response(t, self.style) if t.split == "train" else None for t in tasks]


class HTTPTeacher:
    """An OpenAI-compatible server (vLLM's `vllm serve MODEL`) as a teacher, through urllib only.

    url: the endpoint (".../v1/completions" or ".../v1/chat/completions") or the server's
    base ("http://localhost:8000"), which picks /v1/completions for style "completion" and
    /v1/chat/completions for "instruct". The answer's text goes through the same extraction
    as the student's (`protocol.extract_completion`); an answer with no code is None.
    extra: more fields for the request body, e.g. {"chat_template_kwargs": {"enable_thinking": True}}.
    """

    def __init__(self, url: str, model: str, *, style: str = "completion", temperature: float = 0.7,
                 top_p: float = 0.8, max_tokens: int = 512, timeout: float = 60.0, api_key: str | None = None,
                 extra: dict | None = None):
        if style == CHAT:
            raise ValueError("an HTTP teacher answers 'completion' or 'instruct' prompts; for the chat style use "
                             "the offline teacher (drop --teacher-url)")
        if style not in STYLES:
            raise ValueError(f"unknown prompt style {style!r}; choose one of {STYLES}")
        url = url.rstrip("/")
        if not url.endswith("/completions"):
            url += "/v1/chat/completions" if style == "instruct" else "/v1/completions"
            url = url.replace("/v1/v1/", "/v1/")
        self.url, self.model, self.style = url, model, style
        self.chat = url.endswith("/chat/completions")
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.timeout, self.api_key, self.extra = timeout, api_key, dict(extra or {})

    def request_body(self, task) -> dict:
        body = {"model": self.model, "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "n": 1}
        prompt = format_prompt(task, self.style)
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
            if stop_sequences_for(self.style):
                body["stop"] = list(stop_sequences_for(self.style))[:4]  # the OpenAI API takes at most 4
        return {**body, **self.extra}

    def ask(self, task) -> str:
        """The raw text of the server's first choice for this task."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(self.request_body(task)).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"the teacher at {self.url} answered HTTP {e.code}: {e.read()[:200]!r}") from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise ConnectionError(f"no teacher answers at {self.url} ({e}); start one, e.g. "
                                  f"`vllm serve {self.model}`, or use OfflineTeacher") from e
        try:
            answer = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"the teacher at {self.url} did not answer with JSON ({e}); it began {raw[:80]!r}: "
                             "is this an OpenAI-compatible endpoint?") from None
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise ValueError(f"the teacher at {self.url} answered without choices: {str(answer)[:200]}")
        choice = answer["choices"][0]
        return choice["message"]["content"] if self.chat else choice["text"]

    def solutions(self, tasks) -> list[str | None]:
        out: list[str | None] = []
        for task in tasks:
            text = self.ask(task)
            code = extract_completion(text, stop_sequences_for(self.style))
            # completion style: learn the extracted body; instruct: the whole answer, thinking included
            out.append(None if not code.strip() else (code if self.style == "completion" else text))
        return out


def teacher_examples(teacher: Teacher, tasks, *, verify: bool = True, timeout: float = 2.0,
                     tokenizer=None) -> list[Example]:
    """The teacher's answers for the TRAIN tasks among tasks, as SFT examples (prompt -> answer).

    Only train tasks are asked. With verify, an answer is kept only if the code the sandbox would
    run for it (`protocol.answer_code`, as for the student's samples) passes the task's tests
    (the teacher-guided GRPO README kept only valid code). Raises if an answer holds a val/test
    reference solution. tokenizer: the student's, needed for the chat style (its chat template).
    """
    train = [t for t in tasks if t.split == "train"]
    answers = teacher.solutions(train) if train else []
    pairs = [(t, a) for t, a in zip(train, answers) if a]
    if verify and pairs:
        passed = run_completions([t for t, _ in pairs], [answer_code(t, a, teacher.style) for t, a in pairs],
                                 timeout=timeout)
        pairs = [pair for pair, ok in zip(pairs, passed) if ok]
    examples = [Example(prompt_for(t, teacher.style, tokenizer), a, f"teacher:{t.id}") for t, a in pairs]
    held_out = held_out_solutions(tasks)
    leaks = [(e.source, i) for e in examples for i, s in held_out.items() if s.strip() and s in e.target]
    if leaks:
        raise ValueError(f"teacher answers hold val/test solutions (example, task): {leaks[:3]}")
    return examples
