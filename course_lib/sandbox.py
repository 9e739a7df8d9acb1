"""Run untrusted generated code against tests, safely and fast.

Chapter 1 rewards a policy for programs that pass tests. Those programs are
written by a model that is still learning, and later by one that is looking
for shortcuts: they loop forever, eat memory, kill processes, print fake
results. This module runs them so that none of that reaches the caller::

    >>> from course_lib.sandbox import run_tests
    >>> report = run_tests("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3"])
    >>> report.status, report.passed, report.total
    (<Status.PASSED: 'passed'>, 1, 1)

How it works (the book's page ``sandbox_levels.md`` has the table):

* A pool of small *worker* processes (``_sandbox_worker.py``, standard library
  only) is started once with ``subprocess`` -- never by forking the caller,
  which may hold gigabytes and torch's threads. Each worker runs inside
  bubblewrap (namespaces: no network, read-only files, own process tree) or
  ``unshare`` when available, else as a plain process ("rlimits only").
* Per job, the worker forks a fresh child that drops to an unprivileged uid,
  sets resource limits, runs the code and then each test, and reports each
  completed test on a private pipe. The worker kills the child, and every
  process it created, at the deadline.
* This side only talks to the worker over pipes, with its own watchdog: a
  worker that does not answer in time is killed and replaced.
"""

from __future__ import annotations

import atexit
import enum
import json
import os
import queue
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["run_tests", "run_tests_batch", "TestReport", "Status", "isolation_level",
           "Sandbox", "LEVELS"]

LEVELS = ("process", "unshare", "bubblewrap")   # weakest to strongest
LEVEL_ENV_VAR = "COURSE_SANDBOX_LEVEL"
WORKER_SCRIPT = Path(__file__).with_name("_sandbox_worker.py")

GRACE_SECONDS = 1.0        # how long past its deadline we wait for a worker's answer
SCRATCH_TMPFS_BYTES = 64 * 2**20
# The only environment the sandboxed code sees.
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8",
              # One malloc arena per thread would reserve 64 MiB of address
              # space each and trip RLIMIT_AS in threaded but honest code.
              "MALLOC_ARENA_MAX": "2"}


# --------------------------------------------------------------------------
# What a run produces
# --------------------------------------------------------------------------

class Status(str, enum.Enum):
    """How a run ended. ``PASSED`` is the only status where every test passed."""
    PASSED = "passed"                # every test passed
    FAILED = "failed"                # the code ran, some test failed
    SYNTAX_ERROR = "syntax_error"    # the code does not compile
    RUNTIME_ERROR = "runtime_error"  # the code raised before any test ran
    TIMEOUT = "timeout"              # killed at the time limit
    MEMORY_LIMIT = "memory_limit"    # ran out of its memory allowance
    CRASHED = "crashed"              # the process died: segfault, exit(), killed, ...


@dataclass(frozen=True)
class TestReport:
    """The outcome of running one program against its tests."""
    __test__ = False                 # not a pytest test class, despite the name

    passed: int
    total: int
    status: Status
    seconds: float
    results: tuple                   # per test: True, False, or None (never ran)
    error: str = ""                  # short message, e.g. "NameError: name 'x' is not defined"

    @property
    def all_passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


# --------------------------------------------------------------------------
# Isolation levels
# --------------------------------------------------------------------------

_strongest_level: Optional[str] = None


def isolation_level() -> str:
    """The level new sandboxes use: the strongest this machine supports.

    Set ``COURSE_SANDBOX_LEVEL`` to ``process`` or ``unshare`` to force a
    weaker one (the tests do, to check the fallback). Probing starts a
    throw-away sandbox once; the answer is cached.
    """
    strongest = _strongest_available()
    forced = os.environ.get(LEVEL_ENV_VAR, "").strip()
    if not forced:
        return strongest
    if forced not in LEVELS:
        raise ValueError(f"{LEVEL_ENV_VAR}={forced!r}: expected one of {LEVELS}")
    return min(forced, strongest, key=LEVELS.index)


def _strongest_available() -> str:
    global _strongest_level
    if _strongest_level is None:
        _strongest_level = next(level for level in reversed(LEVELS) if _level_works(level))
    return _strongest_level


