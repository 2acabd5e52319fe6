"""The training recipe: EMA with warm-up, warm-up + cosine learning rate, the second loss stage and float64
training, each through the real LightningCLI where it is configured."""

from __future__ import annotations

import math
import sys

import lightning as L
import pytest
import torch
from torch import nn

from sciml.cli import run
from sciml.training.schedules import StageTwo, WarmupCosine, ema_decay_at, warmup_ema
from tests.conftest import ROOT


class RecordLearningRate(L.Callback):
    """The learning rate of every optimizer step, with its epoch."""

    def __init__(self) -> None:
        self.rates: list[tuple[int, float]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.rates.append((trainer.current_epoch, optimizer.param_groups[0]["lr"]))


def test_ema_warms_up_then_uses_the_set_decay():
    assert ema_decay_at(0.999, 0) == pytest.approx(0.1)
    assert ema_decay_at(0.999, 90) == pytest.approx(0.91)
    assert ema_decay_at(0.999, 10**6) == 0.999
    model = nn.Linear(3, 1, bias=False)
    averaged = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=warmup_ema(0.99))
    expected, values = None, [torch.full((1, 3), float(k)) for k in range(1, 40)]
    for n, value in enumerate(values):
        with torch.no_grad():
            model.weight.copy_(value)
        averaged.update_parameters(model)
        if expected is None:  # the first update copies
            expected = value.clone()
        else:
            beta = min(0.99, (1 + n) / (10 + n))  # n values averaged before this one
            expected = beta * expected + (1 - beta) * value
    torch.testing.assert_close(averaged.module.weight, expected)
    # a constant decay would still weigh the first values: the warmed-up average is near the recent ones
    assert float(averaged.module.weight.detach()[0, 0]) > 25


def test_warmup_cosine_shape():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=2.0)
    schedule = WarmupCosine(optimizer, warmup_steps=10, total_steps=110, min_ratio=0.05, warmup_start=0.1)
    rates = []
    for _ in range(130):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[0] == pytest.approx(0.2) and rates[10] == pytest.approx(2.0)
    assert rates[60] == pytest.approx(2.0 * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * 0.5))))
    assert rates[110] == pytest.approx(0.1) and rates[129] == pytest.approx(0.1)
    assert all(a <= b for a, b in zip(rates[:10], rates[1:11], strict=True))
    assert all(a >= b for a, b in zip(rates[10:110], rates[11:111], strict=True))


def test_stage_two_config_is_checked():
    assert StageTwo.from_config(None) is None
    with pytest.raises(ValueError, match="unknown keys"):
        StageTwo.from_config({"start_epoch": 1, "energy_weight": 1.0, "force_weight": 1.0, "swa_lr": 1e-3})
    with pytest.raises(ValueError, match="force_weight"):
        StageTwo.from_config({"start_epoch": 1, "energy_weight": 1.0})
    weights = {"energy_weight": 1000.0, "force_weight": 100.0}
    with pytest.raises(ValueError, match="exactly one of start_epoch and start_fraction"):
        StageTwo.from_config({"start_epoch": 1, "start_fraction": 0.5, **weights})
    with pytest.raises(ValueError, match="exactly one of start_epoch and start_fraction"):
        StageTwo.from_config(weights)
    with pytest.raises(ValueError, match=r"start_fraction must be in \[0, 1\]"):
        StageTwo.from_config({"start_fraction": 1.5, **weights})
    assert StageTwo.from_config({"start_fraction": 0.8, **weights}).first_epoch(20) == 16
    assert StageTwo.from_config({"start_epoch": 3, **weights}).first_epoch(None) == 3
    assert StageTwo.from_config({"start_fraction": 0.8, **weights}).first_epoch(-1) is None  # no epoch limit


