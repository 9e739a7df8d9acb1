"""Stress check: execute every widget cell of the course many times, the way the batch does, and count stalls.

A *widget cell* is a code cell whose committed output is a live widget (a slider, a text box, a
stepper). For each one, this script builds a notebook made of the chapter's code cells up to that
cell (its set-up) followed by the widget cell repeated ``--repeats`` times, and executes it with
papermill and a short per-cell time limit (``--stall-s``), in ``--kernels`` fresh kernels. A cell
that takes the whole limit is a *stall*: the kernel had finished it, but the client did not hear
the reply until the limit made it look again (or never, which papermill reports as a timeout).

    python benchmarks/widget_stress.py --client stock    # papermill's own kernel client
    python benchmarks/widget_stress.py --client course   # the batch's client (book_tools.reproduce)

Writes ``notebooks/data/widget_stress-<client>.json`` (benchmarks/schema.py's format) with a row per widget
cell: its count of executions and stalls and the slowest execution seen. Takes about 5 minutes on 2 cores with the defaults.

With ``--plain RUNS`` it counts instead what a reader meets who runs a chapter with papermill as its
documentation says (``papermill notebooks/06_ppo_and_gae.ipynb out.ipynb``): RUNS runs of each chapter,
each in a fresh kernel with papermill's default engine and without the batch's environment, through
the chapter's code cells up to and including its last widget cell. A run is clean when no cell took
the whole limit and none failed:

    python benchmarks/widget_stress.py --plain 100 --only 06 --stall-s 30    # papermill's default engine

It writes ``notebooks/data/widget_stress-plain-<client>.json`` (the same format) with a row per chapter: the
runs, the clean runs, the longest streak of clean runs, the stalls and the seconds per run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import nbformat
import papermill as pm

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import command_args, machine, new_record, write_json  # noqa: E402
from book_tools import NOTEBOOKS_DIR, batch_engine, reproduce  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widget_cells(notebook: Path) -> list[int]:
    """Indices of the code cells whose committed output is a widget."""
    nb = nbformat.read(notebook, as_version=4)
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))]


def stress_notebook(notebook: Path, index: int, repeats: int) -> nbformat.NotebookNode:
    """The chapter's code cells before `index`, then cell `index` `repeats` times, outputs cleared
    (with `repeats` 1: the chapter's code cells up to and including cell `index`)."""
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


def plain_runs(notebook: Path, runs: int, stall_s: float, client: str) -> dict:
    """`runs` fresh-kernel runs of `notebook` up to and including its last widget cell, as a reader's
    papermill command runs it (client "stock": papermill's default engine); the count of each."""
    batch_engine.register()
    engine = batch_engine.ENGINE_NAME if client == "course" else None
    nb = stress_notebook(notebook, widget_cells(notebook)[-1], 1)
    seconds, stalled_runs, stalls, streak, best_streak, errors = [], 0, 0, 0, 0, []
    for k in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "in.ipynb", Path(tmp) / "out.ipynb"
            nbformat.write(nb, src)
            start = time.perf_counter()
            try:
                pm.execute_notebook(str(src), str(dst), kernel_name="python3", cwd=str(NOTEBOOKS_DIR),
                                    progress_bar=False, execution_timeout=stall_s, engine_name=engine)
                error = None
            except Exception as e:  # a reply never heard: papermill gives up at the limit
                error = f"run {k}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            seconds.append(time.perf_counter() - start)
            done = nbformat.read(dst, as_version=4) if dst.exists() else nb
        durations = [c.metadata.get("papermill", {}).get("duration") for c in done.cells]
        run_stalls = sum(d is not None and d >= 0.9 * stall_s for d in durations) + (error is not None)
        stalls += run_stalls
        stalled_runs += run_stalls > 0
        if error:
            errors.append(error)
        streak = 0 if run_stalls else streak + 1
        best_streak = max(best_streak, streak)
        print(f"plain {client}: {notebook.stem} run {k + 1}/{runs}: {'STALL' if run_stalls else 'clean'} "
              f"({seconds[-1]:.1f} s); {k + 1 - stalled_runs} clean so far", flush=True)
    return {"notebook": notebook.name, "through_cell": widget_cells(notebook)[-1],
            "widget_cells": widget_cells(notebook), "runs": runs, "clean_runs": runs - stalled_runs,
            "longest_clean_streak": best_streak, "stalls": stalls,
            "seconds_per_run": {"mean": round(statistics.mean(seconds), 2),
                                "median": round(statistics.median(seconds), 2), "max": round(max(seconds), 2)},
            "errors": errors}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--client", choices=["stock", "course"], default=None,
                   help="stock: papermill's default engine; course: the batch's engine (book_tools.reproduce); "
                        "default: course, and stock with --plain")
    p.add_argument("--repeats", type=int, default=25, help="executions of the widget cell per kernel")
    p.add_argument("--kernels", type=int, default=4, help="fresh kernels per widget cell")
    p.add_argument("--stall-s", type=float, default=10.0,
                   help="per-cell limit; an execution that takes it all counts as a stall")
    p.add_argument("--out", type=Path, default=None, help="JSON file (default notebooks/data/widget_stress-CLIENT.json)")
    p.add_argument("--plain", type=int, default=None, metavar="RUNS",
                   help="count RUNS plain papermill runs of each chapter up to its last widget cell instead")
    p.add_argument("--only", nargs="+", default=None, metavar="PREFIX", help="chapters whose names start so")
    p.add_argument("--notebook", type=Path, default=None,
                   help="with --plain: this notebook file instead of the chapters (run from notebooks/)")
    args = p.parse_args(argv)
    args.client = args.client or ("stock" if args.plain is not None else "course")
    start = time.perf_counter()
    config = {"client": args.client, "engine": "course" if args.client == "course" else "papermill's default",
              "stall_s": args.stall_s}
    if args.plain is not None:
        notebooks = [args.notebook] if args.notebook else [
            nb for nb in reproduce.select_chapters(args.only, "widget_stress") if widget_cells(nb)]
        runs = [plain_runs(nb, args.plain, args.stall_s, args.client) for nb in notebooks]
        config |= {"what": "plain papermill runs of a chapter up to and including its last widget cell, each in a "
                           "fresh kernel, without the batch's environment; clean: no cell took the whole limit and "
                           "none failed", "runs_per_chapter": args.plain}
        summary = {"runs": sum(c["runs"] for c in runs), "clean_runs": sum(c["clean_runs"] for c in runs),
                   "stalls": sum(c["stalls"] for c in runs)}
        out = args.out or REPO_ROOT / "notebooks" / "data" / f"widget_stress-plain-{args.client}.json"
        said = f"plain {args.client}: {summary['clean_runs']} clean runs of {summary['runs']}, {summary['stalls']} stalls"
    else:
        cells = run(args.client, args.repeats, args.kernels, args.stall_s)
        runs = [{"cell": key, **row} for key, row in cells.items()]
        config |= {"repeats_per_kernel": args.repeats, "kernels": args.kernels}
        summary = {"widget_cells": len(cells), "total_executions": sum(c["executions"] for c in cells.values()),
                   "total_stalls": sum(c["stalls"] for c in cells.values())}
        out = args.out or REPO_ROOT / "notebooks" / "data" / f"widget_stress-{args.client}.json"
        said = (f"{args.client}: {summary['total_stalls']} stalls in {summary['total_executions']} executions of "
                f"{len(cells)} widget cells")
    record = new_record("benchmarks/widget_stress.py", config=config, machine=machine(), device="cpu",
                        seconds=time.perf_counter() - start, args=command_args(argv))
    record["versions"].update({name: metadata.version(name) for name in
                               ("papermill", "nbclient", "jupyter_client", "pyzmq", "ipykernel", "ipywidgets")})
    record["runs"], record["summary"] = runs, summary
    write_json(out, record)
    print(f"{said} ({record['seconds']:.0f} s); wrote {out}")


if __name__ == "__main__":
    main()
