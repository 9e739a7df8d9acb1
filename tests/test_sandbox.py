"""The sandbox against hostile programs.

Each test names the guarantee it checks and would fail without the mechanism
that provides it. Most run at two levels: the strongest this machine has
(bubblewrap here) and the "process" fallback (rlimits, no namespaces). File,
network and /proc checks are only promised with namespaces, so they are
skipped at the fallback level.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from course_lib import sandbox
from course_lib.sandbox.confine import descendants_of
from course_lib.sandbox import (LEVELS, Sandbox, Status, TestReport, isolation_level,
                                run_tests, run_tests_batch)

STRONGEST = isolation_level()
LEVELS_UNDER_TEST = [STRONGEST] + (["process"] if STRONGEST != "process" else [])
if os.environ.get("COURSE_SANDBOX_TEST_ALL_LEVELS"):     # every level this machine has
    LEVELS_UNDER_TEST = list(reversed(LEVELS[:LEVELS.index(STRONGEST) + 1]))
IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module", params=LEVELS_UNDER_TEST)
def box(request):
    with Sandbox(workers=2, level=request.param) as sb:
        yield sb


def needs_namespaces(box):
    if box.level == "process":
        pytest.skip("best effort at the 'process' level: no namespaces to enforce it")


def unique_marker() -> str:
    """A sleep duration no other process on the machine uses: 1000.<random>."""
    return f"1000.{random.randrange(10**8):08d}"


def processes_matching(text: str, field: str = "cmdline") -> list[int]:
    """Pids whose /proc/<pid>/<field> contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                content = Path(f"/proc/{entry}/{field}").read_bytes()
            except OSError:
                continue
            if text.encode() in content.replace(b"\0", b" "):
                found.append(int(entry))
    return found


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_caller_fine(box):
    """The caller is alive (we are running) and the sandbox still works."""
    report = box.run_tests("def f():\n    return 1", ["assert f() == 1"])
    assert report.status is Status.PASSED, report


# --------------------------------------------------------------------------
# The basic contract
# --------------------------------------------------------------------------

