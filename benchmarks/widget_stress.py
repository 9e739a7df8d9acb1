"""Stress check: execute every widget cell of the course many times, the way the batch does, and count stalls.

A *widget cell* is a code cell whose committed output is a live widget (a slider, a text box, a
stepper). For each one, this script builds a notebook made of the chapter's code cells up to that
cell (its set-up) followed by the widget cell repeated ``--repeats`` times, and executes it with
papermill and a short per-cell time limit (``--stall-s``), in ``--kernels`` fresh kernels. A cell
that takes the whole limit is a *stall*: the kernel had finished it, but the client did not hear
the reply until the limit made it look again (or never, which papermill reports as a timeout).

    python benchmarks/widget_stress.py --client stock    # papermill's own kernel client
    python benchmarks/widget_stress.py --client course   # the batch's client (book_tools.reproduce)

Writes ``benchmarks/records/widget_stress-<client>.json`` with every cell's count of executions and stalls and
the slowest execution seen. Takes about 5 minutes on 2 cores with the defaults.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import papermill as pm

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import write_json  # noqa: E402
from book_tools import batch_engine, reproduce  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widget_cells(notebook: Path) -> list[int]:
    """Indices of the code cells whose committed output is a widget."""
    nb = nbformat.read(notebook, as_version=4)
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))]


def stress_notebook(notebook: Path, index: int, repeats: int) -> nbformat.NotebookNode:
    """The chapter's code cells before `index`, then cell `index` `repeats` times, outputs cleared."""
    nb = nbformat.read(notebook, as_version=4)
    setup = [c for c in nb.cells[:index] if c.cell_type == "code"]
    cells = setup + [nb.cells[index]] * repeats
    out = nbformat.v4.new_notebook(metadata=nb.metadata)
    out.cells = [copy.deepcopy(c) for c in cells]
    for i, c in enumerate(out.cells):
        c.outputs, c.execution_count, c.id = [], None, f"stress-{i}"  # ids must be unique
    return out


def run(client: str, repeats: int, kernels: int, stall_s: float) -> dict:
    batch_engine.register()
    engine = batch_engine.ENGINE_NAME if client == "course" else None
    results = {}
    for notebook in reproduce.chapter_notebooks():
        for index in widget_cells(notebook):
            key = f"{notebook.stem} cell {index}"
            durations, errors = [], []
            for k in range(kernels):
                nb = stress_notebook(notebook, index, repeats)
                n_setup = len(nb.cells) - repeats
                with tempfile.TemporaryDirectory() as tmp:
                    src, dst = Path(tmp) / "in.ipynb", Path(tmp) / "out.ipynb"
                    nbformat.write(nb, src)
                    try:
                        reproduce.os.environ.update(reproduce.BATCH_ENV)
                        pm.execute_notebook(str(src), str(dst), kernel_name="python3", cwd=str(notebook.parent),
                                            progress_bar=False, execution_timeout=stall_s, engine_name=engine)
                    except Exception as error:  # a lost reply: papermill gives up at the limit
                        errors.append(f"kernel {k}: {type(error).__name__}: {str(error).splitlines()[0]}")
                    done = nbformat.read(dst, as_version=4) if dst.exists() else nb
                for c in done.cells[n_setup:]:
                    d = c.metadata.get("papermill", {}).get("duration")
                    if d is not None:
                        durations.append(d)
            stalls = sum(d >= 0.9 * stall_s for d in durations) + len(errors)
            results[key] = {"executions": len(durations), "stalls": stalls,
                            "slowest_s": round(max(durations), 3) if durations else None,
                            "median_s": round(sorted(durations)[len(durations) // 2], 3) if durations else None,
                            "errors": errors}
            print(f"{client}: {key}: {results[key]['executions']} executions, {stalls} stalls, "
                  f"slowest {results[key]['slowest_s']} s", flush=True)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--client", choices=["stock", "course"], default="course",
                   help="stock: papermill's default engine; course: the batch's engine (book_tools.reproduce)")
    p.add_argument("--repeats", type=int, default=25, help="executions of the widget cell per kernel")
    p.add_argument("--kernels", type=int, default=4, help="fresh kernels per widget cell")
    p.add_argument("--stall-s", type=float, default=10.0,
                   help="per-cell limit; an execution that takes it all counts as a stall")
    p.add_argument("--out", type=Path, default=None, help="JSON file (default benchmarks/records/widget_stress-CLIENT.json)")
    args = p.parse_args()
    start = time.perf_counter()
    cells = run(args.client, args.repeats, args.kernels, args.stall_s)
    record = {"client": args.client, "device": f"CPU, {os.cpu_count()} cores", "python": platform.python_version(),
              "repeats_per_kernel": args.repeats, "kernels": args.kernels,
              "stall_s": args.stall_s, "cells": cells,
              "total_executions": sum(c["executions"] for c in cells.values()),
              "total_stalls": sum(c["stalls"] for c in cells.values()),
              "wall_s": round(time.perf_counter() - start, 1)}
    write_json(args.out or REPO_ROOT / "benchmarks" / "records" / f"widget_stress-{args.client}.json", record)
    print(f"{args.client}: {record['total_stalls']} stalls in {record['total_executions']} executions "
          f"of {len(cells)} widget cells ({record['wall_s']} s)")


if __name__ == "__main__":
    main()
