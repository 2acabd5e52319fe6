"""``UncertaintyModel``: the one interface of a potential that estimates its own uncertainty.

The ASE calculator, the MD engine's batched potential, the training module and the learning loop depend on this
interface only, never on which estimate a model carries (:class:`~sciml.uncertainty.Committee`: the members'
spread; :class:`~sciml.uncertainty.LastLayerUncertainty`: the last layer's posterior). A model with an
uncertainty

- wraps the energy model(s) it predicts with (``energy_models()``), whose ``species`` and ``cutoff`` it has;
- returns from ``spread(outputs)`` the unscaled uncertainties of a differentiated forward pass (per structure,
  eV; per atom, eV/Å, for one force component);
- carries two scales as buffers (``energy_uncertainty_scale``, ``force_uncertainty_scale``; NaN until
  fitted, so they travel with the state dict), fitted by the rule of :mod:`sciml.uncertainty.scales`;
- reports sigma = scale x spread from ``uncertainty(outputs)``.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn


class UncertaintyModel(nn.Module):
    """Base class of every energy model with an uncertainty estimate (module docstring).

    Subclasses call ``super().__init__(dtype)`` and implement :meth:`energy_models` and :meth:`spread`.
    ``UNFITTED_SCALE``: the scale :meth:`uncertainty` applies before the scales are fitted (1.0: the raw spread
    means something, as a committee's does; NaN: it does not)."""

    UNFITTED_SCALE: ClassVar[float] = float("nan")

    def __init__(self, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        dtype = dtype or torch.get_default_dtype()
        self.register_buffer("energy_uncertainty_scale", torch.tensor(float("nan"), dtype=dtype))
        self.register_buffer("force_uncertainty_scale", torch.tensor(float("nan"), dtype=dtype))

    def energy_models(self) -> list[nn.Module]:
        """The energy models whose predictions this model reports (a committee's members, or the one model)."""
        raise NotImplementedError

    def spread(self, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Unscaled uncertainties (B,) eV and (N,) eV/Å from the differentiated outputs of ``forward``."""
        raise NotImplementedError

    @property
    def species(self) -> list[int]:
        """The atomic numbers the model knows."""
        return self.energy_models()[0].species

    @property
    def cutoff(self) -> float:
        """The cutoff radius (Å)."""
        return self.energy_models()[0].cutoff

    @property
    def calibrated(self) -> bool:
        """Whether both scales have been fitted."""
        return bool(torch.isfinite(self.energy_uncertainty_scale) and torch.isfinite(self.force_uncertainty_scale))

    def set_scales(self, energy: float, force: float) -> None:
        """Set the two scales (as fitted by :func:`~sciml.uncertainty.scales.scale_factor`)."""
        self.energy_uncertainty_scale.fill_(energy)
        self.force_uncertainty_scale.fill_(force)

    def rescale(self, energy_factor: float, force_factor: float) -> None:
        """Multiply the two scales (a refit on other frames); predictions are unchanged. A factor that is not a
        positive number is refused, naming it."""
        for name, factor in (("energy", energy_factor), ("force", force_factor)):
            if not (factor > 0 and factor < float("inf")):
                raise ValueError(f"the {name} uncertainty factor {factor} is not a positive number")
        self.energy_uncertainty_scale.mul_(energy_factor)
        self.force_uncertainty_scale.mul_(force_factor)

    def uncertainty(self, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """sigma_E (B,) in eV and sigma_F (N,) in eV/Å: the scales times :meth:`spread` (``UNFITTED_SCALE``
        before they are fitted)."""
        energy, forces = self.spread(outputs)
        if not self.calibrated:
            return self.UNFITTED_SCALE * energy, self.UNFITTED_SCALE * forces
        return self.energy_uncertainty_scale * energy, self.force_uncertainty_scale * forces


def has_uncertainty(model: nn.Module) -> bool:
    """Whether ``model`` estimates its uncertainty (an :class:`UncertaintyModel`)."""
    return isinstance(model, UncertaintyModel)
