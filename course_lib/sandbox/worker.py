"""The process that runs untrusted code, one per sandbox slot.

``course_lib.sandbox`` starts this file as a script -- inside bubblewrap or
``unshare`` when they are available -- with ``python -S -I -B``: standard
library only, no site-packages, no environment variables read, so it starts in
a few tens of milliseconds and never imports torch or course_lib.

Life of the worker::

    caller --(job: length-prefixed JSON on stdin)--> worker
    worker --fork--> child: setsid, rlimits, unprivileged uid, /dev/null stdio,
                            compile + exec the code, exec each test,
                            one result line per test on fd 3
    worker: waits with a deadline, then SIGKILLs the child and every process
            it left behind, and answers on stdout (length-prefixed JSON)

The worker itself runs trusted code only; everything the candidate program
does happens in the forked child and its descendants. It exits when its stdin
closes -- also when the caller dies, even in the middle of a job.

Usage (by course_lib.sandbox.host): ``worker.py '<settings as JSON>'``
with keys ``uid`` (0: don't switch), ``scratch``, ``private_tmp``,
``masks``/``expose`` and ``read_all``; see ``main``.
"""

import builtins
import importlib.util
import json
import os
import select
import signal
import struct
import sys
import time

# Imported once here so that each forked child gets them for free. Only the
# common ones: every megabyte the worker holds makes each fork slower.
import bisect, collections, functools, heapq, itertools, math, re, string, typing  # noqa

RESULT_FD = 3                    # the child's private channel to the worker
MAX_CHANNEL_BYTES = 2**20        # more result bytes than this is a flood
MAX_MESSAGE_CHARS = 300          # error messages are cut to this length
CLEANUP_SECONDS = 0.5            # time allowed to kill and reap leftovers