def test_passing_program_passes(box):
    report = box.run_tests("def add(a, b):\n    return a + b",
                           ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"])
    assert report == TestReport(passed=2, total=2, status=Status.PASSED,
                                seconds=report.seconds, results=(True, True), error="")
    assert report.all_passed and report.fraction == 1.0


def test_failed_tests_are_counted_and_the_first_error_is_kept(box):
    report = box.run_tests("def add(a, b):\n    return a - b",
                           ["assert add(1, 0) == 1", "assert add(1, 2) == 3", "assert nope"])
    assert report.status is Status.FAILED
    assert report.results == (True, False, False)
    assert (report.passed, report.total, report.error) == (1, 3, "AssertionError")
    assert report.fraction == pytest.approx(1 / 3) and not report.all_passed


def test_syntax_error_runs_no_test(box):
    report = box.run_tests("def f(:\n    pass", ["assert True"])
    assert report.status is Status.SYNTAX_ERROR
    assert report.results == (None,) and report.error.startswith("SyntaxError")


def test_runtime_error_in_the_code_itself(box):
    report = box.run_tests("y = x + 1", ["assert True", "assert True"])
    assert report.status is Status.RUNTIME_ERROR
    assert report.error == "NameError: name 'x' is not defined"
    assert report.results == (None, None) and report.passed == 0


def test_tests_run_in_order_in_the_code_namespace(box):
    report = box.run_tests("seen = []", ["seen.append(1)", "seen.append(2)",
                                         "assert seen == [1, 2]"])
    assert report.status is Status.PASSED


def test_no_tests_and_status_values():
    assert len({s.value for s in Status}) == len(Status)
    empty = TestReport(passed=0, total=0, status=Status.PASSED, seconds=0.0, results=())
    assert empty.fraction == 0.0


def test_code_never_runs_in_the_callers_process(box):
    """Guarantee: never in the caller's process (or a fork of it)."""
    report = box.run_tests(f"import os, sys\ncaller = {os.getpid()}",
                           ["assert os.getpid() != caller",
                            "assert 'pytest' not in sys.modules",
                            "assert 'torch' not in sys.modules"])
    assert report.status is Status.PASSED, report


def test_arguments_are_checked():
    with pytest.raises(TypeError):
        run_tests("pass", "assert True")
    with pytest.raises(ValueError):
        run_tests("pass", [], timeout=0)


# --------------------------------------------------------------------------
# The caller survives
# --------------------------------------------------------------------------

@pytest.mark.parametrize("code", [
    "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "import os, signal\nos.killpg(0, signal.SIGKILL)",
    "import os, signal\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)",
], ids=["kill-parent", "killpg-own-group", "killpg-parent-group"])
def test_caller_survives_code_killing_its_parent_or_group(box, code):
    report = box.run_tests(code, ["assert True"])
    # The kill fails (RUNTIME_ERROR: the code runs as another uid), kills the
    # code itself (CRASHED), or hits nothing that matters (PASSED).
    assert report.status in (Status.CRASHED, Status.RUNTIME_ERROR, Status.PASSED), report
    assert report.passed == (report.status is Status.PASSED)
    assert_caller_fine(box)


@pytest.mark.skipif(not IS_ROOT, reason="kill(-1) is only contained when jobs run as their own uid")
def test_caller_survives_kill_of_every_process(box):
    report = box.run_tests("import os, signal\nos.kill(-1, signal.SIGKILL)", ["assert True"])
    # kill(-1) reaches only processes of the job's own uid: none but itself
    # (so it succeeds, or fails with ESRCH, depending on the namespace).
    assert report.status in (Status.PASSED, Status.RUNTIME_ERROR), report
    assert report.passed == (report.status is Status.PASSED)
    assert_caller_fine(box)


def test_segfault_is_a_crash(box):
    report = box.run_tests("import ctypes\nctypes.string_at(0)", ["assert True"])
    assert report.status is Status.CRASHED and report.passed == 0
    assert "SIGSEGV" in report.error
    assert_caller_fine(box)


def test_infinite_recursion_with_a_huge_recursion_limit(box):
    code = "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1) + 1\nf(0)"
    report = box.run_tests(code, ["assert True"], timeout=5, memory_mb=96)
    # Python 3.11 keeps Python frames off the C stack: RecursionError or MemoryError.
    assert report.status in (Status.CRASHED, Status.RUNTIME_ERROR, Status.MEMORY_LIMIT,
                             Status.TIMEOUT), report
    assert report.passed == 0
    assert_caller_fine(box)


@pytest.mark.skipif(not IS_ROOT, reason="RLIMIT_NPROC needs a dedicated uid, i.e. root")
def test_fork_storm_is_contained_and_cleaned_up(box):
    name = f"storm{random.randrange(10**6)}"
    code = ("import ctypes, os\n"
            f"ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n"   # PR_SET_NAME
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    started = time.monotonic()
    report = box.run_tests(code, ["assert True"], timeout=1.0)
    try:
        assert time.monotonic() - started < 2.5
        assert report.status in (Status.TIMEOUT, Status.CRASHED, Status.RUNTIME_ERROR)
        assert report.passed == 0
        assert processes_matching(name, "comm") == []
    finally:
        kill_all(processes_matching(name, "comm"))
    assert_caller_fine(box)


# --------------------------------------------------------------------------
# The time limit is enforced from outside
# --------------------------------------------------------------------------

SIGNAL_PROOF = ("import signal\n"
                "for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGXCPU):\n"
                "    signal.signal(s, signal.SIG_IGN)\n")


@pytest.mark.parametrize("code", [
    "while True:\n    pass",
    SIGNAL_PROOF + "while True:\n    pass",
    "import time\nwhile True:\n    try:\n        while True:\n            time.sleep(0.01)\n"
    "    except BaseException:\n        pass",
    "import time\ntime.sleep(100)",
    SIGNAL_PROOF + "import threading\nthreading.Event().wait()",
], ids=["busy", "ignores-signals", "catches-BaseException", "sleeps", "blocks-forever"])
def test_time_limit_holds(box, code):
    started = time.monotonic()
    report = box.run_tests(code, ["assert True"], timeout=0.5)
    elapsed = time.monotonic() - started
    assert report.status is Status.TIMEOUT, report
    assert report.results == (None,)
    assert elapsed < 0.5 + 1.0, f"returned {elapsed:.2f} s after a 0.5 s limit"


def test_time_limit_bounds_the_whole_call_not_each_test(box):
    tests = ["import time; time.sleep(0.3)"] * 5
    report = box.run_tests("", tests, timeout=1.0)
    assert report.status is Status.TIMEOUT
    assert report.results[:2] == (True, True) and report.results[-1] is None
    assert 1 <= report.passed <= 3


def test_reading_stdin_does_not_block(box):
    report = box.run_tests("import sys\ndata = sys.stdin.read()", ["assert data == ''"],
                           timeout=5)
    assert report.status is Status.PASSED and report.seconds < 1
    report = box.run_tests("name = input()", ["assert True"], timeout=5)
    assert report.status is Status.RUNTIME_ERROR and report.error.startswith("EOFError")


# --------------------------------------------------------------------------
# Memory and output are capped
# --------------------------------------------------------------------------

def test_memory_limit(box):
    hog = "data = bytearray(200 * 2**20)"
    assert box.run_tests(hog, ["assert len(data) > 0"], memory_mb=128).status \
        is Status.MEMORY_LIMIT
    assert box.run_tests(hog, ["assert len(data) > 0"], memory_mb=512).status \
        is Status.PASSED


def test_memory_error_in_a_test(box):
    report = box.run_tests("", ["assert True", "x = [0] * 10**9", "assert True"])
    assert report.status is Status.MEMORY_LIMIT
    assert report.results == (True, False, True)


def test_huge_print_hits_the_memory_limit_not_the_caller(box, capfd):
    report = box.run_tests("print('x' * 10**9)", ["assert True"])
    assert report.status is Status.MEMORY_LIMIT
    assert capfd.readouterr() == ("", "")


def test_endless_output_neither_blocks_nor_floods_the_caller(box, capfd):
    report = box.run_tests("import sys\nwhile True:\n    print('spam' * 1000)\n"
                           "    sys.stderr.write('eggs' * 1000)", ["assert True"], timeout=0.5)
    assert report.status is Status.TIMEOUT and report.seconds < 1.5
    # 100 MB of output, then tests: it is discarded, so it is fast and passes.
    report = box.run_tests("import os\nfor _ in range(100):\n    os.write(1, b'x' * 2**20)",
                           ["print('PASSED'); assert True"], timeout=5)
    assert report.status is Status.PASSED and report.seconds < 2
    assert capfd.readouterr() == ("", "")


# --------------------------------------------------------------------------
# No process outlives the call
# --------------------------------------------------------------------------

def test_background_and_daemonized_processes_are_killed(box):
    marks = [unique_marker() for _ in range(3)]
    code = (f"import os, subprocess\n"
            f"os.system('setsid sleep {marks[0]} &')\n"
            f"subprocess.Popen(['sleep', '{marks[1]}'], start_new_session=True)\n"
            # classic daemon: fork, setsid, fork again, exec
            f"if os.fork() == 0:\n"
            f"    os.setsid()\n"
            f"    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '{marks[2]}'])\n"
            f"    os._exit(0)\n"
            f"os.wait()\n"
            f"import time; time.sleep(0.2)\n")
    try:
        report = box.run_tests(code, ["assert True"])
        assert report.status is Status.PASSED, report
        leftovers = [pid for mark in marks for pid in processes_matching(f"sleep {mark}")]
        assert leftovers == [], "processes started by the code survived the call"
    finally:
        kill_all([pid for mark in marks for pid in processes_matching(f"sleep {mark}")])


def test_processes_are_killed_after_a_timeout_too(box):
    mark = unique_marker()
    try:
        report = box.run_tests(f"import os\nos.system('setsid sleep {mark} &')\n"
                               "while True:\n    pass", [], timeout=0.5)
        assert report.status is Status.TIMEOUT
        assert processes_matching(f"sleep {mark}") == []
    finally:
        kill_all(processes_matching(f"sleep {mark}"))


# --------------------------------------------------------------------------
# Files, network, environment
# --------------------------------------------------------------------------

def test_files_outside_the_scratch_directory_are_untouched(box, tmp_path):
    needs_namespaces(box)
    existing = tmp_path / "existing.txt"
    existing.write_text("original")
    new = tmp_path / "new.txt"
    repo_probe = Path(__file__).with_name(f"_sandbox_probe_{random.randrange(10**8)}")
    code = f"""
import os, shutil
attempts = [
    lambda: open({str(new)!r}, "w").write("x"),
    lambda: open({str(existing)!r}, "a").write("tampered"),
    lambda: os.remove({str(existing)!r}),
    lambda: open({str(repo_probe)!r}, "w").write("x"),
    lambda: os.chmod({str(Path(__file__))!r}, 0o777),
    lambda: shutil.rmtree({str(tmp_path)!r}),
]
succeeded = 0
for attempt in attempts:
    try:
        attempt()
        succeeded += 1
    except OSError:
        pass
open("mine.txt", "w").write("scratch is writable")
"""
    mode_before = Path(__file__).stat().st_mode
    try:
        report = box.run_tests(code, ["assert succeeded == 0",
                                      "assert open('mine.txt').read().startswith('scratch')"])
        assert existing.read_text() == "original"
        assert not new.exists() and not repo_probe.exists()
        assert Path(__file__).stat().st_mode == mode_before
        assert report.status is Status.PASSED, report
    finally:
        repo_probe.unlink(missing_ok=True)


def test_each_run_gets_a_fresh_scratch_directory(box):
    box.run_tests("open('leftover.txt', 'w').write('x')", [])
    report = box.run_tests("import os", ["assert os.listdir('.') == []"])
    assert report.status is Status.PASSED


def test_no_network_not_even_loopback(box):
    needs_namespaces(box)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (f"import socket\ntry:\n"
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n"
                f"    reached = True\nexcept OSError:\n    reached = False")
        report = box.run_tests(code, ["assert not reached"])
        with pytest.raises(BlockingIOError):
            server.accept()
    assert report.status is Status.PASSED, report


def test_callers_environment_is_invisible(monkeypatch):
    """A fresh pool, started while the caller holds a secret."""
    secret = f"s3cret-{random.randrange(10**8)}"
    monkeypatch.setenv("COURSE_TEST_SECRET", secret)
    for level in LEVELS_UNDER_TEST:
        with Sandbox(workers=1, level=level) as sb:
            report = sb.run_tests("import os\nenv = dict(os.environ)",
                                  [f"assert {secret!r} not in str(env)",
                                   "assert 'COURSE_TEST_SECRET' not in env"])
            assert report.status is Status.PASSED, (level, report)
            if level != "process":      # no other process's environ is readable either
                scan = (f"import os\nfound = []\nfor p in os.listdir('/proc'):\n"
                        f"    try:\n        found.append({secret!r}.encode() in "
                        f"open(f'/proc/{{p}}/environ', 'rb').read())\n"
                        f"    except OSError:\n        pass")
                report = sb.run_tests(scan, ["assert not any(found)"])
                assert report.status is Status.PASSED, (level, report)


# --------------------------------------------------------------------------
# No false pass
# --------------------------------------------------------------------------

FAKE_RECORDS = "".join(f"T {i} pass\n" for i in range(3)) + "D\nPASSED\n3 passed\n"


@pytest.mark.parametrize("code,tests,status,results", [
    ("import sys\nsys.exit(0)", ["assert False"], Status.CRASHED, (None,)),
    ("import os\nos._exit(0)", ["assert False"], Status.CRASHED, (None,)),
    ("", ["assert True", "raise SystemExit(0)", "assert False"], Status.CRASHED,
     (True, False, None)),
    ("def f():\n    raise SystemExit(0)", ["f()", "assert False"], Status.CRASHED,
     (False, None)),
    ("", ["assert True", "import os; os._exit(0)", "assert False"], Status.CRASHED,
     (True, None, None)),
    (f"print({FAKE_RECORDS!r})\nimport sys\nsys.stderr.write({FAKE_RECORDS!r})",
     ["assert False"], Status.FAILED, (False,)),
    (f"import os\nfor fd in range(256):\n    try:\n        os.write(fd, {FAKE_RECORDS!r}.encode())\n"
     f"    except OSError:\n        pass\nos._exit(0)", ["assert False"], Status.CRASHED, (None,)),
    ("import os\nos.closerange(0, 1024)", ["assert True", "assert False"], Status.CRASHED,
     (None, None)),
    ("import os\nos.dup2(os.open('/dev/null', os.O_WRONLY), 3)", ["assert False"],
     Status.CRASHED, (None,)),
    ("import builtins, os\nbuiltins.exec = builtins.compile = lambda *a, **k: None\n"
     "os.write = lambda fd, data: len(data)", ["assert False"], Status.FAILED, (False,)),
], ids=["sys.exit", "os._exit", "SystemExit-in-test", "SystemExit-in-call", "os._exit-in-test",
        "fake-output", "fake-records-on-every-fd", "closes-fds", "replaces-channel",
        "replaces-builtins"])
def test_no_false_pass(box, code, tests, status, results):
    report = box.run_tests(code, tests)
    assert (report.status, report.results) == (status, results), report
    assert report.passed == sum(r is True for r in results)


# --------------------------------------------------------------------------
# Honest code is not punished
# --------------------------------------------------------------------------

def test_leftover_non_daemon_thread_does_not_delay_the_result(box):
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(100,)).start()\n"
            "def f():\n    return 1")
    report = box.run_tests(code, ["assert f() == 1"], timeout=5)
    assert report.status is Status.PASSED and report.seconds < 1.0, report


