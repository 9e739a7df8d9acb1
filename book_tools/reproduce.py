"""The papermill batch: execute every chapter notebook in place and record its time.

``python -m book_tools reproduce`` is how every output and figure in the book is
produced. Jupyter Book itself never executes a notebook (``execute_notebooks:
off``); it renders what this batch wrote. For each notebook the batch

1. executes it top to bottom with papermill (a failing cell stops the batch),
2. writes the measured wall time into ``book/timings.json`` and the table
   ``book/execution_times.md``,
3. rewrites the notebook's "Time on a 2-core CPU" line from that measurement,
   so the time a chapter announces is the time it took, never a guess.

Every notebook runs through papermill's engine ``course`` (:mod:`book_tools.batch_engine`),
whose kernel client cannot miss a reply, with a per-cell time limit: a cell that runs past it
stops the batch with an error naming the notebook and the cell.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from book_tools import NOTEBOOKS_DIR, REPO_ROOT, arithmetic, chapter_notebooks, write_notebook

TIMINGS_PATH = REPO_ROOT / "book" / "timings.json"
TIMES_PAGE = REPO_ROOT / "book" / "execution_times.md"

NOTEBOOK_BUDGET_S = 5 * 60      # any one notebook
BATCH_BUDGET_S = 25 * 60        # all notebooks together
TIME_LINE = re.compile(r"^(?P<bullet>\s*(?:[-*]\s+)?)\*\*Time on a 2-core CPU:\*\*.*$", re.MULTILINE)
# The measured part of a stamped line: only the duration is rewritten, the prose that follows it stays.
TIME_STAMP = re.compile(r"(\*\*Time on a 2-core CPU:\*\* )[^\n,]*(?=, measured by the batch)")

# Command-line runs a chapter reads (too long to run inside its notebook): benchmarks/experiments.toml lists every
# record with the command that remakes it; those with `batch_before` are made by the batch before that chapter when
# their file is missing, or always with --rerun-runs. The notebook names the script that produced what it plots.
EXPERIMENTS = REPO_ROOT / "benchmarks" / "experiments.toml"


def experiments(path: Path = EXPERIMENTS) -> list[dict]:
    """benchmarks/experiments.toml's entries, one per record (path, command, device, pages, ...), in its order."""
    import tomllib

    return tomllib.loads(path.read_text())["record"]


def pre_steps(path: Path = EXPERIMENTS) -> dict[str, tuple[tuple[str, str], ...]]:
    """chapter -> the (script with its arguments, record) pairs the batch makes before it, in the file's order."""
    steps: dict[str, list[tuple[str, str]]] = {}
    for record in experiments(path):
        if "batch_before" in record:
            steps.setdefault(record["batch_before"], []).append((record["command"].removeprefix("python "),
                                                                record["path"]))
    return {chapter: tuple(pairs) for chapter, pairs in steps.items()}


PRE_STEPS = pre_steps() if EXPERIMENTS.exists() else {}  # an installed book_tools has no benchmarks/ beside it

# Fixed so that notebook outputs are the same on every run (nbval compares them).
BATCH_ENV = {"PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
             "COURSE_BATCH": "1"}  # COURSE_BATCH: no progress bars in saved outputs (course_lib.progress)
# Training numbers depend on the order in which floating-point sums are taken, and torch's CPU
# libraries choose that order by processor: AVX-512 kernels on a processor that has them, AVX2
# kernels on one that does not. The batch asks every library for its AVX2 kernels, so a
# processor with AVX-512 computes what a 2-core AVX2 runtime computes: ATen's own kernels
# (ATEN_CPU_CAPABILITY), oneDNN's (ONEDNN_MAX_CPU_ISA) and MKL's matrix products in their
# reproducible mode (MKL_CBWR). On an AVX2 processor these change nothing. MKL honours
# MKL_CBWR=AVX2 on Intel processors only and takes its own branch on others, so results agree
# across processors of one vendor, not across vendors: book_tools.arithmetic handles that.
# COURSE_MKL_CBWR replaces MKL's branch for one run, to measure which cells depend on it
# (book_tools.arithmetic); outputs made with it are not the book's.
NUMERICS_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                "MKL_CBWR": os.environ.get("COURSE_MKL_CBWR", "AVX2")}
BATCH_ENV.update(NUMERICS_ENV)
# OpenMP threads that find no work spin instead of sleeping. When other processes want the same
# cores (the sandbox's workers, a second notebook), torch's threads then wait on each other: on 2
# cores, three GRU trainings side by side ran 10x slower than one, and a 1-minute cell passed the
# 10-minute limit. Sleeping threads cost about 20% alone and keep that case within 3x; the
# numbers computed are the same.
BATCH_ENV["OMP_WAIT_POLICY"] = "PASSIVE"


