"""What the kernel enforces around a sandbox job: resource limits, the uid drop, private mounts, process trees.

Standard library only, like ``worker.py``, which loads this file by its path when it starts (it runs
as a script with ``python -S -I -B``, so this folder is not on its import path, and stays off it).
``course_lib.sandbox.host`` imports it as ``course_lib.sandbox.confine`` for ``descendants_of``.

    set_limits, isolate_descriptors, drop_privileges   the forked child locks itself down with these
    die_with_parent, adopt_orphans                       the child dies with its worker; the worker
                                                         inherits every orphan of a job, to reap it
    descendants_of, remove_tree                          what a job left behind: its processes, its files
    mount_private_tmp, expose_behind_masks               the ``unshare`` level's private mounts
"""

import ctypes
import os
import resource
import signal

MAX_FILE_BYTES = 16 * 2**20      # RLIMIT_FSIZE: largest file the code may write
MAX_OPEN_FILES = 256             # RLIMIT_NOFILE
MAX_PROCESSES = 100              # RLIMIT_NPROC, per sandbox uid (threads count too)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_KEEPCAPS = 8
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC = 2, 4, 4096, 16384
_CAP_DAC_READ_SEARCH = 2
_libc = ctypes.CDLL(None, use_errno=True)


# --------------------------------------------------------------------------
# The forked child locks itself down.
# --------------------------------------------------------------------------

def set_limits(timeout, memory_mb, uid):
    """Kernel-enforced ceilings, set before the uid drop so they cannot be raised.

    RLIMIT_CPU is only a backstop: the wall-clock limit is enforced from outside
    by the worker, which SIGKILLs the child at the deadline.
    """
    cpu = int(timeout) + 2
    limits = {
        resource.RLIMIT_AS: memory_mb * 2**20,
        resource.RLIMIT_CPU: cpu,
        resource.RLIMIT_FSIZE: MAX_FILE_BYTES,
        resource.RLIMIT_NOFILE: MAX_OPEN_FILES,
        resource.RLIMIT_CORE: 0,             # a segfault writes no core file
    }
    if uid:                                  # root ignores RLIMIT_NPROC, uid `uid` does not
        limits[resource.RLIMIT_NPROC] = MAX_PROCESSES
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))


def isolate_descriptors(result_w, devnull, result_fd):
    """stdin, stdout, stderr -> /dev/null; results on ``result_fd`` (the worker passes 3); close everything else.

    The code's output goes nowhere, so it can neither fill a pipe that someone
    must drain nor print lines that look like results.
    """
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.dup2(result_w, result_fd, inheritable=False)   # not passed on to exec'd programs
    os.closerange(result_fd + 1, 2**31 - 1)


def drop_privileges(uid, read_all):
    """Become a uid that owns nothing: root-owned files become read-only,
    the worker (root) cannot be signalled, and RLIMIT_NPROC applies.

    ``read_all`` (the "process" level, when Python lives in a directory only
    root may enter, such as pyenv's /root/.pyenv): keep exactly one
    capability, CAP_DAC_READ_SEARCH, so the child can still import the
    standard library. It can then read any file -- no worse than running as
    the caller -- but still not write, signal root, or exceed RLIMIT_NPROC;
    programs it exec's do not inherit the capability.
    """
    if read_all:
        _libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if read_all:
        _keep_only_capability(_CAP_DAC_READ_SEARCH)


def die_with_parent():
    """SIGKILL this process when its parent (the worker) dies. Set after the uid change, which clears it."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def adopt_orphans():
    """Become a child subreaper: orphans of a job become our children, so we can always find and reap them."""
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _keep_only_capability(cap):
    header = _CapHeader(0x20080522, 0)       # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = 1 << cap
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


# --------------------------------------------------------------------------
# What a job left behind.
# --------------------------------------------------------------------------

def descendants_of(root):
    """Pids whose chain of parents leads to ``root``, read from /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue                 # exited while we looked
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def remove_tree(path):
    try:
        os.rmdir(path)                   # the usual case: the code wrote nothing
    except OSError:
        import shutil
        shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------
# The ``unshare`` level's mounts (bubblewrap makes its own).
# --------------------------------------------------------------------------

def mount_private_tmp():
    """At the ``unshare`` level: fresh tmpfs over the world-writable directories,
    in our private mount namespace, so the code's files vanish with us."""
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(path):
            _mount(b"tmpfs", path, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=64m,mode=0755")


def expose_behind_masks(masks, expose):
    """At the ``unshare`` level: hide private directories (such as /root, where
    pyenv may have put Python) behind an empty tmpfs, and bind back only the
    paths the interpreter needs, so the unprivileged child can import modules
    without seeing anything else there. (bubblewrap does the same with
    --tmpfs/--dir/--ro-bind.)"""
    handles = [(path, os.open(path, os.O_PATH)) for path in expose]  # before masking
    for mask in masks:
        _mount(b"tmpfs", mask, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=1m,mode=0755")
    for path, fd in handles:
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}".encode(), path, None, _MS_BIND | _MS_REC, None)
        os.close(fd)


def _mount(source, target, fstype, flags, data):
    if _libc.mount(source, target.encode(), fstype, flags, data) != 0:
        raise OSError(ctypes.get_errno(), f"cannot mount on {target}")
