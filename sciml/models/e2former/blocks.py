"""Pre-norm transformer block: x += attention(norm(x)); x += feed_forward(norm(x))."""

from __future__ import annotations

import torch
from torch import nn

from sciml.models.e2former.attention import Wigner6jAttention
from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.edges import EdgeInputs
from sciml.nn.so3_layers import EquivariantRMSNorm, GatedFeedForward, S2FeedForward


class TransformerBlock(nn.Module):
    """Pre-norm block: norm -> Wigner-6j attention -> residual -> norm -> feed-forward -> residual.

    Args: as :class:`~sciml.models.e2former.attention.Wigner6jAttention`, plus ``hidden``: feed-forward width;
    ``feed_forward``: ``"gate"`` (:class:`~sciml.nn.so3_layers.GatedFeedForward`, exact) or ``"s2"``
    (:class:`~sciml.nn.so3_layers.S2FeedForward` on a grid of ``s2_resolution`` latitudes, the paper's FFN;
    rotation error about 1e-7 at 18, 1e-12 at 36); ``edge_hidden`` / ``shared_edges``: the edge networks, see
    :class:`~sciml.models.e2former.attention.Wigner6jAttention`; ``norm``: the kind of
    :class:`~sciml.nn.so3_layers.EquivariantRMSNorm` before attention and feed-forward."""

    def __init__(
        self,
        lmax: int,
        channels: int,
        heads: int,
        order: int | str,
        edge_features: int,
        hidden: int,
        dense: bool = False,
        backend: str = "auto",
        parity: bool = True,
        feed_forward: str = "gate",
        s2_resolution: int = 18,
        edge_hidden: int | None = None,
        shared_edges: bool = False,
        norm: str = "centred",
    ) -> None:
        super().__init__()
        self.attention_norm = EquivariantRMSNorm(lmax, channels, kind=norm)
        self.attention = Wigner6jAttention(
            lmax,
            channels,
            heads,
            order,
            edge_features,
            dense=dense,
            backend=backend,
            parity=parity,
            edge_hidden=edge_hidden,
            shared_edges=shared_edges,
        )
        self.feed_forward_norm = EquivariantRMSNorm(lmax, channels, kind=norm)
        if feed_forward == "gate":
            self.feed_forward = GatedFeedForward(lmax, channels, hidden)
        elif feed_forward == "s2":
            self.feed_forward = S2FeedForward(lmax, channels, hidden, s2_resolution)
        else:
            raise ValueError(f"feed_forward must be 'gate' or 's2', got {feed_forward!r}")

    def forward(
        self, x: torch.Tensor, edges: EdgeInputs | torch.Tensor, envelope: torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), edges, envelope, context)
        return x + self.feed_forward(self.feed_forward_norm(x))
