"""The test command's notebook checks: every chapter re-executed by nbval, its outputs compared
with the committed ones.

Each chapter starts from the checkpoints committed in notebooks/checkpoints, as a reader who
opens that chapter does: what a chapter writes there (chapter 4's GRU, chapter 9's tiny coder)
is put back before the next chapter runs, so a chapter is compared with the outputs the batch
computed from those same files. On a processor of the vendor the whole batch ran on
(book_tools.arithmetic), what a chapter writes must also equal the committed files, tensor for
tensor: the batch that made them would write them again. A chapter's cells are compared by the
vendor its own outputs were made on (arithmetic.made_on: a chapter re-executed alone elsewhere is
recorded apart).

    python -m book_tools.nbcheck [PREFIX ...]    # all chapters, or those whose name starts with PREFIX
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from book_tools import NOTEBOOKS_DIR, REPO_ROOT, arithmetic
from book_tools import checkpoint_files
from book_tools.reproduce import select_chapters, summarize_junit

REPORTS = REPO_ROOT / "_build" / "test-reports"
SANITIZE = NOTEBOOKS_DIR / "nbval_sanitize.cfg"


def check(prefixes: list[str] | None = None) -> int:
    from book_tools.batch_engine import CELL_TIMEOUT_S

    notebooks = select_chapters(prefixes, "nbcheck")
    here = arithmetic.cpu_vendor()
    REPORTS.mkdir(parents=True, exist_ok=True)
    failed, reports = [], []
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "checkpoints"
        shutil.copytree(checkpoint_files.CHECKPOINTS, snapshot)
        for nb in notebooks:
            try:
                report = REPORTS / f"notebooks-{nb.stem}.xml"
                report.unlink(missing_ok=True)  # never summarise or tag from an earlier run's report
                reports.append(report)
                result = subprocess.run(
                    [sys.executable, "-m", "pytest", "--nbval", str(nb.relative_to(REPO_ROOT)), "-q",
                     "-p", "no:cacheprovider", "--nbval-cell-timeout", str(CELL_TIMEOUT_S),
                     "--nbval-sanitize-with", str(SANITIZE.relative_to(REPO_ROOT)), f"--junitxml={report}"],
                    cwd=REPO_ROOT)
                if result.returncode != 0:
                    failed.append(f"{nb.stem} (pytest exit {result.returncode})")
                changed = checkpoint_files.changed_files(snapshot, checkpoint_files.CHECKPOINTS)
                made_on = arithmetic.read_stamp()  # the committed checkpoints are the whole batch's
                if changed and made_on in (None, here):
                    print(f"nbcheck: {nb.stem} wrote checkpoints that differ from the committed ones: {changed}. "
                          f"Re-execute it with the batch (python -m book_tools reproduce --only {nb.stem[:2]}) "
                          f"and commit the checkpoints with its outputs.", flush=True)
                    failed.append(f"{nb.stem} (checkpoints)")
                elif changed:
                    print(f"nbcheck: {nb.stem} wrote other checkpoints than the committed ones ({changed}), as "
                          f"expected on a {here} processor when the outputs were made on {made_on}; the next "
                          f"chapter starts from the committed ones.", flush=True)
            finally:  # the next chapter, and the working tree after the checks, start from the snapshot
                checkpoint_files.restore(snapshot)
    print(summarize_junit(reports))
    if failed:
        print(f"nbcheck: failed: {', '.join(failed)}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m book_tools.nbcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("prefixes", nargs="*", metavar="PREFIX", help="only the chapters whose name starts with PREFIX")
    return check(p.parse_args(argv).prefixes)


if __name__ == "__main__":
    raise SystemExit(main())
