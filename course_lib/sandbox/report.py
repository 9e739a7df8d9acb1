"""What a sandbox run produces: a TestReport per program, and how the worker's answer becomes one."""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

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