def _load_sibling(name):
    """A module of this folder, loaded by its path: run as a script with -I, the worker has no folder of its
    own on sys.path, and leaves it so (the code it runs should not import the sandbox's modules by accident)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location(f"_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


confine = _load_sibling("confine")  # limits, the uid drop, mounts, process trees (confine.py)


# --------------------------------------------------------------------------
# Messages with the caller: 4-byte big-endian length, then UTF-8 JSON.
# --------------------------------------------------------------------------

def read_message(fd):
    """Read one message from ``fd``; None when the caller closed the pipe."""
    header = _read_exactly(fd, 4)
    if header is None:
        return None
    body = _read_exactly(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def write_message(fd, obj):
    data = json.dumps(obj).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read_exactly(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# --------------------------------------------------------------------------
# The harness: runs in the forked child, next to the untrusted code.
# --------------------------------------------------------------------------

def run_harness(code, tests, nonce):
    """Run ``code`` then each test in its namespace; report on RESULT_FD.

    Every line starts with ``nonce`` (random per job), so bytes that the code
    writes to every open descriptor are not taken for results. Lines:
    ``T <i> pass|fail|memory|exit [message]`` after test i *completed*,
    ``E syntax|runtime|memory|exit <message>`` when the code itself failed,
    ``D`` once all tests ran. A process that dies before ``D`` is a crash.

    The code may overwrite builtins, ``os.write`` or ``sys.settrace``: every
    function the harness needs is bound to a local name before the code runs.
    """
    write, compile_, exec_, getpid = os.write, compile, exec, os.getpid
    settrace, setprofile, exit_now = sys.settrace, sys.setprofile, os._exit
    me = getpid()
    prefix = nonce.encode() + b" "
    memory_line = prefix + b"%s memory MemoryError\n"   # built before memory runs out
    done = prefix + b"D\n"

    def emit(line):
        try:
            write(RESULT_FD, line)
        except BaseException:    # the code closed or replaced our channel
            exit_now(3)

    def text(*parts):
        line = " ".join(parts).replace("\n", " ")[:MAX_MESSAGE_CHARS]
        return prefix + line.encode("utf-8", "replace") + b"\n"

    try:
        program = compile_(code, "<candidate>", "exec", dont_inherit=True, optimize=0)
    except MemoryError:
        emit(memory_line % b"E")
        return 0
    except BaseException as exc:
        emit(text("E", "syntax", describe(exc)))
        return 0

    namespace = {"__name__": "candidate", "__builtins__": __builtins__}
    failure = None
    try:
        exec_(program, namespace)
    except MemoryError:
        failure = memory_line % b"E"
    except SystemExit as exc:
        failure = text("E", "exit", describe(exc))
    except BaseException as exc:
        failure = text("E", "runtime", describe(exc))
    if getpid() != me:           # a fork made by the code: only the original reports
        exit_now(0)
    if failure is not None:
        emit(failure)
        return 0

    for index, test in enumerate(tests):
        settrace(None)           # a tracer set by the code could skip asserts
        setprofile(None)
        outcome, message = "pass", ""
        try:
            exec_(compile_(test, f"<test {index}>", "exec", dont_inherit=True, optimize=0),
                  namespace)
        except MemoryError:
            outcome, message = "memory", "MemoryError"
        except SystemExit as exc:
            outcome, message = "exit", describe(exc)
        except BaseException as exc:
            outcome, message = "fail", describe(exc)
        if getpid() != me:
            exit_now(0)
        record = text("T", str(index), outcome, message)
        if outcome == "exit":    # a program that exits runs no further tests
            emit(record)
            return 0
        # The last result and "done" go in one write: one wake-up of the worker.
        emit(record + done if index == len(tests) - 1 else record)
    if not tests:
        emit(done)
    return 0


def describe(exc):
    """``"NameError: name 'x' is not defined"``; never raises."""
    try:
        name, message = type(exc).__name__, str(exc)
        return f"{name}: {message}" if message else name
    except BaseException:
        return "<exception that cannot be printed>"


def _exit_builtin(code=None):
    raise SystemExit(code)


# ``python -S`` skips the site module, which is what defines exit() and quit().
builtins.exit = builtins.quit = _exit_builtin


# --------------------------------------------------------------------------
# The child: lock itself down (confine.py), then run the harness.
# --------------------------------------------------------------------------

def child_main(job, scratch, result_w, worker, nonce):
    """Runs in the forked child; never returns."""
    status = 70
    try:
        os.setsid()                          # own process group: killpg() hits only us
        confine.set_limits(job["timeout"], job["memory_mb"], worker.uid)
        os.chdir(scratch)
        os.environ["TMPDIR"] = scratch
        confine.isolate_descriptors(result_w, worker.devnull, RESULT_FD)
        if worker.uid:
            confine.drop_privileges(worker.uid, worker.read_all)
        confine.die_with_parent()            # after the uid change, which clears it
        if os.getppid() != worker.pid:
            os._exit(status)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # big files: OSError, not death
        status = run_harness(job["code"], job["tests"], nonce)
    finally:
        os._exit(status)                     # also stops non-daemon threads at once


# --------------------------------------------------------------------------
# The worker: fork, watch, kill, clean up.
# --------------------------------------------------------------------------

class Worker:
    def __init__(self, uid, scratch_root, read_all):
        self.uid = uid
        self.read_all = read_all
        self.scratch_root = scratch_root
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.jobs = 0
        self.pid = os.getpid()
        # In a pid namespace we are pid 1 (unshare) or 2 (bubblewrap's init is 1),
        # and kill(-1) reaches every process of the job at once.
        self.namespaced = self.pid <= 2

    def serve(self):
        while True:
            job = read_message(0)
            if job is None:
                return
            try:
                outcome = self.run_job(job)
            except Exception as exc:    # a bug here must not leave the caller waiting
                outcome = {"internal_error": describe(exc)}
            write_message(1, outcome)

    def run_job(self, job):
        started = time.monotonic()
        self.jobs += 1
        scratch = os.path.join(self.scratch_root, f"job-{self.pid}-{self.jobs}")
        os.mkdir(scratch, 0o700)
        if self.uid:
            os.chown(scratch, self.uid, self.uid)
        nonce = os.urandom(8).hex()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            child_main(job, scratch, write_end, self, nonce)
        os.close(write_end)
        try:
            outcome = self.watch(pid, read_end, nonce, started + job["timeout"],
                                 len(job["tests"]))
        finally:
            os.close(read_end)
            outcome_of_exit = self.kill_everything(pid)
        outcome.update(outcome_of_exit)
        confine.remove_tree(scratch)
        outcome["seconds"] = time.monotonic() - started
        return outcome

    def watch(self, pid, read_end, nonce, deadline, n_tests):
        """Read result lines until ``D``, an error line, the child's death or
        the deadline, whichever comes first."""
        seen = {"tests": [], "error": None, "done": False,
                "timed_out": False, "flooded": False}
        prefix = nonce.encode() + b" "
        buffer, received = b"", 0
        pidfd = os.pidfd_open(pid)      # readable once the child has exited
        try:
            while not seen["done"] and seen["error"] is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    seen["timed_out"] = True
                    break
                ready, _, _ = select.select([read_end, pidfd, 0], [], [], left)
                if 0 in ready:           # the caller went away: stop everything
                    self.kill_everything(pid)
                    os._exit(0)
                if read_end not in ready:
                    if pidfd in ready:
                        break            # child dead and nothing left to read
                    continue
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break                # every writer is gone
                received += len(chunk)
                if received > MAX_CHANNEL_BYTES:
                    seen["flooded"] = True
                    break
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.startswith(prefix):      # else: not written by the harness
                        parse_record(line[len(prefix):], seen, n_tests)
        finally:
            os.close(pidfd)
        return seen

    def kill_everything(self, pid):
        """SIGKILL the child and every process it created; reap them all.

        Descendants that outlive their parent are re-parented to us (we are a
        child subreaper or pid 1), so "no children left" means "no process of
        the job left" -- including ones that called setsid() and exec'd.
        """
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        outcome = {"exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                   "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}
        outcome["clean"] = self.reap_leftovers()
        return outcome

    def reap_leftovers(self):
        give_up = time.monotonic() + CLEANUP_SECONDS
        while True:
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                return True              # no child at all: the job left nothing
            if time.monotonic() > give_up:
                return False             # the caller will restart us (and our namespace)
            if self.namespaced:
                try:
                    os.kill(-1, signal.SIGKILL)   # all but us and pid 1, atomically
                except ProcessLookupError:
                    pass
            else:
                for descendant in confine.descendants_of(self.pid):
                    try:
                        os.kill(descendant, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(0.001)


def parse_record(line, seen, n_tests):
    """Apply one harness line to ``seen``; malformed or out-of-order lines are ignored."""
    record = line.decode("utf-8", "replace").split(" ", 3)
    kind, tests = record[0], seen["tests"]
    if kind == "D" and len(tests) == n_tests:
        seen["done"] = True
    elif kind == "E" and len(record) >= 2:
        seen["error"] = [record[1], " ".join(record[2:])]
    elif kind == "T" and len(record) >= 3 and record[1] == str(len(tests)):
        tests.append([record[2], record[3] if len(record) > 3 else ""])


def warm_up():
    """Compile and run a small program once, before any fork.

    The first compile() of a process initialises the parser (~2 ms); doing it
    here means each forked child inherits a warm parser instead of paying
    again. gc.freeze() then keeps the collector from walking (and so copying)
    the inherited objects in every child.
    """
    sample = ("class A:\n    x: int = 1\n"
              "def f(a, *b, **c):\n    return [i for i in range(a)] + list(b), f'{a!r}'\n"
              "assert f(2, 3) == ([0, 1, 3], '2')\n")
    exec(compile(sample, "<warm-up>", "exec", dont_inherit=True, optimize=0), {})
    import gc
    gc.collect()
    gc.freeze()


def main(argv):
    """``argv[0]`` is a JSON object of settings, written by course_lib.sandbox."""
    settings = json.loads(argv[0])
    if settings.get("private_tmp"):
        confine.mount_private_tmp()
    if settings.get("masks"):
        confine.expose_behind_masks(settings["masks"], settings["expose"])
    confine.adopt_orphans()
    warm_up()
    Worker(settings["uid"], settings["scratch"], settings.get("read_all", False)).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
