"""The test command's notebook checks: every chapter re-executed by nbval, its outputs compared
with the committed ones.

Each chapter starts from the checkpoints committed in notebooks/checkpoints, as a reader who
opens that chapter does: what a chapter writes there (chapter 4's GRU, chapter 9's tiny coder)
is put back before the next chapter runs, so a chapter is compared with the outputs the batch
computed from those same files. On a processor of the vendor the outputs were made on
(book_tools.arithmetic), what a chapter writes must also equal the committed files, tensor for
tensor: the batch that made them would write them again.

    python -m book_tools.nbcheck [PREFIX ...]    # all chapters, or those whose name starts with PREFIX
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from book_tools import NOTEBOOKS_DIR, REPO_ROOT, arithmetic
from book_tools.reproduce import select_chapters, summarize_junit

CHECKPOINTS = NOTEBOOKS_DIR / "checkpoints"
REPORTS = REPO_ROOT / "_build" / "test-reports"
SANITIZE = NOTEBOOKS_DIR / "nbval_sanitize.cfg"


def _same_content(a: Path, b: Path) -> bool:
    """Whether two checkpoint files hold the same numbers (the bytes of a pickle may differ alone)."""
    if a.read_bytes() == b.read_bytes():
        return True
    if a.suffix == ".json":
        return json.loads(a.read_text()) == json.loads(b.read_text())
    if a.suffix not in (".pt", ".safetensors"):
        return False
    import torch

    if a.suffix == ".pt":  # the course's own checkpoints (trusted files, not downloads)
        x, y = torch.load(a, map_location="cpu", weights_only=False), torch.load(b, map_location="cpu", weights_only=False)
    else:
        from safetensors.torch import load_file

        x, y = load_file(a), load_file(b)
    return _equal(x, y)


def _equal(x, y) -> bool:
    import torch

    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dtype == y.dtype
                and x.shape == y.shape and torch.equal(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_equal(u, v) for u, v in zip(x, y))
    return x == y


def changed_files(before: Path, after: Path) -> list[str]:
    """Files under `after` that are new, gone or hold other numbers than under `before`."""
    names = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names |= {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    return sorted(str(n) for n in names
                  if not ((before / n).is_file() and (after / n).is_file() and _same_content(before / n, after / n)))


def _restore(snapshot: Path) -> None:
    shutil.rmtree(CHECKPOINTS, ignore_errors=True)
    shutil.copytree(snapshot, CHECKPOINTS)


def check(prefixes: list[str] | None = None) -> int:
    from book_tools.batch_engine import CELL_TIMEOUT_S

    notebooks = select_chapters(prefixes, "nbcheck")
    made_on, here = arithmetic.read_stamp(), arithmetic.cpu_vendor()
    REPORTS.mkdir(parents=True, exist_ok=True)
    failed, reports = [], []
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "checkpoints"
        shutil.copytree(CHECKPOINTS, snapshot)
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
                changed = changed_files(snapshot, CHECKPOINTS)
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
                _restore(snapshot)
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
