"""Callbacks used by the configs."""

from __future__ import annotations

from pathlib import Path

import ase.io
import lightning as L
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.stress import full_3x3_to_voigt_6_stress
from lightning.pytorch.callbacks import BasePredictionWriter

from sciml.data.files import AtomicOutput


class FinalMetrics(L.Callback):
    """At the end of ``fit``, print the last validation metrics, one per line (e.g. ``val/force_mae``)."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        print("final validation metrics:")
        for name, value in sorted(metrics.items()):
            print(f"  {name} = {value:.6g}")


class PredictionWriter(BasePredictionWriter):
    """Stream ``sciml predict`` results to an extxyz file, one frame per structure, in input order.

    Each frame holds the input structure with the predicted ``energy`` (eV), ``forces`` (eV/Å), per-atom
    ``energies`` and, for periodic cells, ``stress`` (eV/Å^3). Predictions are not also collected in memory,
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
