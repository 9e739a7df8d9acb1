"""Checkpoints that carry everything needed to use the weights again (chapter 4).

A checkpoint is one file holding

    format_version   so an old file is recognised, not misread
    model_class      "GRUPolicy"
    config           the GRUConfig the weights were made for (sizes are never guessed)
    state_dict       the weights
    tokenizer        the vocabulary: id k means the same character when loaded
    tokenizer_fingerprint
    extra            anything JSON-like: training settings, results

The character-level PPO work log saved weights without their sizes and guessed them back from tensor
shapes (renaming head -> policy_head along the way), and loaded a checkpoint
trained on another dataset's vocabulary. Here both are errors that say what
differs and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.runs import CheckpointMismatchError
from course_lib.tokenizers import BPETokenizer, CharTokenizer

FORMAT_VERSION = 1


class CheckpointFormatError(ValueError):
    """The file is not a checkpoint written by `save_checkpoint` (of a version this code reads)."""


def save_checkpoint(path, model: GRUPolicy, tokenizer, *, extra: dict | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({
        "format_version": FORMAT_VERSION,
        "model_class": type(model).__name__,
        "config": model.config.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "tokenizer": tokenizer.to_dict(),
        "tokenizer_fingerprint": tokenizer.fingerprint(),
        "extra": extra or {},
    }, path)


def load_checkpoint(path, *, tokenizer=None, model: GRUPolicy | None = None, map_location="cpu"):
    """-> (model, tokenizer, extra).

    tokenizer: if given, it must be the checkpoint's own (same vocabulary), else
        CheckpointMismatchError; if None, the checkpoint's tokenizer is returned.
    model: if given, the weights are loaded into it and its config must equal the
        saved one; if None, a model is built from the saved config.
    """
    ckpt = _read(path, map_location)
    saved_tokenizer = _tokenizer_from_dict(ckpt["tokenizer"])
    if tokenizer is not None:
        check_same_vocabulary(saved_tokenizer, tokenizer, where=str(path))
    config = GRUConfig(**ckpt["config"])
    if model is None:
        model = GRUPolicy(config)
    elif model.config != config:
        raise CheckpointMismatchError(
            f"{path}: the model you passed has another configuration than the checkpoint: "
            f"{_config_diff(config, model.config)}. Fix: build the model from the checkpoint "
            "(load_checkpoint(path) without model=) or use a checkpoint trained with your configuration.")
    _check_state_dict(ckpt["state_dict"], model, str(path))
    model.load_state_dict(ckpt["state_dict"])
    return model, saved_tokenizer if tokenizer is None else tokenizer, ckpt["extra"]


def check_same_vocabulary(saved, given, where: str = "the checkpoint") -> None:
    """Raise CheckpointMismatchError, saying what differs, unless both tokenizers map ids to the same tokens."""
    if saved.fingerprint() == given.fingerprint() and list(saved.vocab) == list(given.vocab):
        return
    a, b = list(saved.vocab), list(given.vocab)
    lines = [f"{where} was trained with another vocabulary than the tokenizer you passed:",
             f"  checkpoint: {len(a)} tokens, fingerprint {saved.fingerprint()}",
             f"  yours:      {len(b)} tokens, fingerprint {given.fingerprint()}"]
    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
    if first is not None:
        lines.append(f"  first different id: {first} is {a[first]!r} in the checkpoint but {b[first]!r} in yours, "
                     f"so every id from {first} on would mean another character")
    only_saved, only_given = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_saved:
        lines.append(f"  only in the checkpoint: {''.join(only_saved)[:40]!r}")
    if only_given:
        lines.append(f"  only in yours: {''.join(only_given)[:40]!r}")
    lines.append("Fix: use the tokenizer stored in the checkpoint (load_checkpoint(path) returns it), "
                 "or pretrain a new model with your tokenizer.")
    raise CheckpointMismatchError("\n".join(lines))


# -----------------------------------------------------------------------------
# plumbing

def _read(path, map_location) -> dict:
    if isinstance(path, (str, os.PathLike)) and Path(path).is_dir():
        raise _not_a_checkpoint(path, "it is a folder")
    if isinstance(path, (str, os.PathLike)) and Path(path).is_file() and Path(path).stat().st_size == 0:
        raise _not_a_checkpoint(path, "the file is empty")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)  # data only, no code
    except Exception as e:  # noqa: BLE001 - any unreadable file gets the same explanation
        raise _not_a_checkpoint(path, _what_it_is(path, e)) from None
    if not isinstance(ckpt, dict):
        raise _not_a_checkpoint(path, f"torch.load reads a {type(ckpt).__name__} from it, not a dict")
    required = ("format_version", "model_class", "config", "state_dict", "tokenizer")
    missing = [k for k in required if k not in ckpt]
    if missing:
        raise CheckpointFormatError(
            f"{path} is not a course checkpoint: missing {missing}. A bare state_dict has no config or "
            "vocabulary, and guessing them from tensor shapes is how the character-level PPO work log went wrong; "
            "save with course_lib.gru.checkpoints.save_checkpoint.")
    if ckpt["format_version"] != FORMAT_VERSION:
        raise CheckpointFormatError(f"{path}: format_version {ckpt['format_version']!r}; this course_lib "
                                    f"reads version {FORMAT_VERSION}")
    if ckpt["model_class"] != GRUPolicy.__name__:
        raise CheckpointFormatError(f"{path} holds a {ckpt['model_class']}, not a {GRUPolicy.__name__}")
    return ckpt


def _not_a_checkpoint(path, why: str) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{path} is not a course checkpoint ({why}): expected a file written by "
        "course_lib.gru.checkpoints.save_checkpoint, such as the policy.pt that `python -m course_lib ppo` "
        "writes into its --out folder")


def _what_it_is(path, error: Exception) -> str:
    """Why torch.load failed, in words: the file's first bytes say what it is rather than torch's unpickler."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except (OSError, TypeError):  # not a path (a file object), or unreadable
        return f"torch.load could not read it: {error}"
    said = (str(error).strip().splitlines() or [type(error).__name__])[0].split(". ")[0][:160]  # its first sentence
    if head.startswith(b"PK\x03\x04"):  # torch.save's zip format, damaged or holding more than data
        return f"a zip file that torch.load cannot read as tensors and plain data: {said}"
    if head.startswith(b"\x80"):  # a pickle: torch.save's old format, or pickle.dump's
        return "a pickle that holds more than tensors and plain data, which the course never loads"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"a binary file whose first bytes ({head[:8].hex(' ')}) are not those of torch.save's format"
    first = text.strip().splitlines()[0][:60] if text.strip() else ""
    return f"a text file, beginning {first!r}" if first else "a text file of blank lines"


