"""The policy a PPO run starts from (chapter 4's): a course checkpoint, or one pretrained by the run itself.

`starting_policy` gives `course_lib.gru.trainer.PPOTrainer` its start: --pretrained's checkpoint, or a
policy pretrained on the run's settings and saved as OUT/pretrained.pt. `start_policy` reads that start
back, for the final evaluation's baseline.
"""

from __future__ import annotations

import time
from pathlib import Path

from course_lib.config import ConfigError
from course_lib.corpus import pretraining_texts
from course_lib.gru.checkpoints import load_checkpoint, save_checkpoint
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.gru.ppo_config import PPOConfig
from course_lib.gru.pretrain import pretrain
from course_lib.runs import CheckpointMismatchError

PRETRAINED_FILE = "pretrained.pt"    # the starting point, a course checkpoint


def starting_policy(config: PPOConfig, tokenizer, tasks, alphabet, *, device: str = "cpu", out: Path | None = None,
                    progress: bool = True) -> tuple[GRUPolicy, float]:
    """(the start, the seconds pretraining took: 0 when loaded).

    With config.pretrained: that checkpoint, whose sizes must be any the settings give. Without: a policy
    pretrained on config.pretrain_regime's texts of `tasks`, saved as out/pretrained.pt when out is given.
    """
    c = config
    if c.pretrained:
        if not Path(c.pretrained).exists():
            raise ConfigError(f"pretrained checkpoint {c.pretrained} does not exist; omit --pretrained "
                              "to pretrain from scratch, or run chapter 4's notebook to create it")
        model, _, _ = load_checkpoint(c.pretrained, tokenizer=tokenizer)
        for name in ("hidden_dim", "embed_dim"):
            wanted, saved = getattr(c, name), getattr(model.config, name)
            if wanted is not None and wanted != saved:
                raise CheckpointMismatchError(
                    f"{c.pretrained} has {name}={saved} but the settings ask for {name}={wanted}; drop "
                    f"--{name.replace('_', '-')} (the checkpoint decides) or pretrain a new model without --pretrained")
        return model, 0.0
    start = time.perf_counter()
    model = GRUPolicy(GRUConfig(len(tokenizer), embed_dim=c.embed_dim or 64, hidden_dim=c.hidden_dim or 256)).to(device)
    examples = pretraining_texts(c.pretrain_regime, tasks=tasks, tokenizer=tokenizer)
    pretrain(model, tokenizer, examples, epochs=c.pretrain_epochs, lr=c.pretrain_lr,
             batch_size=c.pretrain_batch_size, seed=c.seed, progress=progress)
    seconds = time.perf_counter() - start
    if out is not None:
        save_checkpoint(out / PRETRAINED_FILE, model, tokenizer,
                        extra={"alphabet": alphabet.tolist(), "pretrain_seconds": seconds, "config": c.to_dict()})
    return model, seconds


def start_policy(config: PPOConfig, tokenizer, out: Path | None = None) -> GRUPolicy:
    """The start `starting_policy` gave the run: --pretrained's checkpoint, or out/pretrained.pt."""
    if config.pretrained:
        return load_checkpoint(config.pretrained, tokenizer=tokenizer)[0]
    if out is not None and (out / PRETRAINED_FILE).exists():
        return load_checkpoint(out / PRETRAINED_FILE, tokenizer=tokenizer)[0]
    raise ConfigError("the pretrained start is not available (no --pretrained and no out dir)")
