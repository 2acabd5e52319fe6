"""``PotentialModule``: trains an energy model on energies, forces and stress (thin LightningModule)."""

from __future__ import annotations

import copy
import warnings

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from sciml.nn.checkpoint import FORMAT_VERSION, VERSION_KEY, module_spec
from sciml.nn.forces import ForceStressOutput
from sciml.training.energy_shift import evenly_spaced, fit_energy_shift
from sciml.training.error_table import ErrorTable
from sciml.training.finite import FiniteTraining
from sciml.training.schedules import STAGE_TWO_RECIPE, StageTwo, WarmupCosine, warmup_ema
from sciml.uncertainty import UncertaintyCalibration, has_uncertainty
from sciml.uncertainty.committee import member_outputs


def recipe_optimizer(parameters, lr: float = 1e-2) -> torch.optim.Optimizer:
    """The recipe's optimizer: AMSGrad at a peak learning rate of 1e-2 (short trainings of a few thousand
    steps, and the ``large`` preset, train better at 5e-3: ``PotentialModule(model, optimizer=
    functools.partial(recipe_optimizer, lr=5e-3), scheduler=recipe_scheduler)``)."""
    return torch.optim.Adam(parameters, lr=lr, amsgrad=True)


#: The recipe's clip of the gradients' norm (``lightning.Trainer(gradient_clip_val=...)``, the configs'
#: ``trainer.gradient_clip_val``). Active learning's trainings once ran without it: on 80 DFT - GFN2-xTB
#: difference frames of ethanol, 100 epochs of the medium model reached a training force MAE of 43 meV/Å without
#: it and 16 with it.
RECIPE_GRADIENT_CLIP = 10.0


def recipe_scheduler(optimizer: torch.optim.Optimizer) -> WarmupCosine:
    """The recipe's schedule: 100 warm-up steps, then cosine decay per step to 5 % of the peak at the last step."""
    return WarmupCosine(optimizer, warmup_steps=100, min_ratio=0.05)