def select_chapters(prefixes: list[str] | None, command: str) -> list[Path]:
    """The chapters whose names start with one of `prefixes` (every chapter when there are none);
    an error naming the command and the chapters to choose from when none matches."""
    notebooks = [nb for nb in chapter_notebooks() if not prefixes or any(nb.name.startswith(p) for p in prefixes)]
    if not notebooks:
        raise SystemExit(f"{command}: no chapter in {NOTEBOOKS_DIR} starts with {prefixes}; "
                         f"choose from {[p.stem for p in chapter_notebooks()]}")
    return notebooks


def format_duration(seconds: float) -> str:
    """'42 s' or '3 min 05 s': how the book states times."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


def execute(notebook: Path, parameters: dict | None = None, output: Path | None = None,
            cell_timeout: float | None = None) -> float:
    """Execute one notebook with papermill (in place by default); return its wall time in seconds.

    A cell that runs past `cell_timeout` seconds (default: batch_engine.CELL_TIMEOUT_S) stops
    the run with an error naming the notebook and the cell.
    """
    import papermill as pm  # the book extra: imported here so `python -m course_lib ppo` runs without it
    from nbclient.exceptions import CellTimeoutError

    from book_tools import batch_engine  # jupyter's kernel machinery: only when a notebook runs

    batch_engine.register()
    cell_timeout = cell_timeout or batch_engine.CELL_TIMEOUT_S
    os.environ.update(BATCH_ENV)
    current = {}
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(notebook), str(output or notebook), parameters=parameters or {},
                            kernel_name="python3", cwd=str(notebook.parent), progress_bar=False,
                            engine_name=batch_engine.ENGINE_NAME, execution_timeout=cell_timeout,
                            on_cell_execute=lambda cell, cell_index: current.update(cell=cell, index=cell_index))
    except CellTimeoutError:
        cell = current.get("cell")
        first = cell.source.strip().splitlines()[0] if cell is not None and cell.source.strip() else ""
        raise SystemExit(
            f"reproduce: {notebook.name}, cell {current.get('index')} ({first!r}) ran past the per-cell "
            f"limit of {cell_timeout:g} s: the kernel had not sent its reply to the cell's execute request. "
            f"Run the cell by hand to see whether it is slow or stuck; the slowest cells of the batch "
            f"take about a minute.") from None
    return time.perf_counter() - start


def stamp_time(notebook: Path, seconds: float) -> None:
    """Write the measured time into the notebook's "Time on a 2-core CPU" line: its duration, when the line
    already says it was measured by the batch (what follows on the line stays); else the whole line."""
    nb = json.loads(notebook.read_text())
    duration = format_duration(seconds)
    text = f"**Time on a 2-core CPU:** {duration}, measured by the batch (`python -m book_tools reproduce`)."
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            if TIME_STAMP.search(source):
                cell["source"] = TIME_STAMP.sub(lambda m: m[1] + duration, source).splitlines(keepends=True)
            elif TIME_LINE.search(source):
                cell["source"] = TIME_LINE.sub(lambda m: m["bullet"] + text, source).splitlines(keepends=True)
    write_notebook(notebook, nb)


def load_timings() -> dict:
    return json.loads(TIMINGS_PATH.read_text()) if TIMINGS_PATH.exists() else {}


def write_timings(timings: dict) -> None:
    TIMINGS_PATH.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
    rows = [f"| [{name}](../notebooks/{name}.ipynb) | {format_duration(t['seconds'])} |"
            for name, t in sorted(timings.items())]
    timings = load_timings()
    total = sum(t["seconds"] for t in timings.values())
    TIMES_PAGE.write_text(
        "# Execution times\n\n"
        "Every chapter was executed top to bottom by the batch (`python -m book_tools reproduce`) "
        f"on {os.cpu_count()} CPU cores{cpu_names(timings)}; these are its wall-clock measurements, "
        "written by the batch itself.\n\n"
        "| chapter | time |\n|---|---|\n" + "\n".join(rows) +
        f"\n| **all chapters** | **{format_duration(total)}** |\n")


def cpu_names(timings: dict) -> str:
    """' (AMD EPYC)': the processors the timings were measured on, for the times page."""
    names = sorted({t["cpu"] for t in timings.values() if t.get("cpu")})
    return f" ({', '.join(names)})" if names else ""


def run_pre_step(notebook: Path, rerun: bool) -> None:
    """Run the command-line experiments a chapter reads, unless their results are already there."""
    import shlex
    import subprocess
    import sys

    for command, output in PRE_STEPS.get(notebook.stem, ()):
        script, *arguments = shlex.split(command)
        if (REPO_ROOT / output).exists() and not rerun:
            print(f"reproduce: {notebook.stem} reads {output} (from {script}; --rerun-runs to redo it)", flush=True)
            continue
        print(f"reproduce: running {script} for {notebook.name} ...", flush=True)
        os.environ.update(BATCH_ENV)
        subprocess.run([sys.executable, str(REPO_ROOT / script), *arguments], cwd=REPO_ROOT, check=True)


def reproduce(only: list[str] | None = None, strict_budget: bool = False, rerun_runs: bool = False) -> int:
    notebooks = select_chapters(only, "reproduce")
    whole, guarded = notebooks == chapter_notebooks(), check_arithmetic(notebooks)
    for nb in notebooks:
        run_pre_step(nb, rerun_runs)
        print(f"reproduce: executing {nb.name} ...", flush=True)
        # the notebook and the table state this same number
        seconds = round(_execute_apart(nb) if nb in guarded else execute(nb), 1)
        if not whole and arithmetic.read_stamp() is not None:  # its outputs now follow this processor's arithmetic
            arithmetic.stamp_chapter(nb.stem, arithmetic.cpu_vendor(), apart=bool(arithmetic.tagged_cells(nb)))
        stamp_time(nb, seconds)
        timings = load_timings()  # read again: another batch may have written other chapters meanwhile
        timings[nb.stem] = {"seconds": seconds, "cpus": os.cpu_count(), "cpu": cpu_model(),
                            "python": platform.python_version()}
        write_timings(timings)
        flag = "  OVER the 5-minute budget" if seconds > NOTEBOOK_BUDGET_S else ""
        print(f"reproduce: {nb.name} took {format_duration(seconds)}{flag}", flush=True)
    if whole:  # every chapter's outputs now follow this processor's arithmetic
        arithmetic.write_stamp(arithmetic.cpu_vendor())
    timings = load_timings()
    total = sum(t["seconds"] for t in timings.values())
    print(f"reproduce: all chapters {format_duration(total)} (budget {format_duration(BATCH_BUDGET_S)})")
    over = [n for n, t in timings.items() if t["seconds"] > NOTEBOOK_BUDGET_S] or total > BATCH_BUDGET_S
    return 1 if (strict_budget and over) else 0


def check_arithmetic(notebooks: list[Path]) -> list[Path]:
    """The chapters to execute under guard (_execute_apart): every one of a partial run on a processor of another
    vendor than the batch's. Those with cells tagged arithmetic.TAG are then recorded apart
    (arithmetic.stamp_chapter). [] for the whole batch, which re-stamps every chapter, and on the batch's vendor."""
    made_on, here = arithmetic.read_stamp(), arithmetic.cpu_vendor()
    if made_on is None or made_on == here or notebooks == chapter_notebooks():
        return []
    return list(notebooks)