def _tokenizer_from_dict(data: dict):
    kinds = {"char": CharTokenizer, "bpe": BPETokenizer}
    if data.get("type") not in kinds:
        raise CheckpointFormatError(f"unknown tokenizer type {data.get('type')!r} in checkpoint")
    return kinds[data["type"]].from_dict(data, "the checkpoint's tokenizer")


def _config_diff(saved: GRUConfig, given: GRUConfig) -> str:
    a, b = saved.to_dict(), given.to_dict()
    return ", ".join(f"{k} is {a[k]} in the checkpoint but {b.get(k)} in yours" for k in a if a[k] != b.get(k))


def _check_state_dict(state: dict, model: GRUPolicy, where: str) -> None:
    """Every weight the model needs is there, with the shape the config says: no renaming, no guessing."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    problems = [f"missing {k} {expected[k]}" for k in expected if k not in got]
    problems += [f"unexpected {k} {got[k]}" for k in got if k not in expected]
    problems += [f"{k} has shape {got[k]}, the config needs {expected[k]}"
                 for k in expected if k in got and got[k] != expected[k]]
    if problems:
        raise CheckpointMismatchError(
            f"{where}: its weights do not fit its own config {model.config}: " + "; ".join(problems[:6])
            + ". The file was changed or written by other code; retrain and save with save_checkpoint.")


# -----------------------------------------------------------------------------
# the state of a run in progress, for resuming it (the GRU's trainer and the language model's)


