"""Callbacks used by the configs."""

from __future__ import annotations

import time
from pathlib import Path

import ase.io
import lightning as L
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.stress import full_3x3_to_voigt_6_stress
from lightning.pytorch.callbacks import BasePredictionWriter, ModelCheckpoint, Timer

from sciml.data.files import AtomicOutput
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.uncertainty.fitting import fit_last_layer_uncertainty
from sciml.uncertainty.last_layer import check_force_uncertainty


class FinalMetrics(L.Callback):
    """At the end of ``fit``, print the last validation metrics, one per line (e.g. ``val/force_mae``)."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        print("final validation metrics:")
        for name, value in sorted(metrics.items()):
            print(f"  {name} = {value:.6g}")


class TrainingClock(L.Callback):
    """Log ``time/training_minutes`` (wall-clock minutes since fit started, validation included) with every
    validation, so that learning curves can be drawn against time (``bench_accuracy.py``)."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == "fit":
            pl_module.log("time/training_minutes", (time.perf_counter() - self._start) / 60, batch_size=1)


class FitScheduleToTime(L.Callback):
    """With ``trainer.max_time``: after each epoch (its validation included), shorten ``max_epochs`` to the epochs
    that still fit in the time left at the mean epoch time so far, and the step schedule with it
    (``WarmupCosine.total_steps``), so that the cosine decay and stage two (a fraction of ``max_epochs``) end when
    the time does instead of being cut off by it. Never lengthens a run; without ``max_time`` it does nothing."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = next((callback for callback in trainer.callbacks if isinstance(callback, Timer)), None)
        planned = trainer.fit_loop.max_epochs
        remaining = timer.time_remaining() if timer is not None else None
        if remaining is None or planned is None or planned < 0:
            return
        done = trainer.current_epoch + 1
        fits = done + int(max(remaining, 0.0) // (timer.time_elapsed() / done))
        if fits >= planned:
            return
        trainer.fit_loop.max_epochs = fits
        for config in trainer.lr_scheduler_configs:  # re-set as PotentialModule first set it, for the new plan
            if hasattr(config.scheduler, "total_steps"):
                config.scheduler.total_steps = trainer.estimated_stepping_batches


class PredictionWriter(BasePredictionWriter):
    """Stream ``sciml predict`` results to an extxyz file, one frame per structure, in input order.

    Each frame holds the input structure with the predicted ``energy`` (eV), ``forces`` (eV/Å), per-atom
    ``energies`` and, for periodic cells, ``stress`` (eV/Å^3); a model with an uncertainty estimate adds
    ``energy_uncertainty`` (eV, in the frame's info) and per-atom ``forces_uncertainty`` (eV/Å, a column).
    Predictions are not also collected in memory,
    so memory is bounded by the batch size.

    Args:
        output: the extxyz file to write; a relative path is taken inside the run directory
            (``trainer.default_root_dir``), so runs never write into the working directory. The file appears
            only when prediction has finished (written to a temporary file, then renamed).
        overwrite: replace an existing ``output``; by default an existing file is refused before any work.
    """

    def __init__(self, output: str = "predictions.extxyz", overwrite: bool = False) -> None:
        super().__init__(write_interval="batch")
        self.output, self.overwrite = Path(output), overwrite
        self._handle = self._writing = None

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        trainer.predict_loop.return_predictions = False
        if not self.output.is_absolute():
            self.output = Path(trainer.default_root_dir) / self.output
        self._writing = AtomicOutput(self.output, self.overwrite, "--trainer.callbacks.overwrite=true")
        self._handle = open(self._writing.temporary, "w")  # noqa: SIM115 (closed in on_predict_end)

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx):
        for k in range(batch.num_graphs):
            atoms_of = (batch.batch == k).nonzero().flatten()
            atoms = Atoms(
                numbers=batch.numbers[atoms_of].cpu().numpy(),
                positions=batch.pos[atoms_of].cpu().numpy(),
                cell=batch.cell[k].cpu().numpy(),
                pbc=batch.pbc[k].cpu().numpy(),
            )
            results = {
                "energy": float(prediction["energy"][k]),
                "forces": prediction["forces"][atoms_of].cpu().double().numpy(),
                "energies": prediction["energies"][atoms_of].cpu().double().numpy(),
            }
            if "stress" in prediction:
                results["stress"] = full_3x3_to_voigt_6_stress(prediction["stress"][k].cpu().double().numpy())
            if "energy_uncertainty" in prediction:  # a model with an uncertainty estimate
                atoms.info["energy_uncertainty"] = float(prediction["energy_uncertainty"][k])
                atoms.arrays["forces_uncertainty"] = prediction["forces_uncertainty"][atoms_of].cpu().double().numpy()
            atoms.calc = SinglePointCalculator(atoms, **results)
            ase.io.write(self._handle, atoms, format="extxyz")
        self._handle.flush()

    def on_predict_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._finish(None)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._finish(exception)  # the temporary file is removed; no half-written output remains

    def _finish(self, exception: BaseException | None) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._writing is not None:
            writing, self._writing = self._writing, None
            if exception is None:
                writing.commit()
            else:
                writing.discard()


class RunCheckpoints(ModelCheckpoint):
    """Two files per run in ``<run>/checkpoints/``: ``last.ckpt``, the run as it stands (weights, EMA,
    optimizer, schedule, epoch), rewritten after every validation and when training ends; and ``best.ckpt``,
    the model with the best ``monitor`` so far.

    Lightning's ``ModelCheckpoint(monitor=..., save_last=True)`` rewrites ``last.ckpt`` only when a new best
    is saved, so epochs after the best are kept nowhere and ``--ckpt_path last.ckpt`` resumes from the best
    epoch, not from where the run stopped. Here ``--ckpt_path <run>/checkpoints/last.ckpt`` always continues
    the run, and ``best.ckpt`` is the file to deploy when validation decides.

    Args:
        monitor: the logged metric that picks ``best.ckpt`` (e.g. ``val/force_mae``, ``val/vampe``).
        mode: ``"min"`` or ``"max"``.
        dirpath: the folder of both files (default: ``checkpoints/`` in the run's log directory).
    """

    def __init__(self, monitor: str = "val/force_mae", mode: str = "min", dirpath: str | None = None) -> None:
        super().__init__(
            dirpath, "best", monitor, mode=mode, save_top_k=1, save_last=True, enable_version_counter=False
        )

    def _save_last_if_behind(self, trainer: L.Trainer) -> None:
        if self._should_skip_saving_checkpoint(trainer):  # not fitting, sanity check, or saved at this step
            return
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)  # best.ckpt (and last.ckpt with it) on a new best
        if not self._should_save_on_train_epoch_end(trainer):
            self._save_last_if_behind(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self._should_save_on_train_epoch_end(trainer):
            self._save_last_if_behind(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save_last_if_behind(trainer)  # a run stopped mid-epoch (max_time, a signal) keeps its last step


class FitLastLayerUncertainty(L.Callback):
    """When training ends, fit the last-layer (LLPR) uncertainty of the evaluated model (the EMA weights) on
    the data module's training and validation splits (:func:`~sciml.uncertainty.fitting.fit_last_layer_uncertainty`)
    and write it as a checkpoint that ``SciMLCalculator.from_checkpoint`` and ``sciml md`` read.

    Args:
        output: the checkpoint to write; relative to the run's log directory (default
            ``checkpoints/last_layer.ckpt``).
        force_samples: k > 0, the force uncertainty from the forces of a k-member last-layer posterior ensemble
            (:class:`~sciml.uncertainty.LastLayerUncertainty`).
        density_components: the force uncertainty from the distance of each atom's features to the training
            atoms' under that many mixture components per element (None: 8, the default, or none with
            ``force_samples``; 0 and no ``force_samples``: the per-atom energy rigidity).
    """

    def __init__(
        self, output: str = "checkpoints/last_layer.ckpt", force_samples: int = 0, density_components: int | None = None
    ) -> None:
        check_force_uncertainty(force_samples, density_components)
        self.output, self.force_samples, self.density_components = Path(output), force_samples, density_components

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        datamodule = trainer.datamodule
        prepare = lambda batch: pl_module.in_model_dtype(batch.to(pl_module.device))  # noqa: E731
        wrapped = fit_last_layer_uncertainty(
            pl_module.evaluation_model,
            datamodule.train_dataloader(),
            datamodule.val_dataloader(),
            prepare,
            self.force_samples,
            self.density_components,
        )
        if trainer.is_global_zero:
            root = Path(trainer.log_dir or trainer.default_root_dir)
            path = write_model_checkpoint(wrapped, self.output if self.output.is_absolute() else root / self.output)
            print(f"wrote the last-layer uncertainty model to {path}")
