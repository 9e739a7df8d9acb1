"""The batch's papermill engine: a missed socket notification costs one slice, a hung cell stops the run."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from book_tools import batch_engine, reproduce


class LostNotificationSocket:
    """A socket whose message is there from the start but whose notification never comes:
    an asynchronous poll returns only when its own timeout ends, then sees the message."""

    def __init__(self):
        self.polls = []

    async def poll(self, timeout_ms=None):
        self.polls.append(timeout_ms)
        if timeout_ms is None:
            await asyncio.Event().wait()  # waits forever, as the stock channel would
        await asyncio.sleep(timeout_ms / 1000)
        return 1  # the look at the socket at the end of the wait finds the message


def sliced_channel(socket):
    channel = batch_engine.SlicedPollChannel.__new__(batch_engine.SlicedPollChannel)
    channel.socket = socket

    async def recv():
        return {"msg_type": "execute_reply"}
    channel._recv = recv
    return channel


def test_a_missed_notification_costs_one_slice_not_forever():
    socket = LostNotificationSocket()
    start = time.perf_counter()
    msg = asyncio.run(asyncio.wait_for(sliced_channel(socket).get_msg(timeout=None), timeout=5))
    assert msg["msg_type"] == "execute_reply"
    assert time.perf_counter() - start < 2 * batch_engine.POLL_SLICE_S
    assert socket.polls == [int(1000 * batch_engine.POLL_SLICE_S)]  # never an unbounded wait


def test_sliced_wait_still_honours_the_callers_timeout():
    class Silent(LostNotificationSocket):
        async def poll(self, timeout_ms=None):
            self.polls.append(timeout_ms)
            await asyncio.sleep(timeout_ms / 1000)
            return 0

    socket = Silent()
    start = time.perf_counter()
    with pytest.raises(Exception) as error:
        asyncio.run(sliced_channel(socket).get_msg(timeout=1.2))
    assert type(error.value).__name__ == "Empty"
    assert 1.1 < time.perf_counter() - start < 2.0
    assert max(socket.polls) <= 1000 * batch_engine.POLL_SLICE_S


def test_a_cell_past_the_limit_stops_the_run_naming_notebook_and_cell(tmp_path):
    nb = {"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None},
                    {"cell_type": "code", "id": "b", "metadata": {}, "source": "import time\ntime.sleep(30)",
                     "outputs": [], "execution_count": None}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_hangs.ipynb"
    path.write_text(json.dumps(nb))
    start = time.perf_counter()
    with pytest.raises(SystemExit) as stop:
        reproduce.execute(path, output=tmp_path / "out.ipynb", cell_timeout=2)
    message = str(stop.value)
    assert "01_hangs.ipynb" in message and "cell 1" in message and "'import time'" in message
    assert "2 s" in message
    assert time.perf_counter() - start < 25


def test_papermill_finds_the_engine_by_name_from_the_entry_point():
    from papermill.engines import papermill_engines  # loads the entry points, course_lib's included
    assert papermill_engines.get_engine(batch_engine.ENGINE_NAME) is batch_engine.CourseEngine


def test_the_batch_kernel_uses_the_avx2_kernels_of_every_cpu_library(tmp_path):
    code = ("import os, platform, torch\n"
            "print(os.environ['MKL_CBWR'], os.environ['ONEDNN_MAX_CPU_ISA'], torch.backends.cpu.get_cpu_capability(),"
            " platform.machine())")
    nb = {"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": code, "outputs": [], "execution_count": None}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_numerics.ipynb"
    path.write_text(json.dumps(nb))
    reproduce.execute(path, output=tmp_path / "out.ipynb")
    text = json.loads((tmp_path / "out.ipynb").read_text())["cells"][0]["outputs"][0]["text"]
    mkl, onednn, capability, machine = ("".join(text) if isinstance(text, list) else text).split()
    assert (mkl, onednn) == ("AVX2", "AVX2")
    if machine == "x86_64":  # a processor with AVX-512 is held to AVX2, one with AVX2 keeps it
        assert capability == "AVX2"


def test_the_test_command_exports_the_batch_environment():
    import subprocess
    import sys
    printed = subprocess.run([sys.executable, "-m", "book_tools.reproduce", "--print-env"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert dict(line.split("=", 1) for line in printed) == reproduce.BATCH_ENV
    assert "book_tools.reproduce --print-env" in (reproduce.REPO_ROOT / "scripts" / "test.sh").read_text()


def test_every_pre_step_names_a_script_and_a_committed_record():
    import shlex
    for chapter, steps in reproduce.PRE_STEPS.items():
        assert (reproduce.NOTEBOOKS_DIR / f"{chapter}.ipynb").exists(), chapter
        for command, output in steps:
            script = shlex.split(command)[0]
            assert (reproduce.REPO_ROOT / script).is_file(), f"{chapter}: no {script}"
            assert (reproduce.REPO_ROOT / output).is_file(), f"{chapter} reads {output}, which is not committed"


def test_a_pre_step_runs_its_script_with_its_arguments(monkeypatch, tmp_path):
    import subprocess
    import sys
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kwargs: calls.append(args))
    monkeypatch.setattr(reproduce, "PRE_STEPS", {"10_demo": (("benchmarks/demo.py --protocol course --samples 10",
                                                             str(tmp_path / "missing.json")),
                                                            ("benchmarks/done.py", __file__))})
    monkeypatch.setattr(reproduce.os, "environ", dict(reproduce.os.environ))  # run_pre_step sets BATCH_ENV
    reproduce.run_pre_step(Path("10_demo.ipynb"), rerun=False)
    assert calls == [[sys.executable, str(reproduce.REPO_ROOT / "benchmarks/demo.py"), "--protocol", "course",
                      "--samples", "10"]]  # the record that exists is read, not remade
