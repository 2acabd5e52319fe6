"""Equivariant primitives: SO(3) utilities, CG tensor products (reference), compiled kernels, edge graphs."""

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.operations import (
    ChannelMixing,
    WeightedTensorProduct,
    cg_contract,
    edge_aggregate,
)
from sciml.equivariant.tensor_product import Coupling

__all__ = [
    "ChannelMixing",
    "Coupling",
    "DegreeLayout",
    "EdgeGraph",
    "WeightedTensorProduct",
    "cg_contract",
    "edge_aggregate",
]
