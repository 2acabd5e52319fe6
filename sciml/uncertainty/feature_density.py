"""``FeatureDensity``: how far an atom's learned features lie from those of the training atoms of its element.

A Gaussian mixture per element is fitted to the last-layer features h_i (C,) of the training atoms (Zhu, Xu,
Smidt, Sun, Sha, Wu, J. Chem. Phys. 158, 164111 (2023): the negative log-likelihood of a GMM on a potential's
latent features ranks its force errors like an ensemble does, at the cost of one model). With the mixture's
density p(h) and its largest possible value p_max = sum_k w_k N_k(mu_k) (a bound: p(h) <= p_max), the
atom's distance

    d_i = sqrt(2 (log p_max - log p(h_i)))      (dimensionless, >= 0)

is the Mahalanobis distance to the mean for a single Gaussian, and for a mixture grows as the features move
away from every component. A calibrated force uncertainty is alpha d_i
(:class:`~sciml.uncertainty.LastLayerUncertainty`).
An atom whose element had no training atoms is at infinite distance.
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: Stands in for log(0) in the log weight of an unused mixture component (finite, so no NaN in logsumexp).
UNUSED_COMPONENT = -1e30


class FeatureDensity(nn.Module):
    """Per-element Gaussian mixtures over ``features``-wide atom features, ``components`` at most per element;
    unfitted (every distance infinite) until :func:`~sciml.uncertainty.density_fit.fit_feature_density` sets
    the buffers.

    Args:
        species: the model's atomic numbers, one mixture for each.
        features: C, the width of the features.
        components: K, the most mixture components of one element (fewer are left unused).

    Shape:
        ``distance(features (N, C), numbers (N,))`` -> (N,), dimensionless.
    """

    def __init__(self, species: list[int], features: int, components: int) -> None:
        super().__init__()
        if components < 1:
            raise ValueError(f"a feature density needs at least one component, got {components}")
        count = len(species)
        index = torch.full((max(species) + 1,), -1, dtype=torch.int64)
        index[torch.tensor(species)] = torch.arange(count)
        self.register_buffer("species_index", index)  # atomic number -> mixture
        self.register_buffer("means", torch.zeros(count, components, features))
        # P_k with P_k P_k^T = Sigma_k^-1: |(h - mu_k) P_k|^2 is the Mahalanobis distance to component k
        self.register_buffer("precision_factors", torch.eye(features).repeat(count, components, 1, 1))
        # log w_k + log det P_k - C/2 log 2 pi, the log density at mu_k of the weighted component
        self.register_buffer("log_norms", torch.full((count, components), UNUSED_COMPONENT))
        self.register_buffer("log_peaks", torch.full((count,), math.inf))  # log p_max per element

    def log_density(self, features: torch.Tensor, mixture: int) -> torch.Tensor:
        """log p(h) (M,) of ``features`` (M, C) under the mixture of element number ``mixture``."""
        offsets = features[:, None, :] - self.means[mixture]  # (M, K, C)
        whitened = torch.einsum("mkc,kcd->mkd", offsets, self.precision_factors[mixture])
        return torch.logsumexp(self.log_norms[mixture] - 0.5 * whitened.pow(2).sum(-1), dim=1)

    def distance(self, features: torch.Tensor, numbers: torch.Tensor) -> torch.Tensor:
        """d_i (N,) of each atom (module docstring); features are detached."""
        features = features.detach().to(self.means.dtype)
        mixtures = self.species_index[numbers]
        distance = features.new_full((features.shape[0],), math.inf)
        for mixture in mixtures.unique().tolist():
            atoms = mixtures == mixture
            if math.isfinite(float(self.log_peaks[mixture])):
                gap = self.log_peaks[mixture] - self.log_density(features[atoms], mixture)
                distance[atoms] = (2 * gap).clamp_min(0).sqrt()
        return distance
