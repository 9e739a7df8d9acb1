"""A stand-in teacher behind an OpenAI-compatible endpoint, on this machine (chapter 11).

The teacher-guided GRPO README asks a large teacher model (Qwen3-32B, served by vLLM with
`vllm serve MODEL --port 8129`) for reasoning traces over HTTP, in the format
OpenAI's API made standard: POST a JSON request to `/v1/completions` (a prompt)
or `/v1/chat/completions` (a list of messages), get JSON back. No such server
runs here, so this module serves the same three routes from the standard
library alone, answering from any Python function `answer(prompt) -> text`:
the train split's reference solutions, or a local model's `generate`.

    with TeacherServer(answer, model="stand-in-teacher") as server:
        server.url                      # "http://127.0.0.1:PORT/v1", PORT chosen free
        ...                             # any OpenAI-compatible client talks to it

Routes (the fields a client reads; vLLM's replies carry these and more):

    GET  /v1/models              {"object": "list", "data": [{"id": MODEL, "object": "model", ...}]}
    POST /v1/completions         {"model", "prompt", "n"?, ...}  ->  {"choices": [{"index", "text", "finish_reason"}], "usage"}
    POST /v1/chat/completions    {"model", "messages", "n"?, ...} ->  {"choices": [{"index", "message": {"role", "content"}, ...}]}

A chat request is answered from the content of its last "user" message.
Sampling options (temperature, top_p, max_tokens, ...) are accepted and passed
on to `answer` only if it takes them as keyword arguments. A bad request gets
HTTP 400 (404 for an unknown route or model) and OpenAI's error body,
{"error": {"message": ..., "type": ..., "code": ...}}, whose message says what to fix.

It listens on 127.0.0.1 only (loopback: nothing outside this machine reaches it)
and serves each request in its own thread; calls to `answer` are serialised
by a lock, so a model that is not thread-safe can answer.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

DEFAULT_MODEL = "course-stand-in-teacher"
MAX_N = 64  # samples per request; more is almost surely a mistake in the client
SAMPLING_OPTIONS = ("temperature", "top_p", "max_tokens", "seed", "stop", "presence_penalty")


class RequestError(Exception):
    """A client's request the server refuses; becomes an OpenAI-style error reply."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.kind = status, kind


def _answer_options(answer: Callable) -> set[str]:
    """The sampling options `answer` accepts as keywords (all of them if it takes **kwargs)."""
    try:
        params = inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return set(SAMPLING_OPTIONS) | {"sample_index"}
    return {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} & (
        set(SAMPLING_OPTIONS) | {"sample_index"})


