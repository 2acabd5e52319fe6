"""Baselines: the same layers computed the conventional way (per-edge e3nn tensor products)."""

from sciml.models.baselines.edge_convolution import EdgeTensorProductConvolution, use_edge_convolutions

__all__ = ["EdgeTensorProductConvolution", "use_edge_convolutions"]
