"""The stand-in OpenAI-compatible teacher server over loopback, and the errors a client sees."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from course_lib.lm.protocol import extract_completion, extract_thinking, format_prompt
from course_lib.tasks import load_tasks
from course_lib.lm.teacher_server import UNKNOWN_ANSWER, TeacherServer, answers_from, chat_prompt


def post(url: str, body, timeout: float = 10.0) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def echo(prompt: str) -> str:
    return f"<think>\nread {len(prompt)} characters\n</think>\n\n```python\nx = {prompt!r}\n```\n"


def test_models_and_completions_in_openai_format():
    with TeacherServer(echo, model="m") as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1") and server.port > 0
        status, models = get(server.url + "/models")
        assert status == 200 and models["object"] == "list" and [m["id"] for m in models["data"]] == ["m"]

        status, reply = post(server.url + "/completions", {"model": "m", "prompt": "abc", "n": 3, "temperature": 0.7})
        assert status == 200 and reply["object"] == "text_completion" and reply["model"] == "m"
        assert [c["index"] for c in reply["choices"]] == [0, 1, 2]
        assert all(c["text"] == echo("abc") and c["finish_reason"] == "stop" for c in reply["choices"])
        assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]

        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"}, {"role": "user", "content": "second"}]
        status, reply = post(server.url + "/chat/completions", {"model": "m", "messages": messages})
        assert status == 200 and reply["object"] == "chat.completion"
        message = reply["choices"][0]["message"]
        assert message["role"] == "assistant" and message["content"] == echo("second")  # the last user message
        assert server.requests == 2
    with pytest.raises(RuntimeError, match="not running"):
        server.url


def test_port_zero_gives_distinct_free_ports_and_stop_frees_it():
    with TeacherServer(echo) as a, TeacherServer(echo) as b:
        assert a.port != b.port
        port = a.port
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing listens there any more


def test_sampling_options_reach_an_answer_that_takes_them():
    seen = []

    def answer(prompt, *, temperature=None, sample_index=0):
        seen.append((temperature, sample_index))
        return f"{prompt}:{sample_index}"

    with TeacherServer(answer) as server:
        _, reply = post(server.url + "/completions", {"prompt": "p", "n": 2, "temperature": 0.5, "top_p": 0.8})
    assert [c["text"] for c in reply["choices"]] == ["p:0", "p:1"]
    assert seen == [(0.5, 0), (0.5, 1)]  # top_p is accepted by the server but not passed: answer does not take it


@pytest.mark.parametrize("path, body, status, words", [
    ("/completions", b"{not json", 400, "not valid JSON"),
    ("/completions", [1, 2], 400, "JSON object"),
    ("/completions", {"prompt": 3}, 400, "'prompt' must be a string"),
    ("/completions", {"prompt": "p", "n": 0}, 400, "'n' must be an integer"),
    ("/completions", {"prompt": "p", "model": "gpt-9"}, 404, "does not exist"),
    ("/chat/completions", {"messages": []}, 400, "non-empty list"),
    ("/chat/completions", {"messages": [{"role": "system", "content": "x"}]}, 400, "no message with role 'user'"),
    ("/chat/completions", {"messages": [{"role": "user"}]}, 400, "string 'role' and 'content'"),
    ("/embeddings", {"input": "x"}, 404, "no route"),
])
def test_bad_requests_get_openai_error_bodies(path, body, status, words):
    with TeacherServer(echo) as server:
        got, reply = post(server.url + path, body)
    assert got == status
    assert words in reply["error"]["message"] and reply["error"]["type"]


def test_a_failing_answer_is_a_500_and_the_server_keeps_serving():
    def answer(prompt):
        if prompt == "boom":
            raise KeyError("no such task")
        return "fine"

    with TeacherServer(answer) as server:
        status, reply = post(server.url + "/completions", {"prompt": "boom"})
        assert status == 500 and "KeyError" in reply["error"]["message"]
        assert post(server.url + "/completions", {"prompt": "ok"})[1]["choices"][0]["text"] == "fine"


def test_constructor_checks():
    with pytest.raises(TypeError, match="function"):
        TeacherServer("not callable")
    with pytest.raises(ValueError, match="loopback"):
        TeacherServer(echo, host="0.0.0.0")
    server = TeacherServer(echo).start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            server.start()
    finally:
        server.stop()
    server.stop()  # stopping twice is harmless


def test_chat_prompt_direct():
    assert chat_prompt([{"role": "user", "content": "a"}]) == "a"


# --- what a client sees when the teacher is down, slow, or not speaking JSON --------------------

def test_server_down_refuses_the_connection():
    with TeacherServer(echo) as server:
        url = server.url
    with pytest.raises(urllib.error.URLError, match="refused"):
        post(url + "/completions", {"prompt": "p"}, timeout=2)


def test_slow_teacher_times_out_the_client():
    with TeacherServer(echo, delay=1.0) as server:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(server.url + "/completions", {"prompt": "p"}, timeout=0.2)


class _NotJson(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"<html>502 Bad Gateway</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def not_json_url():
    httpd = HTTPServer(("127.0.0.1", 0), _NotJson)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_a_reply_that_is_not_json_is_detected(not_json_url):
    with pytest.raises(json.JSONDecodeError):
        post(not_json_url + "/completions", {"prompt": "p"})


# --- chapter 10's HTTPTeacher against the stand-in, over loopback --------------------------------

@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


@pytest.mark.parametrize("style", ["completion", "instruct"])
def test_http_teacher_over_loopback_reproduces_the_offline_teacher(tasks, style):
    from course_lib.lm.llm_teacher import HTTPTeacher, OfflineTeacher, teacher_examples

    offline = OfflineTeacher(style)
    train = [t for t in tasks if t.split == "train"][:6]
    held_out = [t for t in tasks if t.split == "val"][:2]
    with TeacherServer(answers_from(offline, train), model="stand-in") as server:
        http = HTTPTeacher(server.url, "stand-in", style=style, timeout=10)
        assert http.url == server.url + ("/chat/completions" if style == "instruct" else "/completions")
        got = http.solutions(train + held_out)
        via_http = teacher_examples(http, train + held_out)
        assert server.requests == len(train) * 2 + len(held_out)  # held-out tasks are never asked by teacher_examples
    assert got[:len(train)] == offline.solutions(train)
    assert got[len(train):] == [None, None]  # the stand-in knows no val solution: no code, no answer
    direct = teacher_examples(offline, train + held_out)
    assert [(e.prompt, e.target) for e in via_http] == [(e.prompt, e.target) for e in direct] and len(direct) == len(train)


def test_http_teacher_errors_are_clear(tasks, not_json_url):
    from course_lib.lm.llm_teacher import HTTPTeacher, OfflineTeacher

    task = next(t for t in tasks if t.split == "train")
    with TeacherServer(answers_from(OfflineTeacher("instruct"), [task]), model="stand-in") as server:
        url = server.url
        with pytest.raises(RuntimeError, match="HTTP 404"):  # the wrong model name
            HTTPTeacher(url, "Qwen/Qwen3-32B-FP8", style="instruct").ask(task)
    with pytest.raises(ConnectionError, match="no teacher answers"):  # the server is down
        HTTPTeacher(url, "stand-in", style="instruct", timeout=2).ask(task)
    with TeacherServer(lambda p: "slow", model="stand-in", delay=1.0) as server:
        with pytest.raises(ConnectionError, match="no teacher answers|timed out"):
            HTTPTeacher(server.url, "stand-in", timeout=0.2).ask(task)
    with pytest.raises(ValueError, match="JSON|json"):  # an answer that is not JSON (a proxy's error page)
        HTTPTeacher(not_json_url, "stand-in").ask(task)


def test_answers_from_refuses_unknown_prompts(tasks):
    from course_lib.lm.llm_teacher import OfflineTeacher

    answer = answers_from(OfflineTeacher("instruct"), tasks)
    train = next(t for t in tasks if t.split == "train")
    held_out = next(t for t in tasks if t.split == "val")
    assert extract_thinking(answer(format_prompt(train, "instruct"))) is not None
    assert extract_completion(answer(format_prompt(train, "instruct")), ()).strip()
    assert answer(format_prompt(held_out, "instruct")) == UNKNOWN_ANSWER
    assert extract_completion(UNKNOWN_ANSWER, ()) == ""


def test_command_line_server_serves_the_train_references():
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "course_lib.lm.teacher_server", "--port", "0", "--model", "cli"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "stand-in teacher 'cli' at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        status, models = get(url + "/models")
        assert status == 200 and models["data"][0]["id"] == "cli"
        task = next(t for t in load_tasks() if t.split == "train")
        _, reply = post(url + "/chat/completions",
                        {"model": "cli", "messages": [{"role": "user", "content": format_prompt(task, "instruct")}]})
        assert extract_thinking(reply["choices"][0]["message"]["content"]) is not None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
