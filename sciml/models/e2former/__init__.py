"""E2Former: Wigner-6j equivariant transformer for energies (forces and stress by autograd outside)."""

from sciml.models.e2former.model import E2Former

__all__ = ["E2Former"]
