"""``LastLayerUncertainty``: one trained model's uncertainty from its last layer, at almost no extra cost.

The last-layer prediction rigidity (LLPR; Bigi, Chong, Ceriotti, Grasselli, Mach. Learn.: Sci. Technol. 5,
045018 (2024)): a model whose energy is linear in its last layer's weights, E = sum_i scale (w . h_i + b),
has the energy gradient g = dE/d(w, b) = scale sum_i [h_i, 1] (D = C + 1). With G = sum over training
structures of g g^T, the last layer's posterior covariance is alpha^2 (G + varsigma^2 I)^-1, so

- per structure: sigma_E = alpha_E sqrt(g^T (G + varsigma^2 I)^-1 g) (eV);
- per atom, the local prediction rigidity of its energy (Chong et al., J. Chem. Theory Comput. 19, 8020
  (2023)) with g_i = scale [h_i, 1]: sigma_F,i = alpha_F sqrt(g_i^T (G + varsigma^2 I)^-1 g_i) (eV/Å), a
  proxy for the uncertainty of one force component of atom i, calibrated on force errors.

With ``force_samples = k > 0`` the force uncertainty is instead that of the forces themselves: the LLPR-derived
shallow ensemble (as in metatrain's LLPR) of k last-layer weight perturbations dw_s = L z_s (z_s standard normal,
drawn once from a fixed seed, so the estimate is a deterministic function of the structure), whose energies
dE_s = g . dw_s give force perturbations dF_s = -d(dE_s)/dx by one batched backward pass with the forces:
sigma_F,ia = alpha_F sqrt(mean_s dF_s,ia^2) estimates alpha_F sqrt(J_ia^T (G + varsigma^2 I)^-1 J_ia), the
posterior spread of force component ia (J_ia = dF_ia/d(w, b)); the value per atom is the root mean square over
its three components. It costs k more backward passes, batched into one.

With ``density_components = K > 0`` the force uncertainty is sigma_F,i = alpha_F d_i, the distance of atom i's
features h_i from those of the training atoms of its element under a K-component Gaussian mixture
(:class:`~sciml.uncertainty.feature_density.FeatureDensity`; Zhu et al., J. Chem. Phys. 158, 164111 (2023)): it sees
an atom leave its training environments also where the last layer's posterior does not, and costs one small
mixture evaluation per atom.

G (and, with K, the mixtures) comes from one pass over the training split; varsigma and the two alphas are
fitted on the validation split (:func:`~sciml.uncertainty.fitting.fit_last_layer_uncertainty`). The wrapped
model's predictions are unchanged; the extra cost per call is two (N, D) x (D, D) products (and the ensemble's
backward passes, or the mixtures' N K (D, D) products).
"""

from __future__ import annotations

import torch
from torch import nn

from sciml.nn.checkpoint import build_module, module_spec
from sciml.uncertainty.base import UncertaintyModel
from sciml.uncertainty.feature_density import FeatureDensity


