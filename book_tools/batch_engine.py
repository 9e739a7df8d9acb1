"""The papermill engine the batch executes notebooks with: ``papermill --engine course``.

Executing a notebook is a conversation between a client (papermill, through nbclient) and a
kernel over ZeroMQ sockets. nbclient waits for each message on asyncio, which learns that a
socket has a message from an edge-triggered notification. When that notification is missed, the
client sleeps beside a message that has already arrived until its time limit makes it look at the
socket again, or forever when there is no limit. What loses the notification is a send on the socket
the client is waiting on (jupyter_client's Session sends through a plain, blocking copy of the asyncio
socket, which can take the notification without the waiting poll being told): nbclient stands in for the front end of an ipywidgets ``Output``, and a cell
that writes into one with ``with out:`` has the client send each captured output back to the kernel
on the shell socket while it waits there for the cell's reply (papermill's own engine stalled on
such a slider about once in 18 executions). The course's widget cells hand their figure to the
widget's state instead (:func:`course_lib.plots.show_in`), so no runner sends anything while a cell
runs (``benchmarks/widget_stress.py --plain`` counts plain papermill runs of chapter 6,
``tests/test_widget_cells.py`` checks every widget cell).

This engine stays the batch's, as a second guard. It changes two things and nothing else:

- its client never waits on one notification longer than :data:`POLL_SLICE_S`: each wait ends
  with a direct look at the socket, so a missed notification costs at most that long;
- every cell has a time limit (:data:`CELL_TIMEOUT_S`, ten times the slowest cell of the
  course), so a cell that really hangs stops the run instead of waiting forever.
"""

from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import Type, default

CELL_TIMEOUT_S = 600    # any one cell: ten times the slowest cell of the batch (about 60 s on 2 cores)
POLL_SLICE_S = 0.5      # the longest the client trusts one socket notification
ENGINE_NAME = "course"  # papermill --engine course


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A kernel channel that waits for a message in slices of at most POLL_SLICE_S seconds.

    Each slice ends with a direct look at the socket, so a message whose asyncio notification
    was missed is picked up within one slice instead of at the caller's time limit (or never).
    """

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
            if await self.socket.poll(int(1000 * min(POLL_SLICE_S, left))):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty


class CourseKernelClient(AsyncKernelClient):
    """papermill's asynchronous kernel client, with every channel waiting in slices."""
    shell_channel_class = Type(SlicedPollChannel)
    iopub_channel_class = Type(SlicedPollChannel)
    stdin_channel_class = Type(SlicedPollChannel)
    control_channel_class = Type(SlicedPollChannel)


class CourseKernelManager(AsyncKernelManager):
    @default("client_factory")
    def _client_factory_default(self) -> type:
        return CourseKernelClient


class CourseEngine:
    """papermill's engine with the sliced-wait client and a per-cell limit (``--engine course``).

    It hands every call to papermill's own engine (nbclient), adding the kernel manager above
    and the limit.
    """

    @classmethod
    def execute_notebook(cls, nb, kernel_name, **kwargs):
        kwargs.setdefault("kernel_manager_class", CourseKernelManager)
        kwargs["execution_timeout"] = kwargs.get("execution_timeout") or CELL_TIMEOUT_S
        return _nbclient_engine().execute_notebook(nb, kernel_name, **kwargs)

    @classmethod
    def nb_kernel_name(cls, nb, name=None):
        return _nbclient_engine().nb_kernel_name(nb, name)

    @classmethod
    def nb_language(cls, nb, language=None):
        return _nbclient_engine().nb_language(nb, language)


def _nbclient_engine():
    # Looked up when a notebook runs: papermill imports this module (through the entry point in
    # pyproject.toml) while it is still loading papermill.engines.
    from papermill.engines import NBClientEngine
    return NBClientEngine


def register() -> None:
    """Make ``--engine course`` known to papermill in this process (the entry point does it for
    an installed course_lib; this covers a checkout on sys.path)."""
    from papermill.engines import papermill_engines
    papermill_engines.register(ENGINE_NAME, CourseEngine)
