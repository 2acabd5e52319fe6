"""``PosteriorSamples``: S energy surfaces drawn from a potential's own uncertainty, one per structure of a batch.

A kinetics estimate from MD with one potential carries two errors: the sampling error of finite trajectories and
the error of the potential itself. To propagate the second, replicas of one system run on different surfaces
drawn from the potential's posterior (:func:`~sciml.pipelines.kinetics.sample_replicas` with
``posterior_samples``), and the kinetics bootstrap resamples those draws (:mod:`sciml.koopman.bootstrap`).

The draws, of the calibrated posterior of the model's uncertainty estimate:

- :class:`~sciml.uncertainty.LastLayerUncertainty` (LLPR): the last layer's weights perturbed by
  dw_s = alpha L z_s (z_s standard normal, drawn once from ``seed``; L L^T = (G + varsigma^2 I)^-1), so
  E_s(x) = E(x) + alpha g(x) . L z_s, whose spread over s is alpha |L^T g(x)|, the model's sigma_E;
- :class:`~sciml.uncertainty.Committee`: member s mod M, its deviation from the mean stretched by the
  calibration, E_s = E + alpha (E_m - E).

``alpha`` is the scale calibrated on the spread of the draws' forces where the model has one (a committee; a
last-layer model with ``force_samples``: its ensemble is these draws), else the energy scale (the LLPR energy
rigidity, calibrated on energy errors). Forces are -dE_s/dx: :class:`~sciml.nn.forces.ForceStressOutput`
differentiates the drawn energy as any other.
"""

from __future__ import annotations

import torch
from torch import nn

from sciml.uncertainty.base import UncertaintyModel
from sciml.uncertainty.committee import Committee
from sciml.uncertainty.last_layer import LastLayerUncertainty


class PosteriorSamples(nn.Module):
    """``samples`` energy surfaces of ``model`` (a calibrated last-layer or committee model; module docstring).

    ``assign(indices)`` sets which draw each structure of the next batches takes ((B,) ints in [0, samples));
    ``forward(batch)`` then returns ``energy`` (B,) eV of each structure on its draw (and the wrapped model's
    ``energy`` as ``mean_energy``). Unassigned, every structure takes draw 0.
    """

    def __init__(self, model: UncertaintyModel, samples: int, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(model, (LastLayerUncertainty, Committee)):
            raise ValueError(f"posterior samples need a last-layer or committee model, got {type(model).__name__}")
        if samples < 1:
            raise ValueError(f"samples must be at least 1, got {samples}")
        if not model.calibrated:
            raise ValueError("posterior samples need a calibrated uncertainty (its scales are not fitted)")
        self.model, self.samples = model, int(samples)
        by_forces = isinstance(model, Committee) or model.force_samples > 0
        scale = model.force_uncertainty_scale if by_forces else model.energy_uncertainty_scale
        self.register_buffer("scale", scale.detach().clone())
        self.register_buffer("assignment", torch.zeros(1, dtype=torch.int64))
        if isinstance(model, LastLayerUncertainty):
            size = model.rigidity_factor.shape[0]
            generator = torch.Generator().manual_seed(seed)
            probes = torch.randn(size, self.samples, generator=generator, dtype=torch.float64)
            self.register_buffer("directions", (model.rigidity_factor.double() @ probes).to(model.rigidity_factor))
        self.train(model.training)

    @property
    def species(self) -> list[int]:
        return self.model.species

    @property
    def cutoff(self) -> float:
        return self.model.cutoff

    def assign(self, indices) -> None:
        """The draw of each structure of the next batches, (B,) ints in [0, samples)."""
        indices = torch.as_tensor(indices, dtype=torch.int64, device=self.assignment.device).reshape(-1)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.samples):
            raise ValueError(f"draw indices must lie in [0, {self.samples}), got {indices.tolist()}")
        self.assignment = indices

    def forward(self, batch) -> dict[str, torch.Tensor]:
        structures = batch.cell.shape[0]
        draws = self.assignment if len(self.assignment) == structures else self.assignment.new_zeros(structures)
        if isinstance(self.model, Committee):
            outputs = self.model(batch)
            members = outputs["member_energy"]  # (M, B)
            own = members[draws % members.shape[0], torch.arange(structures, device=members.device)]
            deviation = own - outputs["energy"]
        else:
            outputs = self.model.with_uncertainty_inputs(dict(self.model.model(batch)), batch)
            gradient = outputs["last_layer_gradient"]  # (B, D) eV per unit weight
            deviation = (gradient * self.directions.to(gradient.dtype)[:, draws].T).sum(1)
        return {"energy": outputs["energy"] + self.scale.to(deviation.dtype) * deviation,
                "mean_energy": outputs["energy"].detach()}  # fmt: skip