class PotentialModule(FiniteTraining, L.LightningModule):
    """Loss = w_E * L(E/atom) + w_F * L(F) + w_S * L(stress), L = MSE or Huber (eV, eV/Å, eV/Å^3).

    The defaults are the training recipe of the accuracy benchmark (``scripts/bench_accuracy.py``,
    ``benchmarks/results/accuracy_ablation_8_epochs.md``, and the peak learning rate at the 40-minute budget's
    94 epochs, ``docs/benchmarks/earlier.md``): energy weight 1 and force weight 100, AMSGrad at 1e-2 with 100
    warm-up steps and cosine decay to 5 %, EMA of decay 0.99, and MACE's stage two (energy 1000, forces 100)
    over the last 20 % of ``trainer.max_epochs``.

    Args:
        model: energy model ``batch -> {"energy", "energies"}`` (e.g. :class:`sciml.models.E2Former`).
        energy_weight, force_weight, stress_weight: loss weights (stress only where labelled).
        loss: ``"mse"`` or ``"huber"`` (``huber_delta`` in label units).
        optimizer: optimizer factory (LightningCLI ``class_path`` / ``init_args``); ``None``: the recipe's,
            :func:`~sciml.training.potential_module.recipe_optimizer`.
        scheduler: learning-rate scheduler factory; ``None``: with the recipe's optimizer the recipe's
            schedule, :func:`~sciml.training.potential_module.recipe_scheduler`, otherwise a constant learning
            rate (a given optimizer keeps its own lr).
        ema_decay: keep an exponential moving average of the weights (used for validation, testing
            and saved checkpoints' ``ema_state_dict``) with decay min(ema_decay, (1 + n) / (10 + n)) after n
            updates (warm-up); ``None`` disables it.
        relevel_frames: before each validation, re-level the energies of the evaluated model (the EMA model
            when there is one) on this many evenly spaced training frames: the closed-form per-element shift
            of its ``energy_reference`` (forces unchanged; see :mod:`sciml.training.energy_shift`); 0 disables
            it. Needs a data module with ``dataset()``.
        stage_two: ``{start_epoch | start_fraction, energy_weight, force_weight[, stress_weight][, lr]}``: from
            that epoch (or that fraction of ``trainer.max_epochs``) on, these loss weights, and a constant
            learning rate if ``lr`` is given (MACE's last stage, see :class:`~sciml.training.schedules.StageTwo`);
            ``None``: one stage.
        direct_forces: train and evaluate the model's direct-force head instead of -dE/dx (the model must
            be built with ``direct_force_head=True``); off by default.

    The checkpoint also stores ``sciml_model = {"class_path", "init_args"}``: everything needed to
    rebuild the model (species, cutoff, energy reference, hyper-parameters) without pickled code.
    """

    def __init__(
        self,
        model: nn.Module,
        energy_weight: float = 1.0,
        force_weight: float = 100.0,
        stress_weight: float = 0.0,
        loss: str = "mse",
        huber_delta: float = 0.01,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        ema_decay: float | None = 0.99,
        direct_forces: bool = False,
        stage_two: dict[str, float] | None = STAGE_TWO_RECIPE,
        relevel_frames: int = 512,
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
        if optimizer is None:
            optimizer, scheduler = recipe_optimizer, scheduler or recipe_scheduler
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.stage_two = StageTwo.from_config(stage_two)
        self.relevel_frames = relevel_frames
        self._tables: dict[str, ErrorTable] = {}
        self._calibration = UncertaintyCalibration()
        self.ema = (  # averages self.potential: its module is the EMA model's own ForceStressOutput
            torch.optim.swa_utils.AveragedModel(copy.deepcopy(self.potential), multi_avg_fn=warmup_ema(ema_decay))
            if ema_decay
            else None
        )

    def in_model_dtype(self, batch):
        """The batch with its floating-point fields in the model's dtype (float64 training with float32 data
        runs, though exact float64 training wants ``data.dtype: float64`` too)."""
        dtype = next(self.model.parameters()).dtype
        for key in ("pos", "cell", "shifts", "energy", "forces", "stress"):
            value = getattr(batch, key, None)
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
                setattr(batch, key, value.to(dtype))
        return batch

    def forward(self, batch, stress: bool = False) -> dict[str, torch.Tensor]:
        return self.potential(batch, forces=True, stress=stress)

    @property
    def evaluation_model(self) -> nn.Module:
        """The energy model used for validation, testing, prediction and checkpoints' EMA weights."""
        return self.ema.module.model if self.ema is not None else self.model

    def _predict(self, batch, use_ema: bool) -> dict[str, torch.Tensor]:
        if torch.is_inference_mode_enabled():  # Lightning evaluates under inference mode: forces need autograd
            with torch.inference_mode(False):
                return self._predict(batch.clone(), use_ema)
        stress = self.weights["stress"] > 0 and hasattr(batch, "stress")
        potential = self.ema.module if use_ema and self.ema is not None else self.potential
        return potential(batch, forces=True, stress=stress)

    def _pointwise(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.loss_name == "huber":
            return nn.functional.huber_loss(prediction, target, delta=self.huber_delta)
        return nn.functional.mse_loss(prediction, target)

    def _loss(self, batch, outputs) -> torch.Tensor:
        """Weighted sum over the labels the batch carries (a data module may leave energy or forces out)."""
        return torch.stack(list(self._loss_terms(batch, outputs).values())).sum()

    def _loss_terms(self, batch, outputs) -> dict[str, torch.Tensor]:
        """{label: weighted loss term} for the labels present with a nonzero weight; for a committee, each
        member's terms averaged over the members (each member learns from its own predictions)."""
        if "member_forces" in outputs:
            members = [self._label_terms(batch, member) for member in member_outputs(outputs)]
            return {name: torch.stack([terms[name] for terms in members]).mean() for name in members[0]}
        return self._label_terms(batch, outputs)

    def _label_terms(self, batch, outputs) -> dict[str, torch.Tensor]:
        terms = {}
        if hasattr(batch, "energy") and self.weights["energy"]:
            atoms = batch.natoms.to(outputs["energy"].dtype)
            terms["energy"] = self.weights["energy"] * self._pointwise(outputs["energy"] / atoms, batch.energy / atoms)
        if hasattr(batch, "forces") and self.weights["forces"]:
            terms["forces"] = self.weights["forces"] * self._pointwise(outputs["forces"], batch.forces)
        if "stress" in outputs and hasattr(batch, "stress"):
            terms["stress"] = self.weights["stress"] * self._pointwise(outputs["stress"], batch.stress)
        if not terms:
            weighted = ", ".join(name for name, weight in self.weights.items() if weight)
            raise ValueError(
                f"the batch carries no label for any weighted loss term ({weighted}); label the data "
                "(data.labels, data.energy_key / forces_key / stress_key) or change the loss weights"
            )
        return terms

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        batch = self.in_model_dtype(batch)
        terms = self._loss_terms(batch, self._predict(batch, use_ema=False))
        self.check_loss_terms(terms, batch_idx)
        loss = torch.stack(list(terms.values())).sum()
        self.log("train/loss", loss, prog_bar=True, batch_size=batch.num_graphs)
        return loss

    def _evaluate(self, batch, prefix: str) -> None:
        batch = self.in_model_dtype(batch)
        outputs = self._predict(batch, use_ema=True)
        self.log(f"{prefix}/loss", self._loss(batch, outputs), batch_size=batch.num_graphs, sync_dist=True)
        self._tables[prefix].update(batch, outputs)
        if prefix == "val" and "member_forces" in outputs:
            self._calibration.update(batch, outputs)

    def _calibrate_uncertainty(self) -> None:
        """A committee's uncertainty scales from this validation (see :mod:`sciml.uncertainty.fitting`), set
        on the evaluated model (and the trained one) before the epoch's checkpoint is written; logged as
        ``val/energy_uncertainty_scale`` and ``val/force_uncertainty_scale``."""
        calibration, self._calibration = self._calibration, UncertaintyCalibration()
        calibration.reduce()
        if not calibration.sums.any() or self.trainer.state.fn != "fit" or self.trainer.sanity_checking:
            return
        scales = calibration.scales()
        for model in {id(m): m for m in (self.evaluation_model, self.model)}.values():
            model.set_scales(*scales)
        self.log("val/energy_uncertainty_scale", scales[0], batch_size=1)
        self.log("val/force_uncertainty_scale", scales[1], batch_size=1)

    def _start_table(self, prefix: str) -> None:
        self._tables[prefix] = ErrorTable()

    def _finish_table(self, prefix: str) -> None:
        """Log the exact split-wide errors (eV units) and, for ``sciml validate|test``, print the table per
        config_type and write it as ``<prefix>_errors.csv``/``.json`` into the run directory."""
        table = self._tables.pop(prefix)
        table.reduce()
        rows = table.rows()
        if not rows:
            return
        everything = rows[-1]
        for name, key in (("energy_mae_per_atom", "energy_mae"), ("energy_rmse_per_atom", "energy_rmse")):
            if everything[key] == everything[key]:  # not NaN: the split has energies
                self.log(f"{prefix}/{name}", everything[key] / 1000)
        for name in ("force_mae", "force_rmse", "stress_mae"):
            if everything[name] == everything[name]:
                self.log(f"{prefix}/{name}", everything[name] / 1000, prog_bar=name == "force_mae")
        if self.trainer.state.fn in ("validate", "test") and self.trainer.is_global_zero:
            print(table.markdown(f"\n{prefix} errors"))
            for path in table.write(self.trainer.log_dir or self.trainer.default_root_dir, f"{prefix}_errors"):
                print(f"wrote {path}")

    def on_test_epoch_start(self) -> None:
        self._start_table("test")

    def on_test_epoch_end(self) -> None:
        self._finish_table("test")

    def on_validation_epoch_end(self) -> None:
        self._finish_table("val")
        self._calibrate_uncertainty()

    def on_validation_epoch_start(self) -> None:
        self._start_table("val")
        self._relevel_energies()

    def _relevel_energies(self) -> None:
        """Each energy model evaluated (a committee's members one by one) re-levelled on training frames."""
        evaluated = self.evaluation_model
        models = [m for m in getattr(evaluated, "members", [evaluated]) if hasattr(m, "energy_reference")]
        datamodule = getattr(self._trainer, "datamodule", None)
        if (
            not self.relevel_frames
            or self.trainer.state.fn != "fit"  # `sciml validate` evaluates the checkpoint as it is
            or self.trainer.sanity_checking
            or not models
            or not hasattr(datamodule, "dataset")
        ):
            return
        sample = evenly_spaced(datamodule.dataset("train"), self.relevel_frames)
        loader = datamodule.loader_class(sample, batch_size=datamodule.eval_batch_size)
        largest = 0.0
        for model in models:
            shift = fit_energy_shift(model, loader, lambda batch: self.in_model_dtype(batch.to(self.device)))
            model.energy_reference += shift.to(model.energy_reference)
            largest = max(largest, float(shift.abs().max()))
        self.log("val/energy_relevel", largest, batch_size=1)  # eV per atom of the largest element

    def validation_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, torch.Tensor]:
        with torch.inference_mode(False):
            batch = self.in_model_dtype(batch.clone())
            potential = self.ema.module if self.ema is not None else self.potential
            outputs = potential(batch, forces=True, stress=bool(batch.pbc.all()))
        model = self.evaluation_model
        if has_uncertainty(model):
            outputs["energy_uncertainty"], outputs["forces_uncertainty"] = model.uncertainty(outputs)
        internal = ("features", "last_layer_features")
        kept = {key: value for key, value in outputs.items() if key not in internal and not key.startswith("member_")}
        return {key: value.detach() for key, value in kept.items()}

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        if self.ema is not None:
            self.ema.update_parameters(self.potential)

    def _in_stage_two(self) -> bool:
        first = None if self.stage_two is None else self.stage_two.first_epoch(self.trainer.max_epochs)
        return first is not None and self.current_epoch >= first

    def on_fit_start(self) -> None:
        stage = self.stage_two
        if stage is not None and stage.first_epoch(self.trainer.max_epochs) is None:
            warnings.warn(
                f"stage_two starts at a fraction ({stage.start_fraction}) of trainer.max_epochs, but this run has no "
                "epoch limit: it trains in one stage (set stage_two.start_epoch, or trainer.max_epochs)",
                stacklevel=1,
            )

    def on_train_epoch_start(self) -> None:
        stage = self.stage_two
        if self._in_stage_two():
            self.weights["energy"], self.weights["forces"] = stage.energy_weight, stage.force_weight
            if stage.stress_weight is not None:
                self.weights["stress"] = stage.stress_weight

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        stage = self.stage_two
        if stage is not None and stage.lr is not None and self._in_stage_two():
            for optimizer in self.trainer.optimizers:  # overrides any scheduler from here on
                for group in optimizer.param_groups:
                    group["lr"] = stage.lr

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.model.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer)
        if hasattr(scheduler, "set_total_steps"):
            scheduler.set_total_steps(self.trainer.estimated_stepping_batches)
        interval = getattr(scheduler, "interval", "epoch")
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "monitor": "val/loss", "interval": interval},
        }

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint[VERSION_KEY] = FORMAT_VERSION
        if getattr(self.model, "config", None) is not None:
            checkpoint["sciml_model"] = module_spec(self.model)
        if self.ema is not None:
            checkpoint["ema_state_dict"] = self.evaluation_model.state_dict()