def _execute_apart(notebook: Path) -> float:
    """Execute a chapter alone on another vendor than the batch's; refuse, and put the notebook and the
    checkpoints back, where it writes other checkpoints than the committed ones (the chapters after it read
    them, and their outputs were computed from the committed ones) or where it fails."""
    import shutil
    import tempfile

    from book_tools import checkpoint_files

    with tempfile.TemporaryDirectory() as tmp:
        snapshot, saved = Path(tmp) / "checkpoints", Path(tmp) / notebook.name
        shutil.copytree(checkpoint_files.CHECKPOINTS, snapshot)
        shutil.copy2(notebook, saved)
        try:
            seconds = execute(notebook)
            changed = checkpoint_files.changed_files(snapshot, checkpoint_files.CHECKPOINTS)
        except BaseException:
            checkpoint_files.restore(snapshot)
            shutil.copy2(saved, notebook)
            raise
        if changed:
            checkpoint_files.restore(snapshot)
            shutil.copy2(saved, notebook)
            made_on, here = arithmetic.read_stamp(), arithmetic.cpu_vendor()
            raise SystemExit(
                f"reproduce: the committed outputs were made on a processor whose vendor is {made_on} "
                f"(notebooks/{arithmetic.STAMP_PATH.name}), and this one's is {here}. {notebook.stem}, executed "
                f"alone here, wrote other checkpoints ({', '.join(changed)}), which the chapters after it read: "
                f"their outputs would no longer follow from them. The notebook and the checkpoints are put back. "
                f"Re-execute every chapter (python -m book_tools reproduce; chapter 4's GRU and chapter 9's tiny "
                f"coder then change, so the benchmark records made from them must be re-made too: "
                f"tests/test_records.py names them and their commands), or run on a processor whose vendor is "
                f"{made_on}.")
    return seconds


