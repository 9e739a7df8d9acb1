"""What the benchmark scripts share: summary statistics over seeds, and writing their JSON files."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
from pathlib import Path


def stats(values) -> dict:
    """Mean, sample standard deviation and the values themselves (None values are left out)."""
    values = [v for v in values if v is not None]
    return {"mean": round(statistics.mean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "values": values}


def write_json(path: Path, data) -> None:
    """`data` as indented JSON with a final newline, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the folder of `path` for a read-modify-write of it, so processes that
    update one record at the same time take turns instead of losing a write."""
    folder = os.open(Path(path).parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # closing the descriptor releases the lock


def provenance(pretrained) -> dict:
    """What a record was made from and on: the start checkpoint's SHA-256 (a file, or a list of files;
    chapters check it against what they load) and the processor (CPU numbers depend on it)."""
    from course_lib.checkpoints import file_sha256
    from book_tools.reproduce import cpu_model

    return {"pretrained_sha256": file_sha256(pretrained), "machine": f"{cpu_model() or 'unknown CPU'}, "
            f"{os.cpu_count()} cores"}