def test_recipe_through_the_cli_in_float64(monkeypatch, tmp_path):
    """Warm-up + cosine per step, AMSGrad, EMA, float64 weights and batches, and the second stage switching
    loss weights and learning rate at its epoch."""
    monkeypatch.setattr(sys, "argv", ["sciml"])
    monkeypatch.chdir(ROOT)
    cli = run(
        [
            "fit",
            "--config",
            "configs/e2former/quickstart.yaml",
            f"--trainer.default_root_dir={tmp_path}",
            "--trainer.max_epochs=2",
            "--trainer.limit_train_batches=3",
            "--trainer.limit_val_batches=1",
            "--trainer.enable_progress_bar=false",
            "--trainer.logger=false",
            "--trainer.callbacks+=tests.training.test_schedules.RecordLearningRate",
            "--trainer.precision=64-true",
            "--data.init_args.dtype=float64",
            "--model.init_args.ema_decay=0.999",
            "--model.init_args.optimizer.init_args.amsgrad=true",
            "--model.init_args.scheduler=sciml.training.schedules.WarmupCosine",
            "--model.init_args.scheduler.init_args.warmup_steps=2",
            "--model.init_args.stage_two={start_epoch: 1, energy_weight: 1000.0, force_weight: 5.0, lr: 1.0e-4}",
        ]
    )
    module = cli.model
    assert cli.trainer.global_step == 6
    assert next(module.model.parameters()).dtype == torch.float64
    assert next(module.ema.module.parameters()).dtype == torch.float64
    assert next(iter(cli.datamodule.train_dataloader())).pos.dtype == torch.float64
    assert module.weights["energy"] == 1000.0 and module.weights["forces"] == 5.0
    rates = next(c for c in cli.trainer.callbacks if isinstance(c, RecordLearningRate)).rates
    assert [epoch for epoch, _ in rates] == [0, 0, 0, 1, 1, 1]
    assert rates[0][1] < rates[1][1] < rates[2][1]  # warm-up over 2 steps (of lr 0.003), then cosine
    assert [lr for _, lr in rates[3:]] == pytest.approx([1e-4] * 3)  # stage two: constant lr
    assert cli.trainer.optimizers[0].param_groups[0]["amsgrad"] is True
    schedule = cli.trainer.lr_scheduler_configs[0]
    assert isinstance(schedule.scheduler, WarmupCosine) and schedule.interval == "step"
    assert schedule.scheduler.total_steps == 6  # filled in from the trainer
    assert all(torch.isfinite(v) for v in cli.trainer.callback_metrics.values())


def test_a_run_under_max_time_shortens_its_plan_and_its_cosine_to_the_epochs_that_fit():
    """FitScheduleToTime: 3 epochs in 28.5 s of a 60 s budget leave room for 3 more, so a plan of 20 epochs
    becomes 6 and the cosine's length 6 x 10 steps; a plan that fits, or a run without max_time, is untouched."""
    import time
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import Timer
    from lightning.pytorch.trainer.states import RunningStage

    from sciml.training.callbacks import FitScheduleToTime

    class StubTrainer(SimpleNamespace):
        @property
        def estimated_stepping_batches(self) -> int:  # as Lightning's, for a finite epoch limit
            return math.ceil(self.num_training_batches / self.accumulate_grad_batches) * self.fit_loop.max_epochs

    def trainer_after(epochs: int, seconds: float, planned: int, duration: float | None):
        timer = Timer(duration=None if duration is None else {"seconds": duration})
        timer._start_time[RunningStage.TRAINING] = time.monotonic() - seconds
        optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
        schedule = WarmupCosine(optimizer, warmup_steps=5, total_steps=planned * 10)
        return StubTrainer(
            callbacks=[timer],
            fit_loop=SimpleNamespace(max_epochs=planned),
            current_epoch=epochs - 1,
            num_training_batches=10,
            accumulate_grad_batches=1,
            lr_scheduler_configs=[SimpleNamespace(scheduler=schedule)],
        )

    trainer = trainer_after(epochs=3, seconds=28.5, planned=20, duration=60.0)
    FitScheduleToTime().on_train_epoch_end(trainer, None)
    assert trainer.fit_loop.max_epochs == 6 and trainer.lr_scheduler_configs[0].scheduler.total_steps == 60
    assert trainer.lr_scheduler_configs[0].scheduler.factor(60) == pytest.approx(0.01)  # the floor at the new end
    for planned, duration in ((5, 60.0), (20, None)):  # fits already / no max_time
        trainer = trainer_after(epochs=3, seconds=30.0, planned=planned, duration=duration)
        FitScheduleToTime().on_train_epoch_end(trainer, None)
        assert trainer.fit_loop.max_epochs == planned
        assert trainer.lr_scheduler_configs[0].scheduler.total_steps == planned * 10
