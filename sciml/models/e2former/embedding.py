"""The edge-degree embedding that initialises every degree.

x_i^(l) = W_l (1 / avg_neighbours) sum_j R_l(edge_ij) ⊙ P^l(r_ij) / |r_ij|^l. The input is the constant
scalar, so [1 ⊗ P^l(r_ij)]^l is P^l(r_ij) itself: no tensor product is needed, per edge or per node. It
is summed per edge directly ((2l + 1) C numbers per edge and degree, 9 C for lmax 2), which is cheaper
than the factorised form (sum_{b <= l} (2b + 1) C, 14 C for lmax 2) and local: it never forms solid
harmonics of positions, whose cancellation at order 2 loses float32 precision on large boxes.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.equivariant.so3 import solid_harmonic_coefficient, spherical_harmonics
from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.edges import EdgeInputs, edge_network
from sciml.models.e2former.settings import EdgeSettings


def sum_over_edges(alpha: torch.Tensor, harmonics: torch.Tensor, receivers: torch.Tensor, n: int) -> torch.Tensor:
    """out[i, m, c] = sum over edges e of receiver i of alpha[e, c] * harmonics[e, m], one component m at a
    time, so no (E, M, C) tensor is formed. Shape: alpha (E, C), harmonics (E, M) -> (n, M, C)."""
    blocks = [
        alpha.new_zeros(n, alpha.shape[1]).index_add(0, receivers, alpha * harmonics[:, m, None])
        for m in range(harmonics.shape[1])
    ]
    return torch.stack(blocks, dim=1)


class EdgeDegreeEmbedding(nn.Module):
    """Shape: edges (EdgeInputs, or (E, F) features), envelope (E,) -> (N, (lmax+1)^2, C). Parameters: one
    radial network (see :func:`~sciml.models.e2former.edges.edge_network`, reading ``edges``:
    :class:`~sciml.models.e2former.settings.EdgeSettings`) and one channel mixing W_l (C x C, scaled by
    1 / sqrt(C)) per degree.

    ``scaling="mean"``: every degree's sum divided by ``avg_neighbours``; ``"balanced"``: the l > 0 sums by its
    square root (unit harmonics of many neighbours partly cancel, so those sums grow like sqrt(neighbours)),
    which keeps them at the scale of the l = 0 features (see :class:`~sciml.models.e2former.model.E2Former`).
    """

    def __init__(
        self, lmax: int, channels: int, edges: EdgeSettings, avg_neighbours: float, scaling: str = "balanced"
    ) -> None:
        super().__init__()
        self.lmax, self.channels = lmax, channels
        if scaling not in ("mean", "balanced"):
            raise ValueError(f"edge_degree_scaling must be 'mean' or 'balanced', got {scaling!r}")
        vector = 1.0 / math.sqrt(avg_neighbours) if scaling == "balanced" else 1.0 / avg_neighbours
        self.degree_scales = [1.0 / avg_neighbours] + [vector] * lmax
        self.radial = nn.ModuleList(
            edge_network(edges.features, edges.hidden, channels, edges.shared) for _ in range(lmax + 1)
        )
        self.mixing = nn.Parameter(torch.randn(lmax + 1, channels, channels))

    def forward(self, edges: EdgeInputs | torch.Tensor, envelope: torch.Tensor, context: GraphContext) -> torch.Tensor:
        receivers, n = context.graph.row, context.positions.shape[0]
        blocks = []
        for l, radial in enumerate(self.radial):
            # P^l(r) / |r|^l = c_l Y^l(r̂): the unit-vector harmonics, with the solid-harmonic constant
            harmonics = spherical_harmonics(l, context.vectors) * solid_harmonic_coefficient(l)
            weight = envelope[:, None] * self.degree_scales[l]
            summed = sum_over_edges(radial(edges) * weight, harmonics, receivers, n)
            blocks.append(summed @ (self.mixing[l] / math.sqrt(self.channels)))
        return torch.cat(blocks, dim=1)