class LastLayerUncertainty(UncertaintyModel):
    """``model`` (an :class:`~sciml.models.E2Former` or any energy model that returns ``last_layer_features``
    and has ``energy_scale``) with the LLPR uncertainty (module docstring). Not fitted until
    :func:`~sciml.uncertainty.fitting.fit_last_layer_uncertainty` sets ``rigidity_factor`` (D, D), the
    Cholesky factor L of (G + varsigma^2 I)^-1 = L L^T, and the scales; the state dict carries them.

    Args:
        model: the trained energy model, or its ``{"class_path", "init_args"}`` spec.
        features: D - 1, the width of ``last_layer_features`` (default: ``model.energy_head[-1].in_features``).
        force_samples: 0, the per-atom energy rigidity as the force uncertainty; k > 0, the spread of the forces
            of a k-member last-layer ensemble drawn from the posterior (module docstring).
        density_components: K > 0, the force uncertainty from the distance of the atom's features to the
            training atoms' (a K-component mixture per element; module docstring); not with ``force_samples``.
    """

    def __init__(
        self, model: nn.Module | dict, features: int | None = None, force_samples: int = 0, density_components: int = 0
    ) -> None:
        if isinstance(model, dict):
            model = build_module(model, "last-layer uncertainty model spec")
        super().__init__(next(model.parameters()).dtype)
        check_force_uncertainty(force_samples, density_components)
        self.model, self.force_samples, self.density_components = model, int(force_samples), int(density_components)
        features = int(features if features is not None else model.energy_head[-1].in_features)
        self.config = {"model": module_spec(model), "features": features, "force_samples": self.force_samples,
                       "density_components": self.density_components}  # fmt: skip
        dtype = next(model.parameters()).dtype
        if self.density_components:
            self.feature_density = FeatureDensity(model.species, features, self.density_components).to(dtype)
        # L with (G + varsigma^2 I)^-1 = L L^T: u = |L^T g| is never negative, also in float32
        self.register_buffer("rigidity_factor", torch.zeros(features + 1, features + 1, dtype=dtype))
        self.register_buffer("regulariser", torch.tensor(float("nan"), dtype=dtype))

    def energy_models(self) -> list[nn.Module]:
        """The one trained model."""
        return [self.model]

    def probes(self) -> torch.Tensor:
        """(D, k) standard normal directions z_s, the same on every call (seed 0, drawn in float64)."""
        size = self.rigidity_factor.shape[0]
        generator = torch.Generator().manual_seed(0)
        probes = torch.randn(size, self.force_samples, generator=generator, dtype=torch.float64)
        return probes.to(self.rigidity_factor)

    def forward(self, batch) -> dict[str, torch.Tensor]:
        """The model's outputs plus the last-layer gradients per atom, ``atom_last_layer_gradient`` (N, D),
        and per structure, ``last_layer_gradient`` (B, D), in eV per unit weight; with ``force_samples`` k,
        the ensemble's energy perturbations ``last_layer_ensemble_energy`` (k, B) in eV, whose position
        derivatives :class:`~sciml.nn.forces.ForceStressOutput` returns as ``last_layer_ensemble_forces``; with
        ``density_components``, each atom's unscaled ``feature_distance`` d_i (N,)."""
        return self.with_uncertainty_inputs(dict(self.model(batch)), batch)

    def with_uncertainty_inputs(self, outputs: dict[str, torch.Tensor], batch) -> dict[str, torch.Tensor]:
        """The outputs of :meth:`forward` from the wrapped model's (``last_layer_features`` among them): what
        an ahead-of-time program of the wrapped model (energy, forces, last-layer features) is completed
        with."""
        hidden = outputs["last_layer_features"]
        per_atom = torch.cat([hidden, torch.ones_like(hidden[:, :1])], dim=1) * self.model.energy_scale
        per_structure = per_atom.new_zeros(batch.cell.shape[0], per_atom.shape[1]).index_add(0, batch.batch, per_atom)
        outputs["atom_last_layer_gradient"], outputs["last_layer_gradient"] = per_atom, per_structure
        if self.force_samples:
            directions = self.rigidity_factor @ self.probes()  # (D, k): L z_s
            outputs["last_layer_ensemble_energy"] = (per_structure @ directions.to(per_structure.dtype)).T
        if self.density_components:
            outputs["feature_distance"] = self.feature_density.distance(hidden, batch.numbers).to(hidden.dtype)
        return outputs

    def spread(self, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Unscaled sigma_E (B,) in eV and sigma_F (N,) in eV/Å (module docstring); the scales, once fitted, make
        them :meth:`uncertainty` (NaN until then)."""
        energy, forces = rigidity_spread(outputs, self.rigidity_factor)
        if self.force_samples:
            forces = ensemble_force_spread(outputs["last_layer_ensemble_forces"])
        elif self.density_components:
            forces = outputs["feature_distance"]
        return energy, forces


def check_force_uncertainty(force_samples: int, density_components: int | None) -> None:
    """Refuse a negative ``force_samples`` or ``density_components``, or both above 0 (None: the default)."""
    if int(force_samples) < 0:
        raise ValueError(f"force_samples must be 0 (energy rigidity) or a number of samples, got {force_samples}")
    if density_components is not None and (int(density_components) < 0 or (density_components and force_samples)):
        raise ValueError(
            f"density_components must be 0 or a number of mixture components, and not with force_samples; got "
            f"{density_components} with force_samples={force_samples}"
        )


def rigidity_spread(outputs: dict[str, torch.Tensor], factor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unscaled sqrt(g^T L L^T g) = |L^T g| per structure (B,) and per atom (N,) for the factor ``L`` (D, D)."""
    structure, atom = outputs["last_layer_gradient"].detach(), outputs["atom_last_layer_gradient"].detach()
    factor = factor.to(structure.dtype)
    return (structure @ factor).norm(dim=1), (atom @ factor).norm(dim=1)


def ensemble_force_spread(ensemble_forces: torch.Tensor) -> torch.Tensor:
    """Unscaled sqrt(mean over samples and the three components of dF^2) per atom (N,) from the ensemble's
    force perturbations ``ensemble_forces`` (k, N, 3)."""
    return ensemble_forces.detach().pow(2).mean(dim=(0, 2)).sqrt()
