"""``UncertaintyBiased``: a potential lowered where it is unsure, E - tau sigma_E, for exploration.

Unbiased MD at a temperature visits rarely what a learning loop most needs: barrier regions and minor wells that
the young model has never seen. Uncertainty-biased MD (hyperactive learning, van der Oord et al., npj Comput.
Mater. 9, 168 (2023); uncertainty-driven dynamics, Kulichenko et al., Nat. Comput. Sci. 3, 230 (2023)) runs on
a surface lowered where the model is uncertain, so that the dynamics is drawn there:

    E_biased(x) = E(x) - tau sigma_E(x),   F_biased = -dE_biased/dx = F + tau d(sigma_E)/dx,

with sigma_E the calibrated energy uncertainty (eV) of a last-layer model, alpha_E |L^T g(x)|
(:class:`~sciml.uncertainty.LastLayerUncertainty`), differentiable in the positions; ``tau`` is in standard
deviations (tau = 1: the surface one sigma lower where the model is unsure, unchanged where it is sure). The
exploration's frames are labelled by the oracle as any others; biased runs only decide where to look, and are
never kinetics (the production replicas of the pipeline run unbiased).

The model's uncertainty (what the exploration watches) is the wrapped model's, unchanged.
"""

from __future__ import annotations

import torch

from sciml.uncertainty.base import UncertaintyModel
from sciml.uncertainty.last_layer import LastLayerUncertainty


class UncertaintyBiased(UncertaintyModel):
    """``model`` (a calibrated :class:`~sciml.uncertainty.LastLayerUncertainty`) on the biased surface
    E - ``strength`` sigma_E (module docstring). ``forward(batch)`` returns the wrapped model's outputs with
    ``energy`` (B,) eV biased and the model's own as ``unbiased_energy``; :meth:`uncertainty` is the model's."""

    def __init__(self, model: LastLayerUncertainty, strength: float) -> None:
        if not isinstance(model, LastLayerUncertainty):
            raise ValueError(
                f"uncertainty-biased exploration needs a last-layer model (its sigma_E is differentiable in the "
                f"positions), got {type(model).__name__}"
            )
        if not strength >= 0:
            raise ValueError(f"the bias strength must be >= 0 standard deviations, got {strength}")
        if not model.calibrated:
            raise ValueError("uncertainty-biased exploration needs a calibrated uncertainty (scales not fitted)")
        super().__init__(model.energy_uncertainty_scale.dtype)
        self.model, self.strength = model, float(strength)
        self.set_scales(float(model.energy_uncertainty_scale), float(model.force_uncertainty_scale))
        self.train(model.training)

    def energy_models(self) -> list[torch.nn.Module]:
        return self.model.energy_models()

    def spread(self, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.spread(outputs)

    def forward(self, batch) -> dict[str, torch.Tensor]:
        outputs = self.model(batch)
        gradient = outputs["last_layer_gradient"]  # (B, D)
        factor = self.model.rigidity_factor.to(gradient.dtype)
        sigma = self.model.energy_uncertainty_scale * (gradient @ factor).norm(dim=1)  # (B,) eV
        outputs["unbiased_energy"] = outputs["energy"].detach()
        outputs["energy"] = outputs["energy"] - self.strength * sigma
        return outputs
