"""The generation protocol of chapters 9-11: how a task becomes a prompt, and a model's text becomes the code the
sandbox runs. The same in training, evaluation and every chapter (`course_lib.lm.evaluation` runs it).

1. PROMPT      `format_prompt`: a base model continues the task's prompt (signature + docstring), as in
               HumanEval; an instruction-tuned model is asked for <think> reasoning and a ```python block, as in
               the teacher-guided GRPO README; `chat_prompt`: a chat model asked through its chat template.
2. EXTRACT     `extract_completion`: drop <think>...</think> blocks; if the text holds a markdown code block
               take its code; otherwise cut the text at the first stop sequence (a new top-level def, class,
               print, comment, ...): what a base model writes after the function body is not part of the answer.
               `extract_function`: a chat model's whole function, with the imports it needs.
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert ", "\n```")


STYLES = ("completion", "instruct")


CHAT = "chat"  # an instruct model asked through its chat template (`chat_prompt`, `extract_function`)


INSTRUCT_TEMPLATE = (
    "Complete the following Python function.\n\n"
    "```python\n{prompt}```\n\n"
    "Think step by step inside <think> and </think>, then give the whole function "
    "in one ```python code block.\n")


CHAT_REQUEST = (
    "Complete this Python function. Answer with the whole function, and the imports it needs, "
    "in one ```python code block.\n\n```python\n{prompt}```")


# -----------------------------------------------------------------------------
# 1. prompt

def format_prompt(task, style: str = "completion") -> str:
    """The text the model reads: the task's prompt itself, or the instruction around it (the teacher-guided GRPO README)."""
    if style == "completion":
        return task.prompt
    if style == "instruct":
        return INSTRUCT_TEMPLATE.format(prompt=task.prompt)
    raise ValueError(f"unknown prompt style {style!r}; choose one of {STYLES}")


def chat_prompt(task, tokenizer) -> str:
    """For an instruct model: a user message asking for the function, in the model's own chat template."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the chat style needs the tokenizer of an instruct model with a chat template "
                         "(such as smollm2-135m-instruct); a base model takes the 'completion' style")
    message = {"role": "user", "content": CHAT_REQUEST.format(prompt=task.prompt)}
    return tokenizer.apply_chat_template([message], add_generation_prompt=True, tokenize=False)


def prompt_for(task, style: str, tokenizer=None) -> str:
    """format_prompt's styles, and "chat" (which needs the model's tokenizer)."""
    return chat_prompt(task, tokenizer) if style == CHAT else format_prompt(task, style)


def stop_sequences_for(style: str) -> tuple[str, ...]:
    """Stop sequences end a base model's continuation; an instruct answer ends with <eos> (its code may hold defs)."""
    return STOP_SEQUENCES if style == "completion" else ()


def answer_code(task, text: str, style: str) -> str:
    """What the sandbox runs after the task's prompt, from what the model wrote in this style."""
    if style == CHAT:
        return extract_function(text, task.entry_point)
    return extract_completion(text, stop_sequences_for(style))


