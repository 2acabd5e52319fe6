"""Test helpers shipped with the package: structures, rigid motions, and the energy-model test mixin."""

from sciml.testing.model_tests import EnergyModelTests, relative
from sciml.testing.structures import (
    graph_batch,
    moved,
    permuted,
    random_crystal,
    random_molecule,
    randomise_output_head,
    with_dtype,
)

__all__ = [
    "EnergyModelTests",
    "graph_batch",
    "moved",
    "permuted",
    "random_crystal",
    "random_molecule",
    "randomise_output_head",
    "relative",
    "with_dtype",
]
