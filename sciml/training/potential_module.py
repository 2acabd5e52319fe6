"""``PotentialModule``: trains an energy model on energies, forces and stress (thin LightningModule)."""

from __future__ import annotations

import copy

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from sciml.nn.checkpoint import module_spec
from sciml.nn.forces import ForceStressOutput
from sciml.training.metrics import potential_errors


class PotentialModule(L.LightningModule):
    """Loss = w_E * L(E/atom) + w_F * L(F) + w_S * L(stress), L = MSE or Huber (eV, eV/Å, eV/Å^3).

    Args:
        model: energy model ``batch -> {"energy", "energies"}`` (e.g. :class:`sciml.models.E2Former`).
        energy_weight, force_weight, stress_weight: loss weights (stress only where labelled).
        loss: ``"mse"`` or ``"huber"`` (``huber_delta`` in label units).
        optimizer / scheduler: factories (LightningCLI ``class_path`` / ``init_args``).
        ema_decay: keep an exponential moving average of the weights (used for validation, testing
            and saved checkpoints' ``ema_state_dict``); ``None`` disables it.
        direct_forces: train and evaluate the model's direct-force head instead of -dE/dx (the model must
            be built with ``direct_force_head=True``); off by default.

    The checkpoint also stores ``sciml_model = {"class_path", "init_args"}``: everything needed to
    rebuild the model (species, cutoff, energy reference, hyper-parameters) without pickled code.
    """

    def __init__(
        self,
        model: nn.Module,
        energy_weight: float = 1.0,
        force_weight: float = 10.0,
        stress_weight: float = 0.0,
        loss: str = "mse",
        huber_delta: float = 0.01,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
        ema_decay: float | None = None,
        direct_forces: bool = False,
    ) -> None:
        super().__init__()
        if loss not in ("mse", "huber"):
            raise ValueError(f"loss must be 'mse' or 'huber', got '{loss}'")
        self.save_hyperparameters(ignore=["model", "optimizer", "scheduler"])  # weights_only-loadable
        self.model = model
        self.direct_forces = direct_forces
        self.potential = ForceStressOutput(model, direct_forces)
        self.weights = {"energy": energy_weight, "forces": force_weight, "stress": stress_weight}
        self.loss_name, self.huber_delta = loss, huber_delta
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.ema = (
            torch.optim.swa_utils.AveragedModel(
                copy.deepcopy(model), multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(ema_decay)
            )
            if ema_decay
            else None
        )

    def forward(self, batch, stress: bool = False) -> dict[str, torch.Tensor]:
        return self.potential(batch, forces=True, stress=stress)

    def _predict(self, batch, use_ema: bool) -> dict[str, torch.Tensor]:
        if torch.is_inference_mode_enabled():  # Lightning evaluates under inference mode: forces need autograd
            with torch.inference_mode(False):
                return self._predict(batch.clone(), use_ema)
        stress = self.weights["stress"] > 0 and hasattr(batch, "stress")
        if use_ema and self.ema is not None:
            return ForceStressOutput(self.ema.module, self.direct_forces).train(self.training)(
                batch, forces=True, stress=stress
            )
        return self(batch, stress=stress)

    def _pointwise(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.loss_name == "huber":
            return nn.functional.huber_loss(prediction, target, delta=self.huber_delta)
        return nn.functional.mse_loss(prediction, target)

    def _loss(self, batch, outputs) -> torch.Tensor:
        atoms = batch.natoms.to(outputs["energy"].dtype)
        loss = self.weights["energy"] * self._pointwise(outputs["energy"] / atoms, batch.energy / atoms)
        loss = loss + self.weights["forces"] * self._pointwise(outputs["forces"], batch.forces)
        if "stress" in outputs:
            loss = loss + self.weights["stress"] * self._pointwise(outputs["stress"], batch.stress)
        return loss

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss = self._loss(batch, self._predict(batch, use_ema=False))
        self.log("train/loss", loss, prog_bar=True, batch_size=batch.num_graphs)
        return loss

    def _evaluate(self, batch, prefix: str) -> None:
        outputs = self._predict(batch, use_ema=True)
        self.log(f"{prefix}/loss", self._loss(batch, outputs), batch_size=batch.num_graphs, sync_dist=True)
        for name, value in potential_errors(batch, outputs).items():
            self.log(
                f"{prefix}/{name}", value, batch_size=batch.num_graphs, sync_dist=True, prog_bar=name == "force_mae"
            )

    def validation_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, torch.Tensor]:
        with torch.inference_mode(False):
            batch = batch.clone()
            model = self.ema.module if self.ema is not None else self.model
            outputs = ForceStressOutput(model, self.direct_forces).eval()(
                batch, forces=True, stress=bool(batch.pbc.all())
            )
        return {key: value.detach() for key, value in outputs.items() if key != "features"}

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        if self.ema is not None:
            self.ema.update_parameters(self.model)

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.model.parameters())
        if self.scheduler_factory is None:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer), "monitor": "val/loss"},
        }

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if getattr(self.model, "config", None) is not None:
            checkpoint["sciml_model"] = module_spec(self.model)
        if self.ema is not None:
            checkpoint["ema_state_dict"] = self.ema.module.state_dict()
