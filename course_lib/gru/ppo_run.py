"""A PPO run folder (`python -m course_lib ppo` and `eval --checkpoint`): the whole run (pretrain or load,
PPO, evaluate), resuming it from its newest readable state, evaluating any course checkpoint, and
reading its metrics.jsonl. The trainer itself is `course_lib.gru.trainer.PPOTrainer`.

    OUT/config.json  metrics.jsonl  train_state.pt  checkpoints/  pretrained.pt  policy.pt  eval.json  training.png
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from course_lib.config import ConfigError, device_label
from course_lib.gru.checkpoints import load_checkpoint
from course_lib.gru.env import action_alphabet
from course_lib.gru.ppo_config import PPOConfig
from course_lib.gru.pretrain import evaluate_policy
from course_lib.gru.start import PRETRAINED_FILE, start_policy
from course_lib.gru.trainer import CHECKPOINT_DIR, EVAL_FILE, METRICS_FILE, PLOT_FILE, PPOTrainer, STATE_FILE
from course_lib.plots import plot_training
from course_lib.runs import CheckpointMismatchError
from course_lib.tasks import TaskFormatError, load_tasks
from course_lib.tokenizers import UnknownCharacterError, course_tokenizer

def run(config: PPOConfig, out_dir, *, resume: bool = False, stop_after: int | None = None,
        progress: bool = True, log=print, device: str = "cpu") -> dict | None:
    """`python -m course_lib ppo`: train into out_dir and write eval.json; returns eval.json's content.

    resume: continue from the latest saved state (`latest_state`; same settings required).
    stop_after: stop (with the state saved) once this many updates are done, as if interrupted.
    device: where the network runs (`PPOTrainer`); eval.json names it.
    Returns None when stopped before the last update.
    """
    out = Path(out_dir)
    state_path = out / STATE_FILE
    if resume:
        state_path = latest_state(out)
        if state_path is None:
            raise ConfigError(f"--resume: neither {out / STATE_FILE} nor {out / CHECKPOINT_DIR}/update_*.pt exists "
                              "(or none is readable); nothing to resume (drop --resume to start)")
        log(f"resuming from {state_path}")
        tokenizer = course_tokenizer()
        start = config.pretrained or out / PRETRAINED_FILE
        model, _, _ = load_checkpoint(start, tokenizer=tokenizer)
        trainer = PPOTrainer(config, out, model=model, tokenizer=tokenizer, progress=progress, log=log,
                             device=device)
        trainer.load_state(state_path)  # refuses, listing the differences, if the settings changed
    else:
        if (out / METRICS_FILE).exists() or state_path.exists():
            raise ConfigError(f"{out} already holds a run (metrics.jsonl or train_state.pt); pass --resume to "
                              "continue it, or choose another --out")
        out.mkdir(parents=True, exist_ok=True)
        trainer = PPOTrainer(config, out, progress=progress, log=log, device=device)
    trainer.train(stop_after=stop_after)
    if trainer.update < config.updates:
        log(f"stopped after {trainer.update} of {config.updates} updates; continue with --resume")
        return None
    trainer.save_policy()
    result = evaluate_run(trainer)
    (out / EVAL_FILE).write_text(json.dumps(result, indent=1) + "\n")
    if config.plots:
        plot_training(trainer.metrics, out / PLOT_FILE, title=f"PPO run {out.name} (seed {config.seed})")
    return result


def evaluate_run(trainer: PPOTrainer) -> dict:
    """eval.json: greedy pass@1 of the trained policy and of the pretrained start, on every split."""
    c = trainer.config
    result = evaluate_policy(trainer.model, trainer.tokenizer, trainer.tasks, allowed_ids=trainer.alphabet,
                             max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
    start = start_policy(c, trainer.tokenizer, trainer.out).to(trainer.device)
    baseline = evaluate_policy(start, trainer.tokenizer, trainer.tasks, allowed_ids=trainer.alphabet,
                               max_new_tokens=c.max_new_tokens, timeout=c.sandbox_timeout)
    return {**{k: v for k, v in result.items() if k != "per_task"},
            "updates": trainer.update, "seed": c.seed, "device": device_label(trainer.device),
            "pretrain_seconds": round(trainer.pretrain_seconds, 1), "wall_seconds": round(trainer.wall(), 1),
            "baseline": baseline, "per_task": result["per_task"]}


def latest_state(out_dir) -> Path | None:
    """The newest readable saved state of a run: train_state.pt, else the newest checkpoints/update_NNNN.pt."""
    out = Path(out_dir)
    candidates = [out / STATE_FILE] + sorted((out / CHECKPOINT_DIR).glob("update_*.pt"), reverse=True)
    for path in candidates:
        if not path.exists():
            continue
        try:
            torch.load(path, map_location="cpu", weights_only=False)
        except Exception:  # a truncated or corrupt file: fall back to the previous save
            continue
        return path
    return None


def evaluate_checkpoint(path, tasks_dir=None, max_new_tokens: int | None = None, fields=None, log=print) -> dict:
    """`python -m course_lib eval`: greedy pass@1 of any course checkpoint on the course's splits
    or on the tasks of another folder or file.

    Without tasks_dir, the checkpoint's vocabulary must cover every prompt of the course's tasks (else it
    is from another vocabulary: an error). A task of tasks_dir whose prompt holds a character the
    vocabulary lacks cannot be read, so it fails: it stays in greedy pass@1, with status "unreadable"
    and the reason, and `log` names it. Tasks none of which can be read are an error."""

    model, tokenizer, extra = load_checkpoint(path)
    tasks = load_tasks(tasks_dir=tasks_dir, fields=fields)
    if not tasks:
        raise TaskFormatError(f"no tasks in {tasks_dir or 'the course task folder'}")
    unreadable = {}
    for t in tasks:
        try:
            tokenizer.encode(t.prompt)
        except UnknownCharacterError as e:
            unreadable[t.id] = f"{e} ({t.source})"
    if unreadable and (tasks_dir is None or len(unreadable) == len(tasks)):
        first = next(iter(unreadable))
        raise CheckpointMismatchError(f"{path} cannot read {len(unreadable)} of the {len(tasks)} tasks, "
                                      f"e.g. task {first!r}: {unreadable[first]}")
    if unreadable:
        log(f"warning: {path} cannot read {len(unreadable)} of {len(tasks)} tasks ({', '.join(unreadable)}): "
            "a character of the prompt is not in its vocabulary; they count as failed (status 'unreadable')")
    alphabet = extra.get("alphabet")
    if alphabet is None:  # a chapter-4 checkpoint: the course's alphabet
        alphabet = action_alphabet(load_tasks("train"), tokenizer).tolist()
    max_new = max_new_tokens or extra.get("max_new_tokens", 160)
    result = evaluate_policy(model, tokenizer, tasks, allowed_ids=alphabet, max_new_tokens=max_new,
                             skip=unreadable)
    return {"checkpoint": str(path), "tasks_dir": str(tasks_dir) if tasks_dir else None, **result}


def read_metrics(path) -> list[dict]:
    """The lines of a metrics.jsonl (a run folder or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
