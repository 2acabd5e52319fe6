"""Fitting uncertainties on a held-out split: a committee's scales, and the last-layer (LLPR) fit.

With the members' spreads u (per structure for energies, per atom and component for forces, see
:func:`~sciml.uncertainty.committee.committee_spread`) and the committee mean's errors e over the split, the
scales follow the rule of :mod:`sciml.uncertainty.scales`, s^2 = sum e^2 / sum u^2. Sums are accumulated batch
by batch and added across processes, so the scale is the split's, not a batch mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from sciml.nn.forces import ForceStressOutput
from sciml.uncertainty.committee import Committee, committee_spread
from sciml.uncertainty.density_fit import fit_feature_density
from sciml.uncertainty.last_layer import LastLayerUncertainty, ensemble_force_spread, rigidity_spread
from sciml.uncertainty.scales import scale_factor, scale_from_sums

SUMS = ("energy_error_sq", "energy_spread_sq", "force_error_sq", "force_spread_sq", "frames", "components")


class UncertaintyCalibration:
    """Accumulate with :meth:`update`, then read :meth:`scales` (``(s_E, s_F)``, NaN where a label is absent)."""

    def __init__(self) -> None:
        self.sums = torch.zeros(len(SUMS), dtype=torch.float64)

    def update(self, batch, outputs: dict[str, torch.Tensor]) -> None:
        """One evaluated batch: ``outputs`` of a committee with ``member_forces``; labels in eV, eV/Å."""
        energy_spread, force_spread = (value.detach().double() for value in committee_spread(outputs))
        sums = torch.zeros(len(SUMS), dtype=torch.float64, device=energy_spread.device)
        if hasattr(batch, "energy"):
            error = (outputs["energy"].detach() - batch.energy).double()
            sums[0], sums[1], sums[4] = (error**2).sum(), (energy_spread**2).sum(), error.numel()
        if hasattr(batch, "forces"):
            error = (outputs["forces"].detach() - batch.forces).double()
            sums[2], sums[3], sums[5] = (error**2).sum(), 3 * (force_spread**2).sum(), error.numel()
        self.sums += sums.cpu()

    def reduce(self) -> None:
        """Add the sums of every process (all of them must call it); no-op without torch.distributed."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            total = self.sums.clone()
            torch.distributed.all_reduce(total)
            self.sums = total

    def scales(self) -> tuple[float, float]:
        """``(s_E, s_F)``: sqrt(sum e^2 / sum u^2) for energies and forces (NaN without that label)."""
        energy_error, energy_spread, force_error, force_spread, frames, components = self.sums.tolist()
        energy = scale_from_sums(energy_error, energy_spread) if frames else float("nan")
        forces = scale_from_sums(force_error, force_spread) if components else float("nan")
        return energy, forces


def calibrate_committee(committee: Committee, validation_batches: Iterable, prepare: Callable = lambda b: b) -> None:
    """Set a :class:`~sciml.uncertainty.Committee`'s two scales from ``validation_batches`` (energy and force labels),
    as a training run's validation does: for members trained one by one, outside a joint run."""
    calibration, potential = UncertaintyCalibration(), ForceStressOutput(committee.eval())
    for batch in validation_batches:
        batch = prepare(batch)
        calibration.update(batch, potential(batch))
    committee.set_scales(*calibration.scales())


#: The regularisers tried, each varsigma^2 as a fraction of trace(G) / D; the one with the lowest Gaussian
#: negative log-likelihood of the validation force errors (of the energy errors, where the force uncertainty
#: is the feature density's, which does not depend on it) is kept.
REGULARISER_GRID = tuple(10.0**k for k in range(-10, 1))
#: Mixture components per element of the default force uncertainty, the feature density (in bench_llpr's setting
#: 8 and 16 ranked the errors at 600 K best among 1, 2, 4, 8 and 16 full-covariance components).
DENSITY_COMPONENTS = 8


