"""Equivariant primitives: SO(3) utilities, CG tensor products (reference), compiled kernels, edge graphs."""

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.operations import (
    ChannelMixing,
    ChannelwiseTensorProduct,
    EdgeAggregation,
    WeightedTensorProduct,
    cg_contract,
    edge_aggregate,
)

__all__ = [
    "ChannelMixing",
    "ChannelwiseTensorProduct",
    "EdgeAggregation",
    "EdgeGraph",
    "WeightedTensorProduct",
    "cg_contract",
    "edge_aggregate",
]
