"""The caller's side of the sandbox: one worker process (`_Worker`) and a pool of them (`Sandbox`).

This side only talks to the workers over pipes, with its own watchdog: a worker that does not
answer in time is killed and replaced.
"""

from __future__ import annotations

import json
import os
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

from course_lib.sandbox.confine import descendants_of  # the walk the worker does, standard library only
from course_lib.sandbox.isolation import (LEVEL_ENV_VAR, LEVELS, WORKER_ENV, WORKER_SCRIPT, _isolation_prefix,
                                         _private_paths, _sandbox_uid)
from course_lib.sandbox.report import Status, TestReport, _report

GRACE_SECONDS = 1.0        # how long past its deadline we wait for a worker's answer


# --------------------------------------------------------------------------
# Which isolation level this machine supports: tried with a real worker
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
        for pid in descendants_of(self.process.pid) + [self.process.pid]:
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
