"""The feature density behind the default single-model force uncertainty: its distance is the Mahalanobis
distance for one Gaussian and follows scikit-learn's log-likelihood for a mixture (float64, to 1e-9), never
negative, infinite for an element without training atoms; the force uncertainty it gives is invariant under
rotations, calibrated on the validation split, kept by the checkpoint, and grows away from the training data."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from sciml.calculators import SciMLCalculator
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.nn.forces import ForceStressOutput
from sciml.testing import graph_batch
from sciml.training.callbacks import FitLastLayerUncertainty
from sciml.uncertainty import LastLayerUncertainty
from sciml.uncertainty.density_fit import COVARIANCE_REGULARISER, fit_feature_density
from sciml.uncertainty.feature_density import FeatureDensity
from sciml.uncertainty.fitting import fit_last_layer_uncertainty


def correlated_features(count: int, width: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    mixing = torch.randn(width, width, generator=generator, dtype=torch.float64)
    return torch.randn(count, width, generator=generator, dtype=torch.float64) @ mixing + 3.0


def test_one_component_gives_the_mahalanobis_distance_and_an_unseen_element_is_infinitely_far():
    features = correlated_features(400, 5, seed=0)
    density = FeatureDensity([1, 8], features=5, components=1).double()
    fit_feature_density(density, features, torch.full((400,), 8))
    sample = features.numpy()
    covariance = np.cov(sample.T, bias=True)
    covariance += COVARIANCE_REGULARISER * np.mean(np.var(sample, axis=0)) * np.eye(5)
    probe = correlated_features(50, 5, seed=1)
    offsets = probe.numpy() - sample.mean(0)
    expected = np.sqrt(np.einsum("ij,ij->i", offsets @ np.linalg.inv(covariance), offsets))
    distance = density.distance(probe, torch.full((50,), 8))
    np.testing.assert_allclose(distance.numpy(), expected, rtol=1e-9)
    assert torch.isinf(density.distance(probe[:3], torch.tensor([1, 1, 8]))[:2]).all()  # no hydrogen trained


def test_a_mixture_s_distance_follows_its_log_likelihood_and_is_never_negative():
    from sklearn.mixture import GaussianMixture

    features = torch.cat([correlated_features(600, 4, seed=2), correlated_features(600, 4, seed=3) - 6.0])
    density = FeatureDensity([6], features=4, components=3).double()
    fit_feature_density(density, features, torch.full((1200,), 6))
    probe = torch.cat([correlated_features(40, 4, seed=4) - 3.0, density.means[0]])
    regulariser = COVARIANCE_REGULARISER * float(features.var(dim=0, correction=0).mean())
    reference = GaussianMixture(3, covariance_type="full", reg_covar=regulariser, random_state=0).fit(features.numpy())
    log_peak = np.log(np.sum(reference.weights_ / np.sqrt(np.linalg.det(2 * np.pi * reference.covariances_))))
    expected = np.sqrt(2 * (log_peak - reference.score_samples(probe.numpy())))
    distance = density.distance(probe, torch.full((43,), 6))
    np.testing.assert_allclose(distance.numpy(), expected, rtol=1e-9)
    assert float(distance.min()) >= 0 and float(distance[:40].min()) > float(distance[40:].max())


@pytest.fixture(scope="module")
def density_fitted(committee_run):
    """The committee run's first member with the default last-layer fit (the feature density), and the data."""
    module, data, _ = committee_run
    member = copy.deepcopy(module.evaluation_model.members[0])
    return fit_last_layer_uncertainty(member, data.train_dataloader(), data.val_dataloader()), data


def test_the_default_fit_is_the_density_calibrated_on_the_validation_split(density_fitted):
    wrapped, data = density_fitted
    assert wrapped.density_components == 8 and wrapped.force_samples == 0 and wrapped.calibrated
    squared_errors = predicted = 0.0
    for batch in data.val_dataloader():
        outputs = ForceStressOutput(wrapped).eval()(batch)
        sigma_f = wrapped.uncertainty(outputs)[1]
        assert torch.isfinite(sigma_f).all() and float(sigma_f.min()) >= 0
        squared_errors += float(((outputs["forces"] - batch.forces) ** 2).sum())
        predicted += float(3 * (sigma_f**2).sum())
    assert predicted == pytest.approx(squared_errors, rel=1e-9)


def test_the_density_s_uncertainty_is_invariant_kept_by_the_checkpoint_and_grows_away(density_fitted, tmp_path,
                                                                                      molecule_frames):  # fmt: skip
    wrapped, _ = density_fitted
    calculator = SciMLCalculator.from_checkpoint(write_model_checkpoint(wrapped, tmp_path / "d.ckpt"), dtype="float64")
    assert calculator.model.density_components == 8
    atoms = molecule_frames[0].copy()
    atoms.calc = calculator
    atoms.get_forces()
    sigma = calculator.results["forces_uncertainty"].copy()
    expected = wrapped.uncertainty(ForceStressOutput(wrapped).eval()(graph_batch([atoms], wrapped.cutoff)))[1]
    np.testing.assert_allclose(sigma, expected.detach().numpy(), rtol=1e-9)  # the checkpoint keeps the mixtures
    rotated = atoms.copy()
    rotated.positions = Rotation.random(random_state=3).apply(atoms.positions - atoms.positions.mean(0))
    rotated.calc = calculator
    rotated.get_forces()
    np.testing.assert_allclose(calculator.results["forces_uncertainty"], sigma, rtol=1e-9)
    squeezed = atoms.copy()  # bonds 25 % shorter than any training frame's
    squeezed.positions = atoms.positions.mean(0) + 0.75 * (atoms.positions - atoms.positions.mean(0))
    squeezed.calc = calculator
    squeezed.get_forces()
    assert calculator.results["forces_uncertainty"].max() > 2 * sigma.max()


def test_the_density_and_the_ensemble_exclude_each_other(committee_run):
    member = committee_run[0].evaluation_model.members[0]
    for make in (lambda: LastLayerUncertainty(member, force_samples=2, density_components=4),
                 lambda: FitLastLayerUncertainty(force_samples=2, density_components=4)):  # fmt: skip
        with pytest.raises(ValueError, match="not with force_samples"):
            make()
    with pytest.raises(ValueError, match="density_components must be 0"):
        LastLayerUncertainty(member, density_components=-1)
    assert LastLayerUncertainty(member, force_samples=2).density_components == 0  # the ensemble alone
