"""Noisy logistic map x' = (r x (1 - x) + xi) mod 1, xi with density ∝ cos^N(pi xi) on [-1/2, 1/2].

The transition kernel is p(y | x) = sum_{i=0}^{N} beta_i(y) beta_i(T x), T x = r x (1 - x), with
beta_i(y) = sqrt(C(N, i) c_N) sin^{N-i}(pi y) cos^i(pi y), c_N = pi / B(N/2 + 1/2, 1/2). The Koopman
operator has rank N + 1: on span{alpha_i = beta_i o T} it acts as P_ij = int_0^1 beta_i beta_j(T y) dy,
whose eigenvalues are the Koopman eigenvalues. Its singular values in L2(pi) are the square roots of
eig(G_alpha G_beta), with Gram matrices of alpha_i and beta_i / pi in L2(pi). Integrals use the
midpoint rule on a fine grid (the integrands are smooth and periodic, so it converges fast).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from scipy.special import beta as beta_function
from scipy.special import comb

from sciml.data.systems.base import StochasticSystem, top_by_modulus


class NoisyLogisticMap(StochasticSystem):
    """Args: r: map parameter (4 = chaotic); N: noise exponent (even); grid: quadrature points."""

    def __init__(self, r: float = 4.0, N: int = 20, grid: int = 20_000) -> None:
        self.r, self.N, self.grid = float(r), int(N), int(grid)
        self.dt = 1.0

    def map(self, x: np.ndarray) -> np.ndarray:
        return self.r * x * (1 - x)

    def basis(self, y: np.ndarray) -> np.ndarray:
        """beta_i(y), shape (len(y), N + 1)."""
        i = np.arange(self.N + 1)
        scale = np.sqrt(comb(self.N, i) * np.pi / beta_function(self.N / 2 + 0.5, 0.5))
        y = np.asarray(y)[:, None]
        return scale * np.sin(np.pi * y) ** (self.N - i) * np.cos(np.pi * y) ** i

    def left_features(self, x: np.ndarray) -> np.ndarray:
        """alpha_i(x) = beta_i(T x): a basis of the range of K (and of the left singular functions)."""
        return self.basis(self.map(x))

    def right_features(self, y: np.ndarray) -> np.ndarray:
        """beta_i(y) / pi(y): a basis of the right singular functions."""
        return self.basis(y) / self.invariant_density(y)[:, None]

    @cached_property
    def _nodes(self) -> np.ndarray:
        return (np.arange(self.grid) + 0.5) / self.grid

    @cached_property
    def transfer_matrix(self) -> np.ndarray:
        """The matrix P of the Koopman operator on span{alpha_j}, ``P_ij = int beta_i(y) beta_j(T y) dy`` and
        ``K alpha_j = sum_i P_ij alpha_i``."""
        y = self._nodes
        return self.basis(y).T @ self.left_features(y) / self.grid

    @cached_property
    def _density_coefficients(self) -> np.ndarray:
        values, vectors = np.linalg.eig(self.transfer_matrix.T)
        c = np.real(vectors[:, np.argmin(np.abs(values - 1))])
        return c / (self.basis(self._nodes) @ c).mean()

    def invariant_density(self, y: np.ndarray) -> np.ndarray:
        """pi(y) = sum_i c_i beta_i(y), with P^T c = c and int pi = 1."""
        return self.basis(y) @ self._density_coefficients

    def eigenvalues(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        return top_by_modulus(np.linalg.eigvals(self.transfer_matrix) ** lagtime, k)

    def singular_values(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        if lagtime != 1:
            raise NotImplementedError("exact singular values are implemented for lagtime 1 (one map step)")
        y = self._nodes
        density = self.invariant_density(y)
        alpha, beta = self.left_features(y), self.basis(y)
        gram_alpha = alpha.T @ (alpha * density[:, None]) / self.grid
        gram_beta = beta.T @ (beta / density[:, None]) / self.grid
        squared = np.sort(np.real(np.linalg.eigvals(gram_alpha @ gram_beta)))[::-1]
        return np.sqrt(np.clip(squared[:k], 0, None))

    def sample_noise(self, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
        """xi ∝ cos^N(pi xi) on [-1/2, 1/2], by inverting the tabulated CDF."""
        xi = self._nodes - 0.5
        cdf = np.concatenate([[0.0], np.cumsum(np.cos(np.pi * xi) ** self.N)])
        cdf /= cdf[-1]
        edges = np.linspace(-0.5, 0.5, self.grid + 1)
        return np.interp(rng.random(size), cdf, edges)

    def simulate(self, n_steps: int, seed: int = 0, n_trajectories: int = 1) -> np.ndarray:
        rng = np.random.default_rng(seed)
        x = rng.random(n_trajectories)
        noise = self.sample_noise(rng, (100 + n_steps, n_trajectories))  # iid, independent of the state
        for t in range(100):  # burn-in towards the invariant law
            x = np.mod(self.map(x) + noise[t], 1.0)
        out = np.empty((n_trajectories, n_steps, 1))
        for t in range(n_steps):
            out[:, t, 0] = x
            x = np.mod(self.map(x) + noise[100 + t], 1.0)
        return out
