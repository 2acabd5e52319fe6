"""Fit a :class:`~sciml.uncertainty.feature_density.FeatureDensity` to the features of the training atoms
(scikit-learn's ``GaussianMixture``, full covariances, EM from a k-means start with a fixed seed)."""

from __future__ import annotations

import math

import torch

from sciml.uncertainty.feature_density import FeatureDensity

#: Atoms per element kept for the fit, a random subset beyond it, so that the fit's time stays bounded.
MAX_ATOMS_PER_ELEMENT = 20_000
#: Training atoms per mixture component and feature; fewer atoms fit fewer components (at least one).
ATOMS_PER_PARAMETER = 2
#: Added to the covariances' diagonal, as a fraction of the element's mean feature variance.
COVARIANCE_REGULARISER = 1e-4


def fit_feature_density(density: FeatureDensity, features: torch.Tensor, numbers: torch.Tensor, seed: int = 0) -> None:
    """Set ``density``'s mixtures from training atoms' ``features`` (N, C) and atomic ``numbers`` (N,): per
    element up to K components (fewer where the element has under ``ATOMS_PER_PARAMETER`` (C + 1) atoms per
    component), an element without atoms left unfitted (its distances infinite)."""
    from sklearn.mixture import GaussianMixture

    features, numbers = features.detach().double().cpu(), numbers.cpu()
    most, width = density.means.shape[1], density.means.shape[2]
    generator = torch.Generator().manual_seed(seed)
    species = torch.nonzero(density.species_index >= 0).flatten().tolist()
    for number in species:
        mixture = int(density.species_index[number])
        sample = features[numbers == number]
        if len(sample) == 0:
            continue
        if len(sample) > MAX_ATOMS_PER_ELEMENT:
            sample = sample[torch.randperm(len(sample), generator=generator)[:MAX_ATOMS_PER_ELEMENT]]
        components = max(1, min(most, len(sample) // (ATOMS_PER_PARAMETER * (width + 1))))
        regulariser = COVARIANCE_REGULARISER * max(float(sample.var(dim=0, correction=0).mean()), 1e-12)
        if len(sample) == 1:  # one atom: a sphere of the regulariser's width about it
            means, factors = sample, torch.eye(width, dtype=torch.float64)[None] / math.sqrt(regulariser)
            weights = torch.ones(1, dtype=torch.float64)
        else:
            gmm = GaussianMixture(components, covariance_type="full", reg_covar=regulariser, random_state=seed)
            gmm.fit(sample.numpy())
            means, factors = torch.from_numpy(gmm.means_), torch.from_numpy(gmm.precisions_cholesky_)
            weights = torch.from_numpy(gmm.weights_)
        log_det = torch.linalg.diagonal(factors).log().sum(-1)
        log_norms = weights.log() + log_det - 0.5 * width * math.log(2 * math.pi)
        density.means[mixture, :components] = means.to(density.means)
        density.precision_factors[mixture, :components] = factors.to(density.means)
        density.log_norms[mixture, :components] = log_norms.to(density.means)
        density.log_peaks[mixture] = float(torch.logsumexp(log_norms, 0))  # N_k(h) <= N_k(mu_k): p(h) <= p_max
