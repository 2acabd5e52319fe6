"""Overdamped Langevin dynamics in the Prinz potential, dX = -U'(X) dt + sqrt(2 kT) dW (gamma = 1).

U(x) = 4 (x^8 + 0.8 e^{-80 x^2} + 0.2 e^{-80 (x - 0.5)^2} + 0.5 e^{-40 (x + 0.5)^2}) (deeptime's form).
The generator is discretised by the square-root approximation (SqRA) on a uniform grid: jump rates
Q_{i,i+1} = (kT / h^2) exp(-(U_{i+1} - U_i) / (2 kT)). Its eigenvalues converge to the generator's
(0, -1.20, -7.89, -15.36, -82.08, ... for kT = 1). ``simulate`` samples the discretised process exactly
(transition matrix exp(Q dt)), so the data and the reference spectrum describe the same Markov chain.
Reversible: eigenvalues = singular values = exp(lambda lagtime dt).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from scipy.linalg import eigh_tridiagonal

from sciml.data.systems.base import StochasticSystem


def prinz_potential(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return 4 * (
        x**8 + 0.8 * np.exp(-80 * x**2) + 0.2 * np.exp(-80 * (x - 0.5) ** 2) + 0.5 * np.exp(-40 * (x + 0.5) ** 2)
    )


class PrinzPotential(StochasticSystem):
    """Args: dt: sampling interval; kT: temperature; n_grid: SqRA grid points on [-1.5, 1.5]."""

    def __init__(self, dt: float = 0.1, kT: float = 1.0, n_grid: int = 3000) -> None:
        self.dt, self.kT, self.n_grid = float(dt), float(kT), int(n_grid)
        self.grid = np.linspace(-1.5, 1.5, self.n_grid)

    @cached_property
    def _spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigenpairs of the symmetrised SqRA generator, eigenvalues descending (first is 0)."""
        h = self.grid[1] - self.grid[0]
        u = prinz_potential(self.grid) / self.kT
        # symmetrised rate matrix D^{1/2} Q D^{-1/2}: off-diagonal kT/h^2, diagonal minus row sums of Q
        off = np.full(self.n_grid - 1, self.kT / h**2)
        up = self.kT / h**2 * np.exp(-(u[1:] - u[:-1]) / 2)
        down = self.kT / h**2 * np.exp(-(u[:-1] - u[1:]) / 2)
        diagonal = -(np.concatenate([up, [0.0]]) + np.concatenate([[0.0], down]))
        values, vectors = eigh_tridiagonal(diagonal, off)
        return values[::-1], vectors[:, ::-1]

    def generator_eigenvalues(self, k: int = 8) -> np.ndarray:
        return self._spectrum[0][:k]

    def eigenvalues(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        return np.exp(self.generator_eigenvalues(k) * lagtime * self.dt).astype(complex)

    def singular_values(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        return np.exp(self.generator_eigenvalues(k) * lagtime * self.dt)

    @cached_property
    def stationary(self) -> np.ndarray:
        weights = np.exp(-prinz_potential(self.grid) / self.kT)
        return weights / weights.sum()

    @cached_property
    def _transition_cdf(self) -> np.ndarray:
        values, vectors = self._spectrum
        symmetric = (vectors * np.exp(values * self.dt)) @ vectors.T  # D^{1/2} P D^{-1/2}
        root = np.sqrt(self.stationary)
        transition = np.clip(symmetric * (root[None, :] / root[:, None]), 0, None)
        cdf = np.cumsum(transition, axis=1)
        return cdf / cdf[:, -1:]

    def simulate(self, n_steps: int, seed: int = 0, n_trajectories: int = 1) -> np.ndarray:
        rng = np.random.default_rng(seed)
        state = rng.choice(self.n_grid, size=n_trajectories, p=self.stationary)
        cdf = self._transition_cdf
        out = np.empty((n_trajectories, n_steps, 1))
        for t in range(n_steps):
            out[:, t, 0] = self.grid[state]
            u = rng.random(n_trajectories)
            state = np.minimum((cdf[state] < u[:, None]).sum(axis=1), self.n_grid - 1)
        return out
