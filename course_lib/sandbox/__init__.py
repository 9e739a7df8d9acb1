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

* A pool of small *worker* processes (``sandbox/worker.py``, standard library
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

The package's parts: ``report`` (Status, TestReport), ``isolation`` (the levels and how each
walls a worker off), ``host`` (a worker seen from the caller, and the pool), ``worker`` (the
script that runs inside the walls), ``confine`` (what the kernel enforces there: limits, the uid
drop, mounts, process trees), and here the functions the course calls.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Optional, Sequence

from course_lib.sandbox.host import Sandbox, isolation_level
from course_lib.sandbox.isolation import LEVELS
from course_lib.sandbox.report import Status, TestReport

__all__ = ["run_tests", "run_tests_batch", "task_reports", "TestReport", "Status", "isolation_level",
           "Sandbox", "LEVELS"]

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
