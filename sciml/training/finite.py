"""Stop a run at the first non-finite loss term or gradient, naming the step, batch and culprit, before the
optimizer step: no NaN ever reaches the weights, so no checkpoint can hold one."""

from __future__ import annotations

import torch


class NonFiniteError(FloatingPointError):
    """A loss term or gradient became NaN or infinite."""


class FiniteTraining:
    """Mixin for LightningModules: call :meth:`check_loss_terms` in ``training_step``; gradients are checked
    in ``on_before_optimizer_step``."""

    def check_loss_terms(self, terms: dict[str, torch.Tensor], batch_idx: int) -> None:
        """Raise :class:`NonFiniteError` naming the first non-finite term of ``{name: scalar}``."""
        values = torch.stack([value.detach() for value in terms.values()])
        if bool(torch.isfinite(values).all()):
            return
        bad = {name: float(value) for name, value in terms.items() if not torch.isfinite(value.detach())}
        raise NonFiniteError(
            f"non-finite training loss at step {self.global_step}, epoch {self.current_epoch}, batch {batch_idx}: "
            + ", ".join(f"{name} = {value}" for name, value in bad.items())
            + " (the weights were not updated; lower the learning rate or check the labels of this batch)"
        )

    def on_before_optimizer_step(self, optimizer) -> None:
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if not grads or bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()):
            return
        names = [name for name, p in self.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
        raise NonFiniteError(
            f"non-finite gradient at step {self.global_step}, epoch {self.current_epoch} in {len(names)} "
            f"parameter(s), first {names[0]} (the weights were not updated)"
        )
