"""Kinetics tools on exact systems. OU (theta 1, stationary std 1, dt 0.5): the lag comes from the data (a
module built without lagtime gets it, a disagreeing one is refused), implied timescales stay at
1 / (n theta) at every lag with the basis fixed, and the Chapman-Kolmogorov test passes for an exact basis
and fails for one that cannot represent the observable. Non-normal Gaussian AR(1): backward forecasts,
Koopman modes and left eigenfunctions."""

from __future__ import annotations

import math

import pytest
import torch

from sciml.data import ArrayDataModule
from sciml.data.systems import GaussianAR1, OrnsteinUhlenbeck
from sciml.koopman import KoopmanEstimator, MLPEncoder
from sciml.koopman.kinetics import chapman_kolmogorov, implied_timescales, lagged_pairs
from sciml.training import KoopmanModule
from tests.koopman.test_estimator import HermiteFeatures, Monomials

SYSTEM = OrnsteinUhlenbeck(theta=1.0, sigma=math.sqrt(2.0), dt=0.5)


@pytest.fixture(scope="module")
def trajectory() -> torch.Tensor:
    return torch.as_tensor(SYSTEM.simulate(100_000, seed=3)[0], dtype=torch.float64)


def test_estimator_takes_the_lag_from_the_data_and_refuses_a_disagreeing_module():
    data = ArrayDataModule(system=SYSTEM, n_steps=3000, lagtime=2, batch_size=256)
    torch.manual_seed(0)
    module = KoopmanModule(MLPEncoder(1, 3, hidden=(16,)))  # built in Python without lagtime
    estimator = KoopmanEstimator.from_module(module).fit(data)
    assert estimator.lagtime == 2
    modulus = estimator.eigenvalues().abs()[1]
    assert float(estimator.timescales(0.5)[1]) == pytest.approx(-2 * 0.5 / math.log(modulus), rel=1e-12)
    with pytest.raises(ValueError, match="lagtime is 3 frames but the data pairs frames 2 apart"):
        KoopmanEstimator.from_module(KoopmanModule(MLPEncoder(1, 3, hidden=(16,)), lagtime=3)).fit(data)


def test_implied_timescales_are_flat_in_the_lag_for_an_exact_basis(trajectory):
    estimator = KoopmanEstimator(HermiteFeatures(1.0, degree=3)).fit(lagged_pairs(trajectory, 1))
    lags = [1, 2, 3]
    timescales = implied_timescales(estimator, lambda lag: lagged_pairs(trajectory, lag), lags, time_step=0.5)
    assert timescales.shape == (3, 4) and (timescales[:, 0] > 1e5).all()  # the constant function
    exact = torch.tensor([1.0, 0.5], dtype=torch.float64)  # 1 / (n theta), n = 1, 2
    for row in timescales:
        assert torch.allclose(row[1:3], exact, rtol=0.05), timescales


class EvenOnly(torch.nn.Module):
    """x^2 - 1 only: cannot represent E[x_t | x_0], which is odd."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x**2 - 1


def test_chapman_kolmogorov_passes_for_an_exact_basis_and_fails_otherwise(trajectory):
    data_at = lambda lag: lagged_pairs(trajectory, lag)  # noqa: E731
    observables = {"x": lambda x: x[:, 0], "x>0": lambda x: (x[:, 0] > 0).double()}
    weights = {"all": lambda x: torch.ones(len(x), dtype=torch.float64), "x>0": lambda x: (x[:, 0] > 0).double()}
    exact = KoopmanEstimator(HermiteFeatures(1.0, degree=3)).fit(data_at(1))
    test = chapman_kolmogorov(exact, data_at, observables, steps=3, weights=weights, tolerance=0.03)
    assert test.predicted.shape == (3, 2, 2) and test.passed, test.summary()
    # E[x_{n lag} | x_0 > 0] = exp(-n theta dt) E[x | x > 0] = exp(-n / 2) sqrt(2 / pi)
    truth = torch.exp(-0.5 * torch.arange(1, 4, dtype=torch.float64)) * math.sqrt(2 / math.pi)
    assert torch.allclose(test.estimated[:, 1, 0], truth, atol=0.02)
    wrong = KoopmanEstimator(EvenOnly()).fit(data_at(1))
    failed = chapman_kolmogorov(wrong, data_at, observables, steps=3, weights=weights, tolerance=0.03)
    assert not failed.passed and "FAILED" in failed.summary() and "weight 'x>0'" in failed.summary()


def test_backward_forecasts_modes_and_left_eigenfunctions_on_the_non_normal_ar1():
    """x' = M x + noise (Gaussian, stationary covariance C): E[x_t | x_{t + n}] = (C M^T C^-1)^n x_{t + n}; the
    Koopman modes reproduce predict(); left eigenfunctions are biorthogonal to the right ones and the
    lambda = 0.8 one is the linear eigenfunction of the backward operator."""
    system = GaussianAR1(M=[[0.8, 0.5], [0.0, 0.5]], Q=[[0.3, 0.0], [0.0, 0.3]])
    states = torch.as_tensor(system.simulate(200_000, seed=1)[0], dtype=torch.float64)
    estimator = KoopmanEstimator(Monomials(3)).fit((states[:-1], states[1:]))
    x = torch.tensor([[1.0, -0.5], [0.2, 0.7]], dtype=torch.float64)
    covariance, matrix = (torch.tensor(a, dtype=torch.float64) for a in (system.covariance, system.M))
    backward = covariance @ matrix.T @ torch.linalg.inv(covariance)
    truth = torch.stack([x @ torch.linalg.matrix_power(backward, n).T for n in (1, 2)], dim=1)
    assert torch.allclose(estimator.predict_backward(x, steps=2), truth, atol=0.03)
    assert not torch.allclose(backward, matrix, atol=0.1)  # the backward operator is not the forward one
    xi, values, modes = estimator.eigenfunctions(x), estimator.eigenvalues(), estimator.koopman_modes()
    for n in (1, 2, 3):
        via_modes = ((xi * values ** (n - 1)) @ modes).real
        torch.testing.assert_close(via_modes, estimator.predict(x, n)[:, -1], rtol=0, atol=1e-9)
    # biorthogonal to the right eigenfunctions over the data: <eta_i, xi_j> = u_i^T K w_j = lambda_j delta_ij
    pairing = estimator.left_eigenfunctions(states).T @ estimator.eigenfunctions(states) / len(states)
    assert torch.allclose(pairing[:4, :4], torch.diag(values[:4]), atol=0.02), pairing[:4, :4]
    # the lambda = 0.8 left eigenfunction is linear, b^T x with b^T B = 0.8 b^T (B the backward matrix)
    eigenvalues, vectors = torch.linalg.eig(backward.T)
    b = vectors[:, torch.argmin((eigenvalues - 0.8).abs())].real
    eta = estimator.left_eigenfunctions(states[:20_000])[:, 1].real
    assert abs(torch.corrcoef(torch.stack([eta, states[:20_000] @ b]))[0, 1]) > 0.99
