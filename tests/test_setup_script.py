"""scripts/setup.sh on other systems: it names what it misses before starting, hashes with sha256sum
or shasum, says once on macOS that the sandbox is weaker there, and stays idempotent.

Each test runs a copy of the script in a folder of its own, with a PATH that holds only the
tools the test gives it and a stand-in python whose version the test chooses; nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BASIC_TOOLS = ("bash", "cat", "cut", "grep", "rm", "touch", "dirname", "id", "mkdir", "cp")

# A python that answers the script's questions as a Python of version $FAKE_PY would, and
# records every other call (pip installs, imports) in $FAKE_LOG instead of running it.
FAKE_PYTHON = r"""#!/bin/bash
minor=$(echo "$FAKE_PY" | cut -d. -f2)
case "$*" in
  --version) echo "Python $FAKE_PY" ;;
  "-c import sys; sys.exit(sys.version_info < (3, 11))") [ "$minor" -ge 11 ] ;;
  "-m ensurepip --version") [ -z "$FAKE_NO_ENSUREPIP" ] && echo "pip 24.0" ;;
  -c*venv*) echo "python3.$minor-venv" ;;
  "-m venv .venv") mkdir -p .venv/bin && cp "$0" .venv/bin/python ;;
  *) echo "$*" >> "$FAKE_LOG" ;;
esac
"""


def _tool_folder(tmp_path: Path, *, extra=(), uname: str = "Linux", python: bool = True) -> Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in BASIC_TOOLS + tuple(extra):
        (tools / name).symlink_to(shutil.which(name))
    (tools / "uname").write_text(f"#!{shutil.which('bash')}\necho {uname}\n")
    (tools / "uname").chmod(0o755)
    if python:
        (tools / "python3").write_text(FAKE_PYTHON.replace("#!/bin/bash", f"#!{shutil.which('bash')}"))
        (tools / "python3").chmod(0o755)
    return tools


def _run(tmp_path: Path, tools: Path, *, python_version: str = "3.11.9", **env) -> subprocess.CompletedProcess:
    course = tmp_path / "course"
    if not course.exists():
        (course / "scripts").mkdir(parents=True)
        for name in ("constraints.txt", "pyproject.toml", "scripts/setup.sh"):
            shutil.copy(REPO / name, course / name)
    environment = {"PATH": str(tools), "HOME": str(tmp_path), "FAKE_PY": python_version,
                   "FAKE_LOG": str(tmp_path / "calls.log"), "FAKE_NO_ENSUREPIP": "", **env}
    return subprocess.run([shutil.which("bash"), str(course / "scripts" / "setup.sh")], capture_output=True,
                          text=True, env=environment, timeout=60)


def _stamps(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "course" / ".venv").glob(".installed-*"))


def _installs(tmp_path: Path) -> int:
    log = tmp_path / "calls.log"
    return log.read_text().count("-m pip install --quiet --disable-pip-version-check -c constraints.txt") \
        if log.exists() else 0


@pytest.mark.parametrize("hasher", ["sha256sum", "shasum"])
def test_it_hashes_with_sha256sum_or_shasum_and_a_second_run_installs_nothing(tmp_path, hasher):
    if shutil.which(hasher) is None:
        pytest.skip(f"no {hasher} on this machine")
    tools = _tool_folder(tmp_path, extra=[hasher] + (["perl"] if hasher == "shasum" and shutil.which("perl") else []))
    first = _run(tmp_path, tools)
    assert first.returncode == 0, first.stderr
    assert "creating .venv with Python 3.11.9" in first.stdout and _installs(tmp_path) == 1
    (stamp,) = _stamps(tmp_path)
    again = _run(tmp_path, tools)
    assert again.returncode == 0, again.stderr
    assert "installing the pinned packages" not in again.stdout and _installs(tmp_path) == 1
    assert _stamps(tmp_path) == [stamp]
    # the stamp is the same whichever tool made it: switching tools forces no reinstall
    digest = subprocess.run(["sha256sum"] if shutil.which("sha256sum") else ["shasum", "-a", "256"],
                            input=b"".join((tmp_path / "course" / n).read_bytes()
                                           for n in ("constraints.txt", "pyproject.toml", "scripts/setup.sh")),
                            capture_output=True, check=True).stdout.decode()[:16]
    assert stamp == f".installed-{digest}"


def test_with_neither_hasher_it_names_both_before_doing_anything(tmp_path):
    result = _run(tmp_path, _tool_folder(tmp_path))
    assert result.returncode == 1
    assert "missing:" in result.stderr and "sha256sum (GNU coreutils) or shasum (Perl)" in result.stderr
    assert not (tmp_path / "course" / ".venv").exists()


def test_an_old_or_absent_python_or_one_without_venv_is_named(tmp_path):
    hasher = "sha256sum" if shutil.which("sha256sum") else "shasum"
    tools = _tool_folder(tmp_path, extra=[hasher])
    old = _run(tmp_path, tools, python_version="3.10.12")
    assert old.returncode == 1 and "Python 3.11 or newer: python3 is Python 3.10.12" in old.stderr
    no_venv = _run(tmp_path, tools, FAKE_NO_ENSUREPIP="1")
    assert no_venv.returncode == 1 and "the venv module of python3" in no_venv.stderr
    assert "apt-get install python3.11-venv" in no_venv.stderr
    assert not (tmp_path / "course" / ".venv").exists()

    (tools / "python3").unlink()
    absent = _run(tmp_path, tools)
    assert absent.returncode == 1 and "python3, a Python 3.11 or newer" in absent.stderr


def test_on_macos_it_says_once_that_the_sandbox_is_weaker_and_installs_no_system_packages(tmp_path):
    tools = _tool_folder(tmp_path, extra=["shasum", "perl"] if shutil.which("perl") else ["shasum"], uname="Darwin")
    if not (tools / "shasum").resolve().exists():
        pytest.skip("no shasum on this machine")
    result = _run(tmp_path, tools)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("macOS has no bubblewrap") == 1
    assert "sandbox runs generated programs at its weaker level" in result.stdout
    assert "apt" not in result.stdout and "missing system packages" not in result.stdout


def test_on_linux_without_apt_the_missing_packages_are_named_not_installed(tmp_path):
    hasher = "sha256sum" if shutil.which("sha256sum") else "shasum"
    result = _run(tmp_path, _tool_folder(tmp_path, extra=[hasher]))
    assert result.returncode == 0, result.stderr
    assert "missing system packages: bubblewrap chromium fonts-wqy-microhei" in result.stdout
    assert "your system's package manager" in result.stdout
    assert "no git here" in result.stdout  # git is not needed to set up; make test needs it
    assert os.path.exists(tmp_path / "course" / ".venv" / "bin" / "python")
