"""Pre-norm transformer block: x += attention(norm(x)); x += feed_forward(norm(x))."""

from __future__ import annotations

import torch
from torch import nn

from sciml.models.e2former.attention import Wigner6jAttention
from sciml.models.e2former.context import GraphContext
from sciml.nn.so3_layers import EquivariantRMSNorm, GatedFeedForward


class TransformerBlock(nn.Module):
    """Args: as :class:`Wigner6jAttention`, plus ``hidden``: feed-forward width."""

    def __init__(
        self,
        lmax: int,
        channels: int,
        heads: int,
        order: int,
        edge_features: int,
        hidden: int,
        dense: bool = False,
        backend: str = "auto",
        parity: bool = True,
    ) -> None:
        super().__init__()
        self.attention_norm = EquivariantRMSNorm(lmax, channels)
        self.attention = Wigner6jAttention(
            lmax, channels, heads, order, edge_features, dense=dense, backend=backend, parity=parity
        )
        self.feed_forward_norm = EquivariantRMSNorm(lmax, channels)
        self.feed_forward = GatedFeedForward(lmax, channels, hidden)

    def forward(
        self, x: torch.Tensor, edge_features: torch.Tensor, envelope: torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), edge_features, envelope, context)
        return x + self.feed_forward(self.feed_forward_norm(x))
