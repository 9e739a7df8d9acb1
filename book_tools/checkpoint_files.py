"""The chapters' checkpoints (notebooks/checkpoints): whether a chapter wrote other ones than those committed.

Chapter 4 writes the GRU and chapter 9 the tiny coder; the chapters after them read those files. The test
command (book_tools.nbcheck) and a chapter re-executed alone on another processor vendor
(book_tools.reproduce) both compare the files a chapter leaves with the committed ones, by their numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from book_tools import NOTEBOOKS_DIR

CHECKPOINTS = NOTEBOOKS_DIR / "checkpoints"


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


def restore(snapshot: Path) -> None:
    """Put the checkpoints (CHECKPOINTS) back as `snapshot` holds them."""
    shutil.rmtree(CHECKPOINTS, ignore_errors=True)
    shutil.copytree(snapshot, CHECKPOINTS)