def _level_works(level: str) -> bool:
    """Does a worker at this level start here and pass a trivial test?

    Trying the real thing catches every way a level can be missing: no
    binary, namespaces forbidden in a container, mounts refused, ...
    """
    if level == "process":
        return True                      # plain processes and rlimits always exist
    worker = _Worker(level, slot=99, scratch_root="/tmp")   # scratch is a private tmpfs
    try:
        outcome = worker.run({"code": "", "tests": ["assert True"], "timeout": 10.0,
                              "memory_mb": 256}, deadline=time.monotonic() + 30)
        return _report(outcome, 1, 10.0, 0.0).status is Status.PASSED
    except (_WorkerGone, OSError):
        return False
    finally:
        worker.close()


def _isolation_prefix(level: str) -> list[str]:
    """The command that wraps the worker at each level."""
    if level == "bubblewrap":
        bwrap = shutil.which("bwrap") or "bwrap"
        return [bwrap,
                "--ro-bind", "/", "/",            # the whole file system, read-only
                "--dev", "/dev", "--proc", "/proc",
                "--size", str(SCRATCH_TMPFS_BYTES), "--tmpfs", "/tmp",   # private scratch
                *_bind_back_from_tmp(),
                *_bwrap_masks(),
                # Namespaces one by one: --unshare-all would also add a user
                # namespace, in which root could no longer switch to the
                # unprivileged uid the code runs as.
                "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try",
                # No --die-with-parent: it fires when the *thread* that started
                # bwrap exits, and batches start workers from short-lived
                # threads. The worker exits by itself when its stdin closes,
                # which happens when we close it or die.
                "--new-session",
                "--clearenv", *sum((["--setenv", k, v] for k, v in WORKER_ENV.items()), []),
                "--chdir", "/tmp", "--"]
    if level == "unshare":
        unshare = shutil.which("unshare") or "unshare"
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return [unshare, *user, "--pid", "--fork", "--kill-child", "--mount-proc",
                "--net", "--ipc", "--uts", "--"]
    return []


def _private_paths() -> dict[str, list[str]]:
    """Directories the sandbox uid may not enter, each with the paths under it
    that the worker needs (Python itself, the venv, this package).

    pyenv installs Python under /root, which is mode 0700: the unprivileged
    child could not import a single module that the worker had not already
    imported. Such a directory is hidden behind an empty tmpfs and only the
    needed paths are bound back -- which also hides the rest of /root.
    """
    masks: dict[str, list[str]] = {}
    for path in sorted(_worker_paths()):
        mask = _first_private_directory(path)
        if mask and not any(path.startswith(p + os.sep) for p in masks.get(mask, [])):
            masks.setdefault(mask, []).append(path)
    return masks


def _worker_paths() -> set[str]:
    """What the worker must see: Python itself, the virtual environment, this package."""
    return {os.path.realpath(sys.base_prefix), os.path.abspath(sys.prefix),
            os.path.realpath(sys.prefix), str(WORKER_SCRIPT.parent.resolve())}


def _bind_back_from_tmp() -> list[str]:
    """Read-only binds for worker paths under /tmp, which the private tmpfs would hide
    (a checkout, and its .venv, cloned into /tmp)."""
    args = []
    for path in sorted(_worker_paths()):
        if path.startswith("/tmp/") and not any(path.startswith(a + os.sep) for a in args[2::3]):
            args += ["--ro-bind", path, path]
    return args


def _first_private_directory(path: str) -> Optional[str]:
    current = "/"
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        try:
            if not os.stat(current).st_mode & stat.S_IXOTH:
                return current
        except OSError:
            return None
    return None


def _bwrap_masks() -> list[str]:
    args = []
    for mask, paths in _private_paths().items():
        args += ["--perms", "0755", "--tmpfs", mask]
        for path in paths:
            parents = Path(path).relative_to(mask).parents
            for parent in reversed(list(parents)[:-1]):       # mask/a, mask/a/b, ...
                args += ["--perms", "0755", "--dir", str(Path(mask) / parent)]
            args += ["--ro-bind", path, path]
    return args


