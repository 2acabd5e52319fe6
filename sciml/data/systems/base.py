"""Common interface of the stochastic systems with exact Koopman spectra."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class StochasticSystem(ABC):
    """A Markov process sampled every ``dt`` time units, with its exact spectrum at any lag time.

    Lag times are in sampling steps: ``lagtime = 1`` is one step of ``simulate``'s output.
    """

    dt: float = 1.0

    @abstractmethod
    def simulate(self, n_steps: int, seed: int = 0, n_trajectories: int = 1) -> np.ndarray:
        """Stationary trajectories, shape (n_trajectories, n_steps, dim)."""

    @abstractmethod
    def singular_values(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        """Top-k singular values of K_lag: L2(pi) -> L2(pi), descending (the first is 1)."""

    @abstractmethod
    def eigenvalues(self, lagtime: int = 1, k: int = 10) -> np.ndarray:
        """Top-k eigenvalues of K_lag sorted by decreasing modulus (complex dtype)."""


def top_by_modulus(values: np.ndarray, k: int) -> np.ndarray:
    """The k entries of largest modulus, descending; ties broken by real then imaginary part."""
    values = np.asarray(values).astype(complex)
    order = np.lexsort((-values.imag, -values.real, -np.round(np.abs(values), 12)))
    return values[order[:k]]
