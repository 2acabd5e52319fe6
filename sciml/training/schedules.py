"""Training schedules: weight averaging with warm-up, learning-rate warm-up with cosine decay, and the
two-stage loss weighting of MACE (a last stage with a higher energy weight and a lower learning rate)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LambdaLR


def ema_decay_at(decay: float, n_averaged: int) -> float:
    """Decay used for the update after ``n_averaged`` averaged steps: min(decay, (1 + n) / (10 + n)).

    The warm-up (as in NequIP and TensorFlow's ExponentialMovingAverage with ``num_updates``) lets the
    average follow the fast early changes: after 450 steps at decay 0.999 a constant-decay average still
    holds 64 % of the first step's weights, the warmed-up one about 1 %."""
    return min(decay, (1.0 + n_averaged) / (10.0 + n_averaged))


def warmup_ema(decay: float):
    """``multi_avg_fn`` for :class:`torch.optim.swa_utils.AveragedModel`: EMA with :func:`ema_decay_at`."""
    if not 0.0 < decay < 1.0:
        raise ValueError(f"ema_decay must be in (0, 1), got {decay}")

    @torch.no_grad()
    def update(averaged: list[torch.Tensor], current: list[torch.Tensor], n_averaged) -> None:
        beta = ema_decay_at(decay, int(n_averaged))
        for average, value in zip(averaged, current, strict=True):
            average.lerp_(value, 1.0 - beta)

    return update


class WarmupCosine(LambdaLR):
    """Linear warm-up from ``warmup_start`` x lr to lr over ``warmup_steps`` optimizer steps, then cosine
    decay to ``min_ratio`` x lr at ``total_steps`` (constant after). Stepped per optimizer step.

    ``total_steps=None`` is filled in by :class:`~sciml.training.PotentialModule` from the trainer's
    estimated number of steps (``max_epochs`` x batches), so configs need not know the dataset size.
    """

    interval = "step"

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: int = 100,
        total_steps: int | None = None,
        min_ratio: float = 0.01,
        warmup_start: float = 0.01,
    ) -> None:
        self.warmup_steps, self.total_steps = int(warmup_steps), total_steps
        self.min_ratio, self.warmup_start = float(min_ratio), float(warmup_start)
        super().__init__(optimizer, self.factor)

    def set_total_steps(self, total_steps: int) -> None:
        if self.total_steps is None:
            self.total_steps = int(total_steps)

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.warmup_start + (1.0 - self.warmup_start) * step / self.warmup_steps
        if self.total_steps is None:
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class StageTwo:
    """From ``start_epoch`` (or from ``start_fraction`` of ``trainer.max_epochs``) on: new loss weights and
    (optionally) a constant learning rate ``lr``, as MACE's last stage (``start_swa``: energy weight 1000,
    forces 100, lr 1e-3 -> swa_lr), which cuts energy errors several-fold at little cost in forces."""

    energy_weight: float
    force_weight: float
    start_epoch: int | None = None
    start_fraction: float | None = None
    stress_weight: float | None = None
    lr: float | None = None

    @classmethod
    def from_config(cls, config: dict | None) -> StageTwo | None:
        if config is None:
            return None
        allowed = set(cls.__dataclass_fields__)
        unknown = set(config) - allowed
        if unknown:
            raise ValueError(f"stage_two: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        missing = {"energy_weight", "force_weight"} - set(config)
        if missing:
            raise ValueError(f"stage_two needs {sorted(missing)}")
        if ("start_epoch" in config) == ("start_fraction" in config):
            raise ValueError(f"stage_two needs exactly one of start_epoch and start_fraction, got {config}")
        fraction = config.get("start_fraction")
        if fraction is not None and not 0.0 <= fraction <= 1.0:
            raise ValueError(f"stage_two.start_fraction must be in [0, 1], got {fraction}")
        return cls(**config)

    def first_epoch(self, max_epochs: int | None) -> int | None:
        """The epoch stage two starts at in a run of ``max_epochs`` epochs; ``None`` (never) for a fraction of a
        run without an epoch limit (``max_steps`` or ``max_time`` only)."""
        if self.start_epoch is not None:
            return self.start_epoch
        if max_epochs is None or max_epochs < 0:
            return None
        return int(self.start_fraction * max_epochs)


# The recipe's last stage (PotentialModule's default): MACE's stage-two weights over the last 20 % of epochs, on
# the same learning-rate schedule (a constant lr there was worse: benchmarks/results/accuracy_ablation_8_epochs.md)
STAGE_TWO_RECIPE: dict[str, float] = {"start_fraction": 0.8, "energy_weight": 1000.0, "force_weight": 100.0}
