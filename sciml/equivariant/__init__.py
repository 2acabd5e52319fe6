"""Equivariant primitives: SO(3) utilities, CG tensor products (reference), compiled kernels, edge graphs."""

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.operations import (
    ChannelMixing,
    WeightedTensorProduct,
    cg_contract,
    edge_aggregate,
)

__all__ = [
    "ChannelMixing",
    "DegreeLayout",
    "EdgeGraph",
    "WeightedTensorProduct",
    "cg_contract",
    "edge_aggregate",
]
