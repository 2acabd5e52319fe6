"""Exact-reference systems: documented spectra, and agreement with Monte-Carlo estimates from their own
trajectories (independent of the closed forms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermeval
from scipy.linalg import solve_discrete_lyapunov

from sciml.data.systems import GaussianAR1, NoisyLogisticMap, OrnsteinUhlenbeck, PrinzPotential


def cca_singular_values(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Canonical correlations between feature blocks (uncentred: the constant must be in both)."""

    def inv_sqrt(c):
        w, v = np.linalg.eigh(c)
        keep = w > 1e-10 * w.max()
        return (v[:, keep] / np.sqrt(w[keep])) @ v[:, keep].T

    n = left.shape[0]
    whitened = inv_sqrt(left.T @ left / n) @ (left.T @ right / n) @ inv_sqrt(right.T @ right / n)
    return np.linalg.svd(whitened, compute_uv=False)


def pairs(states: np.ndarray, lagtime: int = 1) -> tuple[np.ndarray, np.ndarray]:
    return states[:, :-lagtime].reshape(-1, states.shape[-1]), states[:, lagtime:].reshape(-1, states.shape[-1])


def test_ou_hermite_lag_correlations_match_exp_minus_n_theta_tau():
    system = OrnsteinUhlenbeck(theta=1.0, sigma=math.sqrt(2), dt=0.5)
    np.testing.assert_allclose(system.singular_values(1, 5), np.exp(-0.5 * np.arange(5)), rtol=1e-12)
    np.testing.assert_allclose(system.eigenvalues(2, 3).real, np.exp(-1.0 * np.arange(3)), rtol=1e-12)
    x, y = pairs(system.simulate(1000, seed=0, n_trajectories=300))
    s = system.stationary_std[0]
    for n in range(1, 5):
        coefficients = np.eye(n + 1)[n]
        estimate = np.mean(hermeval(x[:, 0] / s, coefficients) * hermeval(y[:, 0] / s, coefficients)) / math.factorial(
            n
        )
        assert abs(estimate - np.exp(-0.5 * n)) < 0.02 * (n + 1), (n, estimate)


def test_anisotropic_ou_orders_mixed_modes():
    system = OrnsteinUhlenbeck(theta=[1.0, 2.5], sigma=[1.0, 0.5], dt=0.2)
    rates = sorted(n1 * 1.0 + n2 * 2.5 for n1 in range(8) for n2 in range(8))[:6]
    np.testing.assert_allclose(system.singular_values(1, 6), np.exp(-0.2 * np.array(rates)), rtol=1e-12)


def polynomial_features(x: np.ndarray, degree: int = 3) -> np.ndarray:
    columns = [x[:, 0] ** a * x[:, 1] ** b for a in range(degree + 1) for b in range(degree + 1 - a)]
    return np.stack(columns, 1)


def test_non_normal_ar1_singular_values_differ_from_eigenvalues():
    m, q = np.array([[0.8, 0.5], [0.0, 0.5]]), np.array([[0.3, 0.0], [0.0, 0.3]])
    system = GaussianAR1(M=m, Q=q)
    # independently of the class: Sigma from the Lyapunov equation, C01 = Sigma M^T, Cholesky whitening
    covariance = solve_discrete_lyapunov(m, q)
    whiten = np.linalg.inv(np.linalg.cholesky(covariance))
    rho = np.linalg.svd(whiten @ covariance @ m.T @ whiten.T, compute_uv=False)
    np.testing.assert_allclose(system.canonical_correlations(), rho, rtol=1e-10)
    np.testing.assert_allclose(system.singular_values(1, 4), rho[0] ** np.arange(4), rtol=1e-10)  # rho1^3 > rho2
    assert rho[0] ** 3 > rho[1]
    eigenvalues = sorted((0.8**i * 0.5**j for i in range(6) for j in range(6)), reverse=True)[:5]
    np.testing.assert_allclose(system.eigenvalues(1, 5).real, eigenvalues, atol=1e-12)
    x, y = pairs(system.simulate(2000, seed=1, n_trajectories=200))
    fx, fy = polynomial_features(x), polynomial_features(y)
    np.testing.assert_allclose(cca_singular_values(fx, fy)[:4], system.singular_values(1, 4), atol=0.02)
    edmd = np.linalg.lstsq(fx, fy, rcond=None)[0]  # polynomials of degree <= 3 are Koopman-invariant
    learned = np.sort(np.abs(np.linalg.eigvals(edmd)))[::-1][:5]
    np.testing.assert_allclose(learned, eigenvalues, atol=0.02)


def test_logistic_map_reference_numbers_and_monte_carlo():
    system = NoisyLogisticMap()
    eigenvalues = system.eigenvalues(1, 5)
    np.testing.assert_allclose(eigenvalues[:3], [1, -0.193338 + 0.190943j, -0.193338 - 0.190943j], atol=1e-6)
    sigma = system.singular_values(1, 21)
    np.testing.assert_allclose(sigma[:5], [1, 0.923240, 0.892266, 0.696421, 0.657337], atol=1e-6)
    assert abs((sigma**2).sum() - 4.0105) < 1e-3
    grid = np.linspace(0, 1, 2001)
    assert 0.75 < system.invariant_density(grid).min() and system.invariant_density(grid).max() < 1.74
    x, y = pairs(system.simulate(4000, seed=2, n_trajectories=25))
    estimate = cca_singular_values(system.left_features(x[:, 0]), system.right_features(y[:, 0]))
    np.testing.assert_allclose(estimate[:5], sigma[:5], atol=0.02)
    histogram, _ = np.histogram(x[:, 0], bins=20, range=(0, 1), density=True)
    centres = (np.arange(20) + 0.5) / 20
    np.testing.assert_allclose(histogram, system.invariant_density(centres), rtol=0.1)


def test_prinz_generator_spectrum_and_markov_state_estimate():
    system = PrinzPotential(dt=0.1)
    np.testing.assert_allclose(
        system.generator_eigenvalues(8),
        [0, -1.20, -7.89, -15.36, -82.08, -94.93, -132.62, -144.39],
        atol=0.006,
    )
    states = system.simulate(1500, seed=3, n_trajectories=200)
    bins = np.digitize(states[..., 0], np.linspace(-1.2, 1.2, 40))
    counts = np.zeros((41, 41))
    np.add.at(counts, (bins[:, :-1].ravel(), bins[:, 1:].ravel()), 1)
    counts = counts[counts.sum(1) > 0][:, counts.sum(1) > 0]
    counts = counts + counts.T  # reversible estimate
    transition = counts / counts.sum(1, keepdims=True)
    estimate = np.sort(np.linalg.eigvals(transition).real)[::-1][:2]
    np.testing.assert_allclose(estimate, system.singular_values(1, 2), atol=0.02)


def test_ar1_rejects_unstable_transition():
    with pytest.raises(ValueError, match="spectral radius"):
        GaussianAR1(M=[[1.1]], Q=[[1.0]])
