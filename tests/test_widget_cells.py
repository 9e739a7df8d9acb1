"""The widget cells run under any notebook runner: the runner never has to send the kernel anything
while a cell runs, so it cannot miss the cell's reply (course_lib.plots.show_in says how).

papermill, nbconvert and nbclient stand in for a front end: when a cell writes into an ipywidgets
``Output`` with ``with out:``, the runner sends the captured output back to the kernel on the shell
socket, the socket it is waiting on for the cell's reply. A reply that arrives at that moment can go
unheard until the cell's time limit, or forever without one (benchmarks/widget_stress.py counts it).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from book_tools import NOTEBOOKS_DIR, REPO_ROOT, reproduce


def _widget_stress():
    spec = importlib.util.spec_from_file_location("widget_stress", REPO_ROOT / "benchmarks" / "widget_stress.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recording_manager(sent: list):
    """papermill's own kernel manager and client, noting the type of every message sent on the shell socket."""
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Type, default

    class RecordingChannel(AsyncZMQSocketChannel):
        def send(self, msg):
            sent.append(msg["header"]["msg_type"])
            super().send(msg)

    class RecordingClient(AsyncKernelClient):
        shell_channel_class = Type(RecordingChannel)

    class RecordingManager(AsyncKernelManager):
        @default("client_factory")
        def _client_factory_default(self):
            return RecordingClient

    return RecordingManager


def _run_stock(nb, tmp_path, sent: list) -> dict:
    """Execute `nb` with papermill's default engine (no engine named), as a reader's command does."""
    import nbformat
    import papermill as pm

    src, dst = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    pm.execute_notebook(str(src), str(dst), kernel_name="python3", cwd=str(NOTEBOOKS_DIR), progress_bar=False,
                        execution_timeout=120, kernel_manager_class=_recording_manager(sent))
    return json.loads(dst.read_text())


def _output_states(done: dict) -> list[dict]:
    state = done["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"] for m in state.values() if m["model_name"] == "OutputModel"]


def test_show_in_puts_the_figure_in_the_widget_state_and_closes_it():
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    from course_lib.plots import show_in

    out = widgets.Output()
    for title in ("first", "second"):
        fig, ax = plt.subplots()
        ax.set_title(title)
        show_in(out)
        assert not plt.fignum_exists(fig.number)  # closed: pyplot will not show it a second time
        assert len(out.outputs) == 1  # the second figure replaced the first
        assert out.outputs[0]["output_type"] == "display_data"
        assert "Figure" in out.outputs[0]["data"]["text/plain"]


def test_the_detector_sees_the_runner_send_when_a_cell_captures_into_an_output(tmp_path):
    """The control: the pattern the widget cells avoid makes papermill's client send a comm_msg."""
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("import ipywidgets as widgets\nfrom IPython.display import display\n"
                                          "out = widgets.Output()\ndisplay(out)\nwith out:\n    print('captured')")]
    sent: list = []
    _run_stock(nb, tmp_path, sent)
    assert "comm_msg" in sent, sent


@pytest.mark.slow
@pytest.mark.parametrize("chapter", [nb.stem for nb in reproduce.chapter_notebooks()
                                     if _widget_stress().widget_cells(nb)])
def test_widget_cells_need_nothing_from_the_runner(chapter, tmp_path):
    """Every chapter with widgets, up to its last widget cell, under papermill's default engine: the
    client sends only the cells (execute_request) and its greeting (kernel_info_request), and each
    Output widget still holds its figure, in the widget state the book and nbval read."""
    stress = _widget_stress()
    notebook = NOTEBOOKS_DIR / f"{chapter}.ipynb"
    cells = stress.widget_cells(notebook)
    sent: list = []
    done = _run_stock(stress.stress_notebook(notebook, cells[-1], 1), tmp_path, sent)
    assert set(sent) <= {"kernel_info_request", "execute_request"}, sorted(set(sent))
    for state in _output_states(done):
        assert [o["output_type"] for o in state["outputs"]] == ["display_data"]
        assert "image/png" in state["outputs"][0]["data"]
