"""Schedules: the learning rate's multiplier over a run."""

from __future__ import annotations

import math


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, min_ratio: float = 0.1) -> float:
    """Learning-rate multiplier: linear warm-up, then cosine decay to ``min_ratio``."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