def test_ordinary_library_use_works(box):
    code = ("import decimal, fractions, json, tempfile, concurrent.futures, socket\n"
            "with tempfile.TemporaryFile() as f:\n    f.write(b'abc'); f.seek(0); data = f.read()\n"
            "with concurrent.futures.ThreadPoolExecutor(4) as pool:\n"
            "    squares = list(pool.map(lambda x: x * x, range(10)))\n"
            "exit_is_defined = callable(exit)")
    report = box.run_tests(code, ["assert data == b'abc'", "assert squares[3] == 9",
                                  "assert json.loads('[1]') == [1]", "assert exit_is_defined"])
    assert report.status is Status.PASSED, report


# --------------------------------------------------------------------------
# The worker pool recovers
# --------------------------------------------------------------------------

def start_all_workers(box):
    box.run_tests_batch([("import time\ntime.sleep(0.2)", [])] * box.size)
    assert len(box.worker_pids()) == box.size


def test_worker_killed_mid_job_is_replaced(box):
    start_all_workers(box)
    pids = box.worker_pids()
    threading.Timer(0.3, kill_all, [[pid for p in pids for pid in
                                     [p] + descendants_of(p)]]).start()
    reports = box.run_tests_batch([("import time\ntime.sleep(2)", ["assert True"])] * 2,
                                  timeout=5)
    assert [r.status for r in reports] == [Status.CRASHED] * 2
    assert_caller_fine(box)