# -----------------------------------------------------------------------------
# 2. extract

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)(?:^```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)


def strip_thinking(text: str) -> str:
    """Drop every <think>...</think> block. An unclosed <think> (cut off while thinking)
    drops the rest; a lone </think> (the template opened the block) drops what precedes it."""
    text = _THINK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text


def extract_fenced_code(text: str) -> str | None:
    """The code of the first ```python block (else of the first non-empty block); None if there is none.

    A block cut off by the token limit (no closing fence) still counts.
    """
    blocks = [(lang.lower(), code) for lang, code in _FENCE.findall(text) if code.strip()]
    if not blocks:
        return None
    code = next((c for lang, c in blocks if lang in ("python", "py", "python3")), blocks[0][1])
    return code if code.endswith("\n") else code + "\n"


def extract_thinking(text: str) -> str | None:
    """The reasoning of a unified answer: the text of its first <think>...</think> block, stripped.

    A lone </think> (the template opened the block) gives what precedes it; an unclosed
    <think> (cut off while thinking) gives what follows it; no tags at all give None.
    """
    if "<think>" in text:
        inside = text.split("<think>", 1)[1]
        return inside.split("</think>", 1)[0].strip()
    if "</think>" in text:
        return text.split("</think>", 1)[0].strip()
    return None


def format_response(code: str, thinking: str | None = None) -> str:
    """The unified answer every stage writes and reads (the teacher-guided GRPO README): <think> reasoning, then one ```python block.

    The inverse of extraction: extract_thinking(format_response(c, t)) == t.strip() and
    extract_completion(format_response(c, t)) == c (with a final newline). A teacher's
    trace is stored in this form and becomes the target of teacher-SFT.
    """
    if "```" in code:
        raise ValueError("code holds a ``` fence, which would end the markdown block early; pass the bare code")
    if thinking is not None and ("<think>" in thinking or "</think>" in thinking):
        raise ValueError("thinking holds a <think> tag; pass the reasoning text alone")
    code = code if code.endswith("\n") else code + "\n"
    think = f"<think>\n{thinking.strip()}\n</think>\n\n" if thinking is not None else ""
    return f"{think}```python\n{code}```\n"


def truncate_at_stop(text: str, stop_sequences: Sequence[str] = STOP_SEQUENCES) -> str:
    """text up to (not including) the earliest stop sequence; all of it if none occurs."""
    cut = min((i for i in (text.find(s) for s in stop_sequences) if i >= 0), default=len(text))
    return text[:cut]


def extract_completion(text: str, stop_sequences: Sequence[str] = STOP_SEQUENCES) -> str:
    """What the sandbox runs after the prompt: thinking dropped, then a code block's code or the
    text cut at the first stop sequence. Ends with a newline (unless empty)."""
    text = strip_thinking(text)
    code = extract_fenced_code(text)
    if code is None:
        code = truncate_at_stop(text, stop_sequences).rstrip()
        code = code + "\n" if code.strip() else ""
    return code


_CODE_START = re.compile(r"^(?:async def |def |class |import |from \S+ import |@)", re.MULTILINE)


_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _parseable(code: str) -> str | None:
    """The longest run of whole lines, from the first, that Python parses (prose after code is cut)."""
    lines = code.splitlines()
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end]) + "\n"
        try:
            ast.parse(candidate)
        except SyntaxError:
            continue
        return candidate
    return None


def extract_function(text: str, entry_point: str) -> str:
    """An instruct model's answer -> the code that defines `entry_point`, for the sandbox to run after the prompt.

    1. Thinking dropped; the code is the first fenced block that defines `entry_point`, else the
       first fenced block, else the text itself from its first line of code (def, class, import, @).
    2. Lines Python cannot parse are cut from the end (prose after an unfenced answer, a block
       cut off by the token limit).
    3. Of the top-level statements, imports, functions and classes are kept (the helpers the
       function calls); example calls, prints, asserts and `if __name__` blocks are dropped.

    The prompt itself runs first, so its own imports and helpers are there too. A function with
    another name is not renamed: the prompt's stub stays the entry point and the tests fail,
    as they should. Nothing parseable gives "".
    """
    text = strip_thinking(text)
    blocks = [code for _, code in _FENCE.findall(text) if code.strip()]
    defines = re.compile(rf"^(?:async )?def {re.escape(entry_point)}\s*\(", re.MULTILINE)
    code = next((b for b in blocks if defines.search(b)), blocks[0] if blocks else None)
    if code is None:
        start = _CODE_START.search(text)
        code = text[start.start():] if start else ""
    code = _parseable(code)
    if code is None:
        return ""
    lines = code.splitlines()
    kept = []
    for node in ast.parse(code).body:
        if isinstance(node, _KEPT):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            kept.append("\n".join(lines[first - 1:node.end_lineno]))
    return "\n\n".join(kept) + "\n" if kept else ""