def fit_last_layer_uncertainty(
    model: nn.Module,
    train_batches: Iterable,
    validation_batches: Iterable,
    prepare: Callable = lambda batch: batch,
    force_samples: int = 0,
    density_components: int | None = None,
) -> LastLayerUncertainty:
    """The LLPR uncertainty of a trained ``model`` (see :mod:`sciml.uncertainty.last_layer`): G = sum g g^T over
    ``train_batches`` (no forces needed), then on ``validation_batches`` (with energy and force labels) the
    regulariser from ``REGULARISER_GRID`` and the two scales, s^2 = sum e^2 / sum u^2 as for a committee.
    The force uncertainty: by default (``density_components`` None, ``force_samples`` 0) the distance of each
    atom's features from the training atoms' under ``DENSITY_COMPONENTS`` mixture components per element
    (fitted to the features of ``train_batches``); ``density_components`` K, with K components (0: the per-atom
    energy rigidity); ``force_samples`` k > 0, the forces of that many last-layer ensemble members (each
    validation batch's force Jacobian dF/d(w, b) gives each regulariser's ensemble; only the per-atom spreads
    are kept). ``prepare`` moves a batch to the model's device and dtype. Returns the fitted wrapper in eval
    mode."""
    if density_components is None:
        density_components = 0 if force_samples else DENSITY_COMPONENTS
    wrapped = LastLayerUncertainty(model, force_samples=force_samples, density_components=density_components).eval()
    size = wrapped.rigidity_factor.shape[0]
    rigidity = torch.zeros(size, size, dtype=torch.float64)
    plain = LastLayerUncertainty(model)  # the model's outputs with the last-layer gradients, nothing fitted
    training_atoms: dict[str, list[torch.Tensor]] = {"features": [], "numbers": []}
    with torch.no_grad():
        for batch in train_batches:
            batch = prepare(batch)
            outputs = plain(batch)
            gradient = outputs["last_layer_gradient"].double().cpu()
            rigidity += gradient.T @ gradient
            if density_components:
                training_atoms["features"].append(outputs["last_layer_features"].double().cpu())
                training_atoms["numbers"].append(batch.numbers.cpu())
    if density_components:
        fit_feature_density(wrapped.feature_density, *(torch.cat(values) for values in training_atoms.values()))
    scale = float(torch.trace(rigidity)) / size
    factors = []  # (G + varsigma^2 I)^-1 = L L^T for each regulariser of the grid
    for fraction in REGULARISER_GRID:
        inverse = torch.linalg.inv(rigidity + fraction * scale * torch.eye(size, dtype=torch.float64))
        factors.append(torch.linalg.cholesky(0.5 * (inverse + inverse.T)))
    directions = [factor @ wrapped.probes().double().cpu() for factor in factors] if force_samples else []
    # the forces, and with force_samples their last-layer Jacobian
    potential = ForceStressOutput(LastLayerJacobian(plain) if force_samples else plain).eval()
    kept: dict[str, list[torch.Tensor]] = {key: [] for key in ("structure", "atom", "energy_error", "force_error")}
    ensemble_spreads: list[list[torch.Tensor]] = [[] for _ in directions]  # per regulariser, (N,) per batch
    distances = []  # (N,) per batch: the feature density's
    for batch in validation_batches:
        batch = prepare(batch)
        outputs = potential(batch)
        kept["structure"].append(outputs["last_layer_gradient"].detach().double().cpu())
        kept["atom"].append(outputs["atom_last_layer_gradient"].detach().double().cpu())
        kept["energy_error"].append((outputs["energy"].detach() - batch.energy).double().cpu())
        kept["force_error"].append((outputs["forces"].detach() - batch.forces).double().cpu())
        if force_samples:  # the batch's Jacobian (N, 3, D) along each regulariser's k directions, then dropped
            jacobian = outputs["last_layer_ensemble_forces"].detach().double().cpu().permute(1, 2, 0)
            for spreads, direction in zip(ensemble_spreads, directions, strict=True):
                spreads.append(ensemble_force_spread(torch.einsum("nad,dk->kna", jacobian, direction)))
        if density_components:
            distance = wrapped.feature_density.distance(outputs["last_layer_features"], batch.numbers)
            distances.append(distance.double().cpu())
    gradients = {"last_layer_gradient": torch.cat(kept["structure"])}
    gradients["atom_last_layer_gradient"] = torch.cat(kept["atom"])
    energy_error, force_error = torch.cat(kept["energy_error"]), torch.cat(kept["force_error"])
    density_spread = torch.cat(distances) if density_components else None  # the same for every regulariser
    best = None
    for index, (fraction, factor) in enumerate(zip(REGULARISER_GRID, factors, strict=True)):
        energy_spread, force_spread = rigidity_spread(gradients, factor)
        if force_samples:
            force_spread = torch.cat(ensemble_spreads[index])
        elif density_components:
            force_spread = density_spread
        alpha_e, alpha_f = scale_factor(energy_error, energy_spread), scale_factor(force_error, force_spread[:, None])
        if density_components:
            nll = gaussian_nll(energy_error, alpha_e * energy_spread)
        else:
            nll = gaussian_nll(force_error, alpha_f * force_spread[:, None])
        if best is None or nll < best[0]:
            best = (nll, fraction * scale, factor, alpha_e, alpha_f)
    _, regulariser, factor, alpha_e, alpha_f = best
    wrapped.rigidity_factor.copy_(factor)
    wrapped.regulariser.fill_(regulariser)
    wrapped.set_scales(alpha_e, alpha_f)
    return wrapped


def gaussian_nll(error: torch.Tensor, sigma: torch.Tensor) -> float:
    """Mean Gaussian negative log-likelihood of ``error`` under ``sigma`` (broadcast), up to a constant."""
    variance = sigma.pow(2).clamp_min(1e-30)
    return float((variance.log() + error.pow(2) / variance).mean())


class LastLayerJacobian(nn.Module):
    """A :class:`~sciml.uncertainty.LastLayerUncertainty`'s outputs with its D per-structure last-layer gradients as
    the ensemble energies (D, B), so that :class:`~sciml.nn.forces.ForceStressOutput` returns, with the forces and
    in the same batched backward pass, ``last_layer_ensemble_forces`` (D, N, 3) = dF/d(w, b) per weight."""

    def __init__(self, wrapped: LastLayerUncertainty) -> None:
        super().__init__()
        self.wrapped = wrapped

    def forward(self, batch) -> dict[str, torch.Tensor]:
        outputs = LastLayerUncertainty.forward(self.wrapped, batch)
        outputs["last_layer_ensemble_energy"] = outputs["last_layer_gradient"].T
        return outputs


def force_jacobian(wrapped: LastLayerUncertainty, batch) -> torch.Tensor:
    """dF/d(w, b) (N, 3, D) of the last layer's weights and bias for every atom of ``batch`` (float64, on the
    CPU): minus the position derivatives of the D per-structure last-layer gradients (:class:`LastLayerJacobian`)."""
    ensemble = ForceStressOutput(LastLayerJacobian(wrapped)).eval()(batch)["last_layer_ensemble_forces"]
    return ensemble.detach().double().cpu().permute(1, 2, 0)