def test_hung_worker_is_killed_by_the_callers_watchdog(box):
    start_all_workers(box)
    tree = [pid for p in box.worker_pids() for pid in [p] + descendants_of(p)]
    for pid in tree:
        os.kill(pid, signal.SIGSTOP)        # stopped workers never answer
    started = time.monotonic()
    reports = box.run_tests_batch([("", ["assert True"])] * 2, timeout=0.5)
    elapsed = time.monotonic() - started
    kill_all(tree)
    assert [r.status for r in reports] == [Status.TIMEOUT] * 2
    assert elapsed < 0.5 + sandbox.host.GRACE_SECONDS + 0.5
    assert_caller_fine(box)


# The marker comes in argv[2], so this script's own command line does not
# contain "sleep <marker>".
CALLER_THAT_DIES = """
import sys
from course_lib.sandbox import Sandbox
sb = Sandbox(workers=2, level=sys.argv[1])
sb.run_tests_batch([("import time\\ntime.sleep(0.2)", [])] * 2)      # both workers up
print(" ".join(map(str, sb.worker_pids())), flush=True)
sb.run_tests("import os, time\\nos.system('setsid sleep " + sys.argv[2] + " &')\\n"
             "time.sleep(100)", [], timeout=60)
"""


def test_workers_and_jobs_die_with_their_caller(box):
    """A caller killed with SIGKILL (no atexit, no cleanup) leaves nothing behind."""
    mark = unique_marker()
    caller = subprocess.Popen([sys.executable, "-c", CALLER_THAT_DIES, box.level, mark],
                              stdout=subprocess.PIPE, text=True)
    try:
        worker_pids = [int(p) for p in caller.stdout.readline().split()]
        deadline = time.monotonic() + 5
        while not processes_matching(f"sleep {mark}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_matching(f"sleep {mark}"), "the job never started"
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and (
                processes_matching(f"sleep {mark}") or any(map(alive, worker_pids))):
            time.sleep(0.05)
        assert processes_matching(f"sleep {mark}") == []
        assert not any(map(alive, worker_pids))
    finally:
        caller.kill()
        kill_all(processes_matching(f"sleep {mark}"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_interrupted_call_leaves_the_pool_usable(box):
    """Ctrl-C in a notebook mid-job: the late answer must not become the next job's."""
    import _thread
    import signal
    # A process started in the background by a non-interactive shell ignores SIGINT, and then
    # interrupt_main does nothing: give this test Python's own Ctrl-C handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()
        with pytest.raises(KeyboardInterrupt):
            box.run_tests("import time\ntime.sleep(2)", ["assert True"], timeout=5)
    finally:
        signal.signal(signal.SIGINT, previous)
    for _ in range(box.size + 1):
        report = box.run_tests("x = 1", ["assert x == 2"])
        assert report.status is Status.FAILED, report


# --------------------------------------------------------------------------
# Levels, the default pool, batches
# --------------------------------------------------------------------------

def test_isolation_level_and_its_override(monkeypatch):
    assert STRONGEST in LEVELS
    if IS_ROOT and shutil.which("bwrap"):
        assert STRONGEST == "bubblewrap"
    monkeypatch.setenv("COURSE_SANDBOX_LEVEL", "process")
    assert isolation_level() == "process"
    monkeypatch.setenv("COURSE_SANDBOX_LEVEL", "chroot")
    with pytest.raises(ValueError):
        isolation_level()


def test_module_level_functions_and_batch_order():
    jobs = [("def f():\n    return 1", ["assert f() == 1"]),
            ("def f(:", ["assert f() == 1"]),
            ("def f():\n    return 2", ["assert f() == 1", "assert f() == 2"]),
            ("while True:\n    pass", ["assert True"])] * 3
    reports = run_tests_batch(jobs, timeout=0.5, workers=2)
    expected = [Status.PASSED, Status.SYNTAX_ERROR, Status.FAILED, Status.TIMEOUT] * 3
    assert [r.status for r in reports] == expected
    assert [r.passed for r in reports] == [1, 0, 1, 0] * 3
    assert run_tests_batch([]) == []
    assert run_tests("x = 1", ["assert x == 1"]).status is Status.PASSED


def test_many_threads_share_one_pool(box):
    results = {}

    def work(i):
        results[i] = box.run_tests(f"n = {i}", [f"assert n == {i}"]).status

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results.values()) == {Status.PASSED} and len(results) == 8


def test_works_with_torch_imported_in_the_caller():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(2)
    torch.ones(1000, 1000).sum()            # start torch's thread pool
    with Sandbox(workers=2) as sb:
        reports = sb.run_tests_batch([("x = 1", ["assert x == 1"])] * 4)
    assert all(r.status is Status.PASSED for r in reports)
