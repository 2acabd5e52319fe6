"""Species embedding and the edge-degree embedding that initialises every degree.

Edge-degree embedding: x_i^(l) = (1 / avg_neighbours) sum_j R_l(edge_ij) ⊙ [1 ⊗ P^l(r_ij)] / |r_ij|^l, i.e. a
Wigner-6j convolution of the constant scalar, so it needs no per-edge tensor product either.
"""

from __future__ import annotations

import torch
from torch import nn

from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.convolution import Wigner6jConvolution
from sciml.nn.mlp import MLP


class EdgeDegreeEmbedding(nn.Module):
    """Shape: edge features (E, F), envelope (E,) -> (N, (lmax+1)^2, C)."""

    def __init__(
        self,
        lmax: int,
        channels: int,
        edge_features: int,
        avg_neighbours: float,
        dense: bool = False,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.lmax, self.avg_neighbours = lmax, avg_neighbours
        self.radial = nn.ModuleList(MLP((edge_features, channels, channels), layer_norm=True) for _ in range(lmax + 1))
        self.convolutions = nn.ModuleList(
            Wigner6jConvolution((0,), l, (l,), channels, channels, dense, backend) for l in range(lmax + 1)
        )

    def forward(self, edge_features: torch.Tensor, envelope: torch.Tensor, context: GraphContext) -> torch.Tensor:
        n_images, channels = context.image_positions.shape[0], self.radial[0][-1].out_features
        ones = edge_features.new_ones(n_images, 1, channels)
        blocks = []
        for l, (radial, convolution) in enumerate(zip(self.radial, self.convolutions, strict=True)):
            alpha = radial(edge_features) * envelope[:, None] / context.distances[:, None] ** l / self.avg_neighbours
            blocks.append(convolution(ones, alpha, context))
        return torch.cat(blocks, dim=1)