def _sandbox_uid(slot: int) -> int:
    """The unprivileged uid a worker's jobs run as; 0 means "cannot switch".

    Only root can switch. Each worker gets its own uid so that one job's fork
    bomb (RLIMIT_NPROC counts per uid) cannot starve a job running beside it.
    """
    if os.geteuid() != 0:
        return 0
    return 1_000_000 + (os.getpid() % 100_000) * 100 + slot % 100


# --------------------------------------------------------------------------
# One worker process, seen from the caller
# --------------------------------------------------------------------------

class _WorkerGone(Exception):
    """The worker died or stopped answering."""


class _Worker:
    """Owns one worker process: starts it lazily, talks to it, replaces it."""

    def __init__(self, level: str, slot: int, scratch_root: str):
        self.level = level
        self.uid = _sandbox_uid(slot)
        self.scratch_root = scratch_root
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        masks = _private_paths() if self.uid else {}
        settings = {
            "uid": self.uid,
            # Inside bubblewrap and unshare, /tmp is a private tmpfs.
            "scratch": self.scratch_root if self.level == "process" else "/tmp",
            "private_tmp": self.level == "unshare",
            "masks": list(masks) if self.level == "unshare" else [],
            "expose": sum(masks.values(), []) if self.level == "unshare" else [],
            "read_all": bool(masks) and self.level == "process",
        }
        command = _isolation_prefix(self.level) + [
            sys.executable, "-S", "-I", "-B", str(WORKER_SCRIPT), json.dumps(settings)]
        self.process = subprocess.Popen(
            command, env=WORKER_ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, cwd="/",
            start_new_session=True)  # our own signals (Ctrl-C) don't hit it mid-job

    def run(self, request: dict, deadline: float) -> dict:
        """Send one job and wait for its outcome until ``deadline`` (monotonic)."""
        try:
            self._send_with_restart(request)
            return _receive(self.process.stdout.fileno(), deadline)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            self.kill()
            raise _WorkerGone(type(exc).__name__) from exc

    def _send_with_restart(self, request: dict) -> None:
        """Send a job, (re)starting the worker first if it is not running.

        A worker killed between two jobs is noticed here, when the job cannot
        be sent, and replaced without charging the next job for it."""
        for attempt in (1, 2):
            if self.process is None or self.process.poll() is not None:
                self.kill()
                self.start()
            try:
                _send(self.process.stdin.fileno(), request)
                return
            except OSError:
                self.kill()
                if attempt == 2:
                    raise

    def kill(self) -> None:
        """SIGKILL the worker and everything under it.

        Under bubblewrap or unshare, the worker's death tears down its pid
        namespace, so nothing survives. At the "process" level we also walk
        /proc for its descendants first, since they would be orphaned.
        """
        if self.process is None:
            return
        for pid in _descendants(self.process.pid) + [self.process.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self.process = None

    def close(self) -> None:
        """Ask politely (EOF on its stdin), then make sure."""
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.kill()


def _send(fd: int, message: dict) -> None:
    data = json.dumps(message).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _receive(fd: int, deadline: float) -> dict:
    header = _read_exactly(fd, 4, deadline)
    return json.loads(_read_exactly(fd, struct.unpack(">I", header)[0], deadline))


def _read_exactly(fd: int, n: int, deadline: float) -> bytes:
    chunks = []
    while n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError("worker did not answer")
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError("worker closed its pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _descendants(root: int) -> list[int]:
    """Pids whose chain of parents leads to ``root`` (the worker's own /proc walk)."""
    from course_lib._sandbox_worker import descendants_of  # the worker script's code, read only for this walk
    return descendants_of(root)


# --------------------------------------------------------------------------
# From what the worker saw to a TestReport
# --------------------------------------------------------------------------

_ERROR_STATUS = {"syntax": Status.SYNTAX_ERROR, "runtime": Status.RUNTIME_ERROR,
                 "memory": Status.MEMORY_LIMIT, "exit": Status.CRASHED}


def _report(outcome: dict, total: int, timeout: float, seconds: float) -> TestReport:
    """Decide the status from the worker's observations.

    A test counts as passed only if the harness reported it *after* it ran;
    a process that stops before the final "done" line is a crash (or a
    timeout), whatever it printed.
    """
    tests = outcome.get("tests", [])
    results = tuple([kind == "pass" for kind, _ in tests] + [None] * (total - len(tests)))
    failures = [(kind, message) for kind, message in tests if kind != "pass"]
    error = outcome.get("error")

    if outcome.get("internal_error"):
        status, message = Status.CRASHED, "sandbox error: " + outcome["internal_error"]
    elif outcome.get("timed_out"):
        status, message = Status.TIMEOUT, f"time limit of {timeout:g} s exceeded"
    elif error:
        status, message = _ERROR_STATUS.get(error[0], Status.CRASHED), error[1]
    elif any(kind == "exit" for kind, _ in failures):
        status, message = Status.CRASHED, next(m for k, m in failures if k == "exit")
    elif outcome.get("flooded"):
        status, message = Status.CRASHED, "flooded the result channel"
    elif not outcome.get("done"):
        status, message = Status.CRASHED, _death_message(outcome)
    elif any(kind == "memory" for kind, _ in failures):
        status, message = Status.MEMORY_LIMIT, "MemoryError"
    elif failures:
        status, message = Status.FAILED, failures[0][1]
    else:
        status, message = Status.PASSED, ""
    return TestReport(passed=sum(r is True for r in results), total=total, status=status,
                      seconds=seconds, results=results, error=message)


def _death_message(outcome: dict) -> str:
    if outcome.get("signal"):
        try:
            name = signal.Signals(outcome["signal"]).name
        except ValueError:
            name = str(outcome["signal"])
        return f"killed by signal {name}"
    if outcome.get("exit_code") is not None:
        return f"exited with code {outcome['exit_code']} before the tests finished"
    return "the sandbox worker died"


# --------------------------------------------------------------------------
# The pool
# --------------------------------------------------------------------------

class Sandbox:
    """A pool of sandbox workers.

    Use it as a context manager when you want explicit control (how many
    workers, which level); ``run_tests`` and ``run_tests_batch`` at module
    level share a default pool that is created on first use and closed at exit.
    Safe to share between threads: each run borrows an idle worker.
    """

    def __init__(self, workers: Optional[int] = None, level: Optional[str] = None):
        if level is None:
            level = isolation_level()
        elif level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
        elif LEVELS.index(level) > LEVELS.index(_strongest_available()):
            raise RuntimeError(f"isolation level {level!r} is not available on this machine")
        self.level = level
        # Jobs get a fresh directory under this one. Only the "process" level
        # needs a real one; the others have a private tmpfs on /tmp.
        self._scratch_root = "/tmp"
        if level == "process":
            self._scratch_root = tempfile.mkdtemp(prefix="course-sandbox-", dir=_fast_tmp())
            os.chmod(self._scratch_root, 0o711)   # the sandbox uid may enter, not list
        self._idle: "queue.LifoQueue[_Worker]" = queue.LifoQueue()  # warm workers first
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._grow(workers or os.cpu_count() or 1)
        # Also clean up when a Sandbox is dropped without close().
        self._finalizer = weakref.finalize(self, _shut_down, self._all, self._scratch_root)

    def _grow(self, size: int) -> None:
        """Have at least ``size`` workers; they start when first used."""
        with self._lock:
            while len(self._all) < size:
                worker = _Worker(self.level, len(self._all), self._scratch_root)
                self._all.append(worker)
                self._idle.put(worker)

    @property
    def size(self) -> int:
        return len(self._all)

    def run_tests(self, code: str, tests: Sequence[str], *, timeout: float = 2.0,
                  memory_mb: int = 256) -> TestReport:
        """Run ``code``, then each test in its namespace; see the module docstring."""
        _check_arguments(code, tests, timeout, memory_mb)
        if self._closed:
            raise RuntimeError("this Sandbox is closed")
        request = {"code": code, "tests": list(tests), "timeout": float(timeout),
                   "memory_mb": int(memory_mb)}
        worker = self._idle.get()
        started = time.monotonic()
        try:
            outcome = worker.run(request, deadline=started + timeout + GRACE_SECONDS)
            if not outcome.get("clean", True):
                worker.kill()            # leftovers it could not reap: drop its namespace
        except _WorkerGone:
            outcome = {"timed_out": time.monotonic() >= started + timeout}
        except BaseException:            # e.g. Ctrl-C in a notebook: the answer to this
            worker.kill()                # job must not be read as the next job's
            raise
        finally:
            self._idle.put(worker)
        return _report(outcome, len(tests), timeout, time.monotonic() - started)

    def run_tests_batch(self, jobs: Sequence[tuple[str, Sequence[str]]], *,
                        timeout: float = 2.0, memory_mb: int = 256,
                        workers: Optional[int] = None) -> list[TestReport]:
        """Run many (code, tests) jobs in parallel; reports come back in order."""
        parallel = max(1, min(workers or self.size, len(jobs) or 1))
        self._grow(parallel)
        if parallel == 1:
            return [self.run_tests(c, t, timeout=timeout, memory_mb=memory_mb) for c, t in jobs]
        with ThreadPoolExecutor(parallel, thread_name_prefix="sandbox") as pool:
            return list(pool.map(
                lambda job: self.run_tests(job[0], job[1], timeout=timeout,
                                           memory_mb=memory_mb), jobs))

    def worker_pids(self) -> list[int]:
        """Pids of the running workers (the bwrap/unshare wrapper when there is one)."""
        return [w.process.pid for w in self._all if w.process and w.process.poll() is None]

    def close(self) -> None:
        self._closed = True
        self._finalizer()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _shut_down(workers: list, scratch_root: str) -> None:
    for worker in workers:
        worker.close()
    if scratch_root != "/tmp":
        shutil.rmtree(scratch_root, ignore_errors=True)


def _fast_tmp() -> Optional[str]:
    """/dev/shm (memory) if usable: a disk's mkdir/rmdir per job costs milliseconds.
    Only the "process" level uses this directory; the others have a private /tmp."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _check_arguments(code, tests, timeout, memory_mb) -> None:
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    if isinstance(tests, str) or not all(isinstance(t, str) for t in tests):
        raise TypeError("tests must be a list of str")
    if not timeout > 0:
        raise ValueError("timeout must be positive")
    if memory_mb < 64:
        raise ValueError("memory_mb must be at least 64 (the interpreter needs ~25 MB)")


# --------------------------------------------------------------------------
# The default pool and the module-level functions
# --------------------------------------------------------------------------

_default: Optional[Sandbox] = None
_default_pid = 0
_default_lock = threading.Lock()


def _default_sandbox() -> Sandbox:
    """The shared pool, created on first use (again in a forked child)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _default, _default_pid = Sandbox(), os.getpid()
        return _default


@atexit.register
def _close_default() -> None:
    if _default is not None and _default_pid == os.getpid():
        _default.close()


def run_tests(code: str, tests: Sequence[str], *, timeout: float = 2.0,
              memory_mb: int = 256) -> TestReport:
    """Run ``code`` and then each snippet of ``tests`` in its namespace, isolated.

    ``timeout`` (seconds) bounds the whole run, code and tests together;
    ``memory_mb`` caps the address space of the process that runs them.
    """
    return _default_sandbox().run_tests(code, tests, timeout=timeout, memory_mb=memory_mb)


def run_tests_batch(jobs: Sequence[tuple[str, Sequence[str]]], *, timeout: float = 2.0,
                    memory_mb: int = 256, workers: Optional[int] = None) -> list[TestReport]:
    """``run_tests`` for many ``(code, tests)`` pairs at once, spread over
    ``workers`` processes (default: one per CPU). Order is preserved."""
    return _default_sandbox().run_tests_batch(jobs, timeout=timeout, memory_mb=memory_mb,
                                              workers=workers)


def task_reports(tasks: Sequence, completions: Sequence[str], *, timeout: float = 2.0, memory_mb: int = 256,
                 workers: Optional[int] = None) -> list[TestReport]:
    """Each task's program with its completion (``task.program(completion)``) run against the task's
    tests, all in one ``run_tests_batch``: how every part of the course scores written code."""
    return run_tests_batch([(t.program(c), t.tests) for t, c in zip(tasks, completions)], timeout=timeout,
                           memory_mb=memory_mb, workers=workers)