def chat_prompt(messages) -> str:
    """The text a chat request is answered from: its last user message (the teacher-guided GRPO README's single-turn use)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' must be a non-empty list of {\"role\": ..., \"content\": ...} objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise RequestError(400, f"messages[{i}] must be an object with string 'role' and 'content', got {m!r}")
    users = [m["content"] for m in messages if m["role"] == "user"]
    if not users:
        raise RequestError(400, "'messages' holds no message with role 'user'; the teacher answers the last one")
    return users[-1]


class TeacherServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1 that answers with `answer(prompt) -> str`.

    port=0 lets the operating system pick a free port (read it from `.port` or `.url`).
    Use it as a context manager, or call start() and stop(). `requests` counts the
    completion requests served; `delay` (seconds) makes every answer slow, to show a
    client's timeout.
    """

    def __init__(self, answer: Callable[..., str], *, model: str = DEFAULT_MODEL, host: str = "127.0.0.1",
                 port: int = 0, delay: float = 0.0):
        if not callable(answer):
            raise TypeError(f"answer must be a function prompt -> text, got {type(answer).__name__}")
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the stand-in teacher listens on loopback only, got host {host!r}; use '127.0.0.1'")
        self.answer, self.model, self.host, self.delay = answer, model, host, delay
        self._options = _answer_options(answer)
        self._requested_port = port
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests = 0

    # --- life cycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the teacher server is not running; call start() or use it in a `with` block")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL a client is given, as for vLLM: http://127.0.0.1:PORT/v1."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "TeacherServer":
        if self._httpd is not None:
            raise RuntimeError(f"the teacher server is already running at {self.url}")
        self._httpd = ThreadingHTTPServer((self.host, self._requested_port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="teacher-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "TeacherServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the OpenAI-format replies ------------------------------------------------------------

    def models_reply(self) -> dict:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0,
                                            "owned_by": "course_lib"}]}

    def complete(self, route: str, request) -> dict:
        """The reply to a POST on /v1/completions ("completions") or /v1/chat/completions ("chat")."""
        if not isinstance(request, dict):
            raise RequestError(400, f"the request body must be a JSON object, got {type(request).__name__}")
        model = request.get("model", self.model)
        if model != self.model:
            raise RequestError(404, f"the model {model!r} does not exist; this server serves {self.model!r} "
                                    "(GET /v1/models lists it)", "model_not_found")
        n = request.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
            raise RequestError(400, f"'n' must be an integer from 1 to {MAX_N}, got {n!r}")
        if route == "chat":
            prompt = chat_prompt(request.get("messages"))
        else:
            prompt = request.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str):
                raise RequestError(400, f"'prompt' must be a string (one prompt per request), got {prompt!r}")
        options = {k: request[k] for k in SAMPLING_OPTIONS if k in request and k in self._options}
        texts = []
        for i in range(n):
            kwargs = dict(options, **({"sample_index": i} if "sample_index" in self._options else {}))
            with self._lock:
                text = self.answer(prompt, **kwargs)
            if not isinstance(text, str):
                raise RequestError(500, f"the teacher's answer function returned {type(text).__name__}, not a string",
                                   "server_error")
            texts.append(text)
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.requests += 1
            number = self.requests
        stamp = {"created": int(time.time()), "model": self.model}
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": sum(len(t.split()) for t in texts)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]  # whitespace words, not tokens
        if route == "chat":
            choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                       for i, t in enumerate(texts)]
            return {"id": f"chatcmpl-{number}", "object": "chat.completion", **stamp,
                    "choices": choices, "usage": usage}
        choices = [{"index": i, "text": t, "logprobs": None, "finish_reason": "stop"} for i, t in enumerate(texts)]
        return {"id": f"cmpl-{number}", "object": "text_completion", **stamp, "choices": choices, "usage": usage}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # quiet: a notebook should not fill with access logs
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): nobody to tell
                    self.close_connection = True

            def _error(self, e: RequestError) -> None:
                self._send(e.status, {"error": {"message": str(e), "type": e.kind, "param": None, "code": e.status}})

            def _route(self) -> str:
                return self.path.split("?", 1)[0].rstrip("/")

            def do_GET(self):
                if self._route() == "/v1/models":
                    self._send(200, server.models_reply())
                else:
                    self._error(RequestError(404, f"no route GET {self.path}; this server has GET /v1/models, "
                                                  "POST /v1/completions and POST /v1/chat/completions", "not_found"))

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                route = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}.get(self._route())
                try:
                    if route is None:
                        raise RequestError(404, f"no route POST {self.path}; use /v1/completions or "
                                                "/v1/chat/completions", "not_found")
                    try:
                        request = json.loads(raw.decode("utf-8"))
                    except (UnicodeDecodeError, json.JSONDecodeError) as e:
                        raise RequestError(400, f"the request body is not valid JSON ({e}); send "
                                                "Content-Type: application/json with a JSON object") from None
                    self._send(200, server.complete(route, request))
                except RequestError as e:
                    self._error(e)
                except Exception as e:  # the answer function failed: tell the client, keep serving
                    self._error(RequestError(500, f"the teacher's answer function raised {type(e).__name__}: {e}",
                                             "server_error"))

        return Handler


UNKNOWN_ANSWER = "<think>\nI do not know this problem.\n</think>\n"  # holds no code: extraction gives ""


def answers_from(teacher, tasks) -> Callable[[str], str]:
    """answer(prompt) for the server: what `teacher` answers to the task whose prompt it is.

    teacher: anything with .style and .solutions(tasks) (chapter 10's `llm_rl.Teacher`), asked
    once, here, for all tasks. A prompt it has no answer for (a val or test task, for the
    offline teacher) gets UNKNOWN_ANSWER, a reply that holds no code.
    """
    from course_lib.lm.protocol import format_prompt  # transformers is heavy: the server itself does not need it

    tasks = list(tasks)
    table = {format_prompt(t, teacher.style): a for t, a in zip(tasks, teacher.solutions(tasks)) if a}

    def answer(prompt: str) -> str:
        return table.get(prompt, UNKNOWN_ANSWER)

    return answer


def main(argv: list[str] | None = None) -> int:
    """`python -m course_lib.lm.teacher_server --port 8129`: serve the train split's reference answers until Ctrl-C."""
    import argparse

    from course_lib.lm.llm_teacher import OfflineTeacher  # transformers is heavy: only the command line needs it
    from course_lib.tasks import load_tasks

    parser = argparse.ArgumentParser(prog="python -m course_lib.lm.teacher_server", description=main.__doc__)
    parser.add_argument("--port", type=int, default=8129, help="port on 127.0.0.1 (0: any free one) [8129]")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the model name it answers to [{DEFAULT_MODEL}]")
    parser.add_argument("--style", default="instruct", choices=("completion", "instruct"),
                        help="prompt style the answers are for [instruct]")
    args = parser.parse_args(argv)
    answer = answers_from(OfflineTeacher(args.style), load_tasks("train"))
    with TeacherServer(answer, model=args.model, port=args.port) as server:
        print(f"stand-in teacher {args.model!r} at {server.url} (Ctrl-C stops it)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
