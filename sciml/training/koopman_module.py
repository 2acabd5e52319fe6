"""``KoopmanModule``: trains encoders f, g with a Koopman loss on lagged pairs (thin LightningModule)."""

from __future__ import annotations

from typing import ClassVar

import lightning as L
import torch
from lightning.pytorch.cli import OptimizerCallable
from torch import nn

from sciml._deprecation import renamed_arguments
from sciml.koopman import linalg
from sciml.koopman.functional import with_constant
from sciml.koopman.losses import LoRALoss
from sciml.koopman.moments import Moments
from sciml.nn.checkpoint import FORMAT_VERSION, VERSION_KEY, fresh_instance, module_spec
from sciml.training.finite import FiniteTraining


class KoopmanModule(FiniteTraining, L.LightningModule):
    """Encoders f (on x_t) and g (on x_{t+lagtime}); the loss sees (f, g) with the constant prepended.

    Under DDP the loss uses the moments of the *global* batch: features are all-gathered, the local
    slice stays differentiable and the loss is scaled by the world size, so gradients equal those of one
    process holding the whole batch (DDP averages gradients over processes).

    Args:
        encoder_f: feature map for f, (batch) -> (B, k - 1).
        encoder_g: feature map for g; default: a new instance of ``encoder_f``'s class built from its recorded
            constructor arguments (``config``, see :func:`~sciml.nn.checkpoint.records_config`), so every
            parameter is freshly initialised; an encoder without ``config`` needs ``encoder_g`` or
            ``share_encoders``.
        share_encoders: use ``encoder_f`` for both f and g.
        loss: a module ``(f, g) -> scalar``; default nested LoRA (joint nesting, U-statistic).
        optimizer: optimizer factory, e.g. ``torch.optim.Adam`` with ``lr``.
        lagtime: lag in frames, recorded in the checkpoint (linked from the data module by ``sciml fit``);
            ``None`` if not known: :class:`~sciml.koopman.KoopmanEstimator` then takes the data's.

    Logged: ``train/loss``, ``val/loss``, ``test/loss``, and after each validation epoch ``val/vampe`` and
    ``val/vamp2``: the validation pairs projected on the CCA of the training split at the current weights
    (one forward pass over the data module's ``split_dataloader("train")``, no gradients; an integer
    ``limit_train_batches`` of the trainer limits it too), exactly
    :meth:`KoopmanEstimator.score <sciml.koopman.KoopmanEstimator.score>` on the validation split. VAMP-E is
    the held-out model-selection score: configs keep the checkpoint with the highest.
    """

    linked_from_data: ClassVar[dict[str, str]] = {"lagtime": "lagtime"}  # by ``sciml fit``

    @renamed_arguments({"encoder": "encoder_f"}, since="0.2.0", removed_in="0.3.0")
    def __init__(
        self,
        encoder_f: nn.Module,
        encoder_g: nn.Module | None = None,
        share_encoders: bool = False,
        loss: nn.Module | None = None,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lagtime: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["encoder_f", "encoder_g", "loss", "optimizer"])  # weights_only-loadable
        self.encoder_f = encoder_f
        if share_encoders:
            self.encoder_g = encoder_f
        else:
            self.encoder_g = encoder_g if encoder_g is not None else fresh_instance(encoder_f)
        self.loss_fn = loss if loss is not None else LoRALoss()
        self.optimizer_factory = optimizer

    def features(self, x_t, x_later) -> tuple[torch.Tensor, torch.Tensor]:
        """(f(x_t), g(x_{t+lagtime})), each (B, k) with the constant function first."""
        return with_constant(self.encoder_f(x_t)), with_constant(self.encoder_g(x_later))

    def _world_size(self) -> int:
        """Processes sharing the global batch: 1 outside a Trainer (``self.trainer`` raises there)."""
        return 1 if self._trainer is None else self._trainer.world_size

    def _global(self, local: torch.Tensor) -> torch.Tensor:
        if self._world_size() == 1:
            return local
        gathered = self.all_gather(local.detach())  # (world, B, k)
        gathered[self.global_rank] = local
        return gathered.flatten(0, 1)

    def _global_features(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        f, g = self.features(*batch)
        return self._global(f), self._global(g)

    def _loss(self, batch) -> torch.Tensor:
        return self.loss_fn(*self._global_features(batch))

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss = self._loss(batch)
        self.check_loss_terms({"loss": loss}, batch_idx)
        self.log("train/loss", loss, prog_bar=True, batch_size=_batch_size(batch))
        return loss * self._world_size()

    def on_validation_epoch_start(self) -> None:
        self._held_out = Moments()

    def validation_step(self, batch, batch_idx: int) -> None:
        f, g = self._global_features(batch)
        self.log("val/loss", self.loss_fn(f, g), prog_bar=True, sync_dist=True, batch_size=_batch_size(batch))
        _add_cca_moments(self._held_out, f, g)

    def on_validation_epoch_end(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if self.trainer.sanity_checking or self._held_out.count == 0 or not hasattr(datamodule, "split_dataloader"):
            return
        train, limit = Moments(), self.trainer.limit_train_batches
        with torch.no_grad():
            for index, batch in enumerate(datamodule.split_dataloader("train")):  # each rank: the whole split
                if isinstance(limit, int) and index >= limit:  # as far as the trainer trains
                    break
                batch = tuple(part.to(self.device) for part in batch)
                _add_cca_moments(train, *self.features(*batch))
        analysis = linalg.cca(train.mean("ff_00"), train.mean("gg_11"), train.mean("fg_01"))
        held_out = self._held_out
        scores = linalg.projected_vamp_scores(
            analysis, held_out.mean("ff_00"), held_out.mean("fg_01"), held_out.mean("gg_11")
        )
        self.log("val/vampe", scores["vampe"], prog_bar=True)
        self.log("val/vamp2", scores["vamp2"])

    def test_step(self, batch, batch_idx: int) -> None:
        self.log("test/loss", self._loss(batch), sync_dist=True, batch_size=_batch_size(batch))

    def configure_optimizers(self):
        return self.optimizer_factory(self.parameters())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Store ``sciml_koopman = {encoder_f, encoder_g: {class_path, init_args}, lagtime}`` so that
        :meth:`sciml.koopman.KoopmanEstimator.from_checkpoint` rebuilds the encoders without pickled code."""
        checkpoint[VERSION_KEY] = FORMAT_VERSION
        encoders = {"encoder_f": self.encoder_f, "encoder_g": self.encoder_g}
        if all(getattr(encoder, "config", None) is not None for encoder in encoders.values()):
            checkpoint["sciml_koopman"] = {side: module_spec(encoder) for side, encoder in encoders.items()}
            checkpoint["sciml_koopman"]["lagtime"] = self.hparams.lagtime


def _add_cca_moments(moments: Moments, f: torch.Tensor, g: torch.Tensor) -> None:
    """Add the CCA moments E[f f^T], E[g' g'^T], E[f g'^T] of a batch of (f(x), g(x')) to ``moments``."""
    f, g = f.detach().to("cpu", torch.float64), g.detach().to("cpu", torch.float64)
    for key, left, right in (("ff_00", f, f), ("gg_11", g, g), ("fg_01", f, g)):
        moments.add(key, left, right)
    moments.count += f.shape[0]


def _batch_size(batch) -> int:
    """Pairs in a batch ``(x_t, x_later)`` of state tensors or of graph batches."""
    first = batch[0]
    return int(first.num_graphs) if hasattr(first, "num_graphs") else int(first.shape[0])
