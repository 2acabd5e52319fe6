"""Linear Gaussian systems: the Ornstein-Uhlenbeck process and the (non-normal) Gaussian AR(1).

For x' = M x + eps, eps ~ N(0, Q), stationary covariance Sigma (Sigma = M Sigma M^T + Q):
eigenvalues of the Koopman operator are the products prod_i mu_i^{n_i} of mu = eig(M) (Hermite
polynomials of degree n), singular values the products prod_i rho_i^{n_i} of the canonical correlations
rho = singular values of Sigma^{1/2} M^T Sigma^{-1/2} (Lancaster / Mehler). With lagtime tau, M -> M^tau.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_discrete_lyapunov, sqrtm

from sciml.data.systems.base import StochasticSystem, top_by_modulus


class GaussianAR1(StochasticSystem):
    """x_{t+1} = M x_t + eps_t, eps_t ~ N(0, Q). Non-normal when M Sigma != Sigma M^T.

    Args:
        M: (d, d) transition matrix, spectral radius < 1.
        Q: (d, d) noise covariance.
    """

    def __init__(self, M: list[list[float]], Q: list[list[float]]) -> None:
        self.M, self.Q = np.asarray(M, dtype=float), np.asarray(Q, dtype=float)
        if np.max(np.abs(np.linalg.eigvals(self.M))) >= 1:
            raise ValueError("GaussianAR1 needs a transition matrix M with spectral radius < 1")
        self.covariance = solve_discrete_lyapunov(self.M, self.Q)

    @property
    def dim(self) -> int:
        return self.M.shape[0]

    def simulate(self, n_steps: int, seed: int = 0, n_trajectories: int = 1) -> np.ndarray:
        rng = np.random.default_rng(seed)
        noise_factor = np.linalg.cholesky(self.Q)
        x = rng.standard_normal((n_trajectories, self.dim)) @ np.linalg.cholesky(self.covariance).T
        out = np.empty((n_trajectories, n_steps, self.dim))
        for t in range(n_steps):
            out[:, t] = x
            x = x @ self.M.T + rng.standard_normal((n_trajectories, self.dim)) @ noise_factor.T
        return out

    def canonical_correlations(self, lagtime: int = 1) -> np.ndarray:
        root = np.real(sqrtm(self.covariance))
        coupling = root @ np.linalg.matrix_power(self.M, lagtime).T @ np.linalg.inv(root)
        return np.linalg.svd(coupling, compute_uv=False)

    def singular_values(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        return np.real(top_by_modulus(_products(self.canonical_correlations(lagtime), k), k))

    def eigenvalues(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        return top_by_modulus(_products(np.linalg.eigvals(np.linalg.matrix_power(self.M, lagtime)), k), k)


class OrnsteinUhlenbeck(GaussianAR1):
    """dX_i = -theta_i X_i dt + sigma_i dW_i, sampled exactly every ``dt`` (independent coordinates).

    Singular values = eigenvalues = exp(-lagtime dt sum_i n_i theta_i); the singular functions are products of
    normalised Hermite polynomials He_n(x_i / s_i) / sqrt(n!), s_i^2 = sigma_i^2 / (2 theta_i).

    Args:
        theta: rates, one per dimension (a float for 1-D).
        sigma: noise amplitudes, same shape as theta.
        dt: sampling interval (time units).
    """

    def __init__(self, theta: float | list[float] = 1.0, sigma: float | list[float] = 2**0.5, dt: float = 0.5):
        self.theta = np.atleast_1d(np.asarray(theta, dtype=float))
        self.sigma = np.broadcast_to(np.asarray(sigma, dtype=float), self.theta.shape).copy()
        self.dt = float(dt)
        decay = np.exp(-self.theta * self.dt)
        self.stationary_std = self.sigma / np.sqrt(2 * self.theta)
        super().__init__(np.diag(decay), np.diag(self.stationary_std**2 * (1 - decay**2)))


def _products(roots: np.ndarray, k: int) -> np.ndarray:
    """All prod_i roots_i^{n_i} with total degree sum n_i <= k - 1.

    With |roots| < 1 the top-k products by modulus form a downward-closed set of multi-indices, so
    their total degree is at most k - 1 and this list contains them.
    """
    terms = [(1.0 + 0j, 0)]  # (product, total degree)
    for root in np.asarray(roots, dtype=complex):
        terms = [(value * root**n, degree + n) for value, degree in terms for n in range(k - degree)]
    return np.asarray([value for value, _ in terms])
