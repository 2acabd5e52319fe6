"""ASE calculators for trained sciml potentials."""

from sciml.calculators.ase import SciMLCalculator
from sciml.calculators.checkpoint import CheckpointError, load_model

__all__ = ["CheckpointError", "SciMLCalculator", "load_model"]