def summarize_junit(paths: Path | list[Path]) -> str:
    """One line for the test command: how many notebook cells nbval compared, over its JUnit reports."""
    paths = [paths] if isinstance(paths, Path) else paths
    cases = [c for path in paths if path.exists() for c in ET.parse(path).getroot().findall(".//testcase")]
    failed = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    notebooks = {c.get("classname", "").split("::")[0] for c in cases}
    uncompared = sum(1 for c in cases if all(c.find(k) is None for k in ("failure", "error", "skipped"))
                     and c.find("properties/property[@name='outputs_compared'][@value='no']") is not None)
    line = (f"notebook cells compared: {len(cases) - skipped - uncompared} in {len(notebooks)} notebooks "
            f"({len(cases) - failed - skipped - uncompared} reproduced, {failed} failed, {skipped} skipped)")
    if uncompared:
        line += (f"; {uncompared} more ran without their outputs being compared (tagged '{arithmetic.TAG}', "
                 f"made on another processor vendor)")
    return line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", nargs="*", metavar="PREFIX",
                        help="execute only notebooks whose name starts with PREFIX (e.g. 01)")
    parser.add_argument("--strict-budget", action="store_true",
                        help="exit 1 when a notebook or the batch exceeds the course's time budget")
    parser.add_argument("--rerun-runs", action="store_true",
                        help="re-run the command-line experiments chapters read (PRE_STEPS), even if their results exist")
    parser.set_defaults(func=lambda args: reproduce(args.only, args.strict_budget, args.rerun_runs))


def cpu_model() -> str:
    """The processor's name as Linux reports it (platform.processor() elsewhere): timings and records name it."""
    return arithmetic.cpuinfo_field("model name") or platform.processor()


if __name__ == "__main__":  # used by scripts/test.sh
    p = argparse.ArgumentParser()
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--summarize-junit", type=Path, nargs="+", metavar="JUNIT")
    group.add_argument("--print-env", action="store_true", help="the batch's environment, as NAME=VALUE lines")
    args = p.parse_args()
    if args.print_env:
        print("\n".join(f"{k}={v}" for k, v in BATCH_ENV.items()))
    else:
        print(summarize_junit(args.summarize_junit))
