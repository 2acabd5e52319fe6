"""Test helpers shipped with the package: structures, rigid motions, and the energy-model test mixin.

Importing ``sciml.testing`` needs no pytest; only :class:`~sciml.testing.model_tests.EnergyModelTests` (a
pytest mixin) does, and it is imported on first access.
"""

from sciml.testing.structures import (
    graph_batch,
    moved,
    permuted,
    random_crystal,
    random_molecule,
    randomise_output_head,
    relative,
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


def __getattr__(name: str):
    if name == "EnergyModelTests":
        from sciml.testing.model_tests import EnergyModelTests

        return EnergyModelTests
    raise AttributeError(f"module 'sciml.testing' has no attribute '{name}'")
