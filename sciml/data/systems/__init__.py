"""Stochastic systems with exact Koopman spectra, for tests, benchmarks and quick starts."""

from sciml.data.systems.base import StochasticSystem
from sciml.data.systems.linear import GaussianAR1, OrnsteinUhlenbeck
from sciml.data.systems.logistic import NoisyLogisticMap
from sciml.data.systems.prinz import PrinzPotential

__all__ = ["StochasticSystem", "GaussianAR1", "OrnsteinUhlenbeck", "NoisyLogisticMap", "PrinzPotential"]
