"""Training of one active-learning round: an E2Former (committee or single model with the last-layer
uncertainty) on every frame labelled so far, continued from the previous round's weights.

The frames are dealt at random into training and validation (``validation_fraction``, reseeded each round);
the validation split calibrates the uncertainty after training (:mod:`sciml.uncertainty.fitting`): the LLPR
fit, or a committee's two scales. A committee's members train one after the other, each on its own and with
its own order of the training batches (DP-GEN's independent trainings), not jointly on the same batches as a
``sciml fit`` of :class:`~sciml.uncertainty.Committee` does; with ``committee_data="bootstrap"`` each member trains
on its own bootstrap resample of the training split (bagging). The result is a model checkpoint (spec and EMA weights)
that :class:`~sciml.calculators.SciMLCalculator` loads with its uncertainty.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path

import lightning as L
import torch
from ase import Atoms

from sciml.calculators.checkpoint import load_model
from sciml.data import AtomsDataModule
from sciml.data.readers import Trajectory
from sciml.models import E2Former
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.training import PotentialModule
from sciml.training.callbacks import FitScheduleToTime
from sciml.training.potential_module import RECIPE_GRADIENT_CLIP, recipe_optimizer, recipe_scheduler
from sciml.uncertainty import Committee
from sciml.uncertainty.fitting import calibrate_committee, fit_last_layer_uncertainty
from sciml.uncertainty.last_layer import LastLayerUncertainty, check_force_uncertainty

UNCERTAINTIES = ("committee", "last-layer")
COMMITTEE_DATA = ("shared", "bootstrap")
MEMBER_SHUFFLE_STRIDE = 100_003  # committee member m sees its batches in the orders of seed + m * this + epoch


@dataclass
class TrainingSettings:
    """``preset``: the E2Former size (:meth:`~sciml.models.E2Former.preset`); ``uncertainty``: ``"last-layer"``
    (one model, LLPR: the default, an MD step costs one model) or ``"committee"`` (``committee_size`` members,
    each step costs all of them); ``epochs`` for the first round, ``epochs_per_round`` after it (continuing
    from the previous weights), ``final_epochs`` for the final model on everything labelled (200, measured
    against 100 in ``docs/benchmarks/earlier.md``); ``cutoff`` in Å;
    ``density_components``: the last-layer force uncertainty from the distance of each atom's features to the
    training atoms' under that many mixture components per element (None, the default: 8, or none with
    ``force_samples``; 0: the energy rigidity); ``force_samples``: instead, from that many posterior samples of the
    last layer (:class:`~sciml.uncertainty.LastLayerUncertainty`); ``learning_rate``: the recipe's peak learning rate
    for these short trainings (a round is a few thousand steps or fewer: 5e-3, measured against the long runs'
    1e-2 in ``docs/benchmarks/earlier.md``); ``committee_data``: what a committee's members train on, ``"shared"``
    (every training frame, each member from its own initialisation and in its own batch order) or
    ``"bootstrap"`` (each member on its own bootstrap resample of the training frames, bagging)."""

    preset: str = "small"
    uncertainty: str = "last-layer"
    committee_size: int = 4
    cutoff: float = 5.0
    epochs: int = 60
    epochs_per_round: int = 30
    final_epochs: int = 200
    batch_size: int = 8
    validation_fraction: float = 0.15
    seed: int = 0
    force_samples: int = 0
    density_components: int | None = None
    learning_rate: float = 5e-3
    committee_data: str = "shared"

    def __post_init__(self) -> None:
        if self.uncertainty not in UNCERTAINTIES:
            raise ValueError(f"uncertainty must be one of {UNCERTAINTIES}, got '{self.uncertainty}'")
        if self.committee_data not in COMMITTEE_DATA:
            raise ValueError(f"committee_data must be one of {COMMITTEE_DATA}, got '{self.committee_data}'")
        if self.uncertainty == "committee" and self.committee_size < 2:
            raise ValueError(f"a committee needs at least 2 members, got committee_size={self.committee_size}")
        if not 0 < self.validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in (0, 1), got {self.validation_fraction}")
        check_force_uncertainty(self.force_samples, self.density_components)
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")


def train_energy_model(
    model: torch.nn.Module,
    data: AtomsDataModule,
    settings: TrainingSettings,
    epochs: int,
    directory: Path,
    max_seconds: float | None = None,
) -> PotentialModule:
    """Train ``model`` (an energy model) for ``epochs`` on ``data`` with the recipe at ``settings.learning_rate``
    (its gradient clip too, :data:`~sciml.training.potential_module.RECIPE_GRADIENT_CLIP`);
    returns the :class:`~sciml.training.PotentialModule` (its ``evaluation_model``: the EMA weights).
    ``max_seconds``: fewer epochs if they would take longer, the schedule fitted to them
    (:class:`~sciml.training.callbacks.FitScheduleToTime`)."""
    module = PotentialModule(model, optimizer=partial(recipe_optimizer, lr=settings.learning_rate),
                             scheduler=recipe_scheduler)  # fmt: skip
    timed = max_seconds is not None
    trainer = L.Trainer(
        max_epochs=epochs, max_time=timedelta(seconds=max_seconds) if timed else None,
        callbacks=[FitScheduleToTime()] if timed else None, gradient_clip_val=RECIPE_GRADIENT_CLIP,
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=str(directory), num_sanity_val_steps=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        warnings.filterwarnings("ignore", ".*Total length of .* across ranks is zero.*")
        trainer.fit(module, datamodule=data)
    return module


def round_data(frames: str | Path | Sequence[Atoms], settings: TrainingSettings, round: int) -> AtomsDataModule:
    """The data module of one round: ``frames`` (labelled frames in memory, or an extxyz file of them) split at
    random into training and validation (``settings.validation_fraction``) with the round's seed, as
    :func:`train_round` trains on it."""
    validation = settings.validation_fraction
    given = str(frames) if isinstance(frames, str | Path) else Trajectory("labelled frames", list(frames))
    return AtomsDataModule(
        paths=given, cutoff=settings.cutoff, split=(1 - validation, validation, 0.0), split_mode="random",
        seed=settings.seed + round, batch_size=settings.batch_size,
    )  # fmt: skip


def train_round(
    frames: str | Path | Sequence[Atoms],
    directory: str | Path,
    settings: TrainingSettings,
    round: int,
    previous: Path | torch.nn.Module | None = None,
    epochs: int | None = None,
    max_seconds: float | None = None,
) -> Path:
    """Train on the labelled ``frames`` (in memory, or an extxyz file) and write ``<directory>/model.ckpt``;
    returns its path. ``previous``: the last round's model (or its checkpoint), which the training continues on
    a copy (its energy scale and mean
    neighbour count stay those of the first round; the energy reference is re-levelled at every validation).
    ``epochs``: default ``settings.epochs`` without ``previous``, ``settings.epochs_per_round`` with it.
    ``max_seconds``: the training's time, at most (a committee's members share it); fewer epochs if they would
    take longer."""
    directory = Path(directory)
    data = round_data(frames, settings, round)
    L.seed_everything(settings.seed + round, verbose=False)
    if previous is None:
        member = E2Former.preset(settings.preset, **data.linked_values(E2Former))
        model = Committee(member, settings.committee_size) if settings.uncertainty == "committee" else member
    else:  # the previous round's model, whose normalisation (energy scale, neighbours) stays that of round 1
        model = copy.deepcopy(previous) if isinstance(previous, torch.nn.Module) else load_model(previous)
        model.train()
        model = model.model if isinstance(model, LastLayerUncertainty) else model
    epochs = epochs or (settings.epochs if previous is None else settings.epochs_per_round)
    if isinstance(model, Committee):  # each member on its own, in its own batch order, then the two scales
        data.bootstrap_training = settings.committee_data == "bootstrap"
        for index, member in enumerate(model.members):
            data.shuffle_offset = MEMBER_SHUFFLE_STRIDE * index
            share = max_seconds / len(model.members) if max_seconds is not None else None
            module = train_energy_model(member, data, settings, epochs, directory, share)
            model.members[index] = module.evaluation_model
        data.shuffle_offset, data.bootstrap_training = 0, False
        evaluated = model
        calibrate_committee(evaluated, data.val_dataloader(), lambda batch: module.in_model_dtype(batch))
    else:
        module = train_energy_model(model, data, settings, epochs, directory, max_seconds)
        evaluated = module.evaluation_model
        if settings.uncertainty == "last-layer":
            prepare = lambda batch: module.in_model_dtype(batch.to(module.device))  # noqa: E731
            evaluated = fit_last_layer_uncertainty(evaluated, data.train_dataloader(), data.val_dataloader(), prepare,
                                                   settings.force_samples, settings.density_components)  # fmt: skip
    with torch.no_grad():
        return write_model_checkpoint(evaluated, directory / "model.ckpt")
