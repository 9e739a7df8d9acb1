"""Isolation levels: how the worker processes are walled off (bubblewrap, unshare, or rlimits only).

The book's page ``sandbox_levels.md`` has the table of what each level guarantees.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Optional

LEVELS = ("process", "unshare", "bubblewrap")   # weakest to strongest
LEVEL_ENV_VAR = "COURSE_SANDBOX_LEVEL"
WORKER_SCRIPT = Path(__file__).with_name("worker.py")
SCRATCH_TMPFS_BYTES = 64 * 2**20
# The only environment the sandboxed code sees.
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8",
              # One malloc arena per thread would reserve 64 MiB of address
              # space each and trip RLIMIT_AS in threaded but honest code.
              "MALLOC_ARENA_MAX": "2"}


# --------------------------------------------------------------------------
# How each level walls a worker off (which level this machine has: host.isolation_level)
# --------------------------------------------------------------------------

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
