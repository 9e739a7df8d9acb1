"""Files a run leaves and reads back, for either policy: its resumable state, and which files a record was
made from.

    save_run_state           torch.save to a temporary file, then an atomic rename
    check_same_settings      a run resumes only with the settings that wrote its state
    file_sha256              a file's (or a list of files') SHA-256
    check_record_made_from   whether a benchmark record was made from the checkpoint on disk
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import torch


class CheckpointMismatchError(ValueError):
    """The checkpoint does not fit the tokenizer, config or model it is being loaded with."""


def file_sha256(path) -> str:
    """The SHA-256 of a file's bytes: which checkpoint a record was made from.

    Several files (a model and its adapter, say) in a list: the SHA-256 of their SHA-256s, in order.
    """
    if isinstance(path, (str, os.PathLike)):
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return hashlib.sha256("".join(file_sha256(p) for p in path).encode()).hexdigest()


def _names(files) -> str:
    return Path(files).name if isinstance(files, (str, os.PathLike)) else " + ".join(Path(f).name for f in files)


def check_record_made_from(record: dict, checkpoint, *, record_name: str, remake: str,
                           strict: bool = True) -> bool:
    """Whether a benchmark record was made from `checkpoint` (a file, or a list of files) as it is on
    disk (by its SHA-256, file_sha256).

    A chapter that plots runs made from chapter 4's checkpoint must plot runs of *that* checkpoint;
    re-made (chapter 4 re-executed on another processor, say), it starts every run elsewhere.
    `record["pretrained_sha256"]` is written by the benchmark script; `remake` is its command.
    strict: raise CheckpointMismatchError on a mismatch (the tests); otherwise warn and return False
    (a reader who re-made the checkpoint can still read the chapter, told what the record is).
    """
    made_from, here = record.get("pretrained_sha256"), file_sha256(checkpoint)
    if made_from == here:
        return True
    message = (f"{record_name} was made from {'an unrecorded checkpoint' if made_from is None else made_from[:12]}, "
               f"not from {_names(checkpoint)} as it is now ({here[:12]}): its runs started from another "
               f"model. Re-make it with `{remake}` (or `python -m book_tools reproduce --rerun-runs`).")
    if strict:
        raise CheckpointMismatchError(message)
    warnings.warn(message, stacklevel=2)
    return False


def save_run_state(state: dict, path) -> None:
    """torch.save to a temporary file, then an atomic rename: a crash mid-write leaves the previous state."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def check_same_settings(saved: dict, now: dict, path, *, error=ValueError,
                        fix: str = "Resume with the same settings, or start a new run.", may_change=()) -> None:
    """A run resumes only with the settings that wrote its state; the error names every one that changed.
    may_change: settings that leave the run's results alone (how much memory it uses), free to differ."""
    changed = {k: (saved.get(k), v) for k, v in now.items() if saved.get(k) != v and k not in may_change}
    if changed:
        raise error(f"{path} was written by a run with other settings: "
                    + ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in changed.items()) + f". {fix}")
