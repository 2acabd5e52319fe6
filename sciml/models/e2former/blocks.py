"""Pre-norm transformer block: x += attention(norm(x)); x += feed_forward(norm(x))."""

from __future__ import annotations

import torch
from torch import nn

from sciml.models.e2former.attention import Wigner6jAttention
from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.edges import EdgeInputs
from sciml.models.e2former.settings import BlockSettings
from sciml.nn.so3_layers import EquivariantRMSNorm, GatedFeedForward, S2FeedForward


class TransformerBlock(nn.Module):
    """Pre-norm block: norm -> Wigner-6j attention -> residual -> norm -> feed-forward -> residual.

    Args:
        settings: the block (:class:`~sciml.models.e2former.settings.BlockSettings`): its attention's, and
            ``feed_forward``: ``"gate"`` (:class:`~sciml.nn.so3_layers.GatedFeedForward`, exact) or ``"s2"``
            (:class:`~sciml.nn.so3_layers.S2FeedForward` on a grid of ``s2_resolution`` latitudes, the paper's
            FFN; rotation error about 1e-7 at 18, 1e-12 at 36) of width ``hidden``; ``norm``: the kind of
            :class:`~sciml.nn.so3_layers.EquivariantRMSNorm` before attention and feed-forward."""

    def __init__(self, settings: BlockSettings) -> None:
        super().__init__()
        lmax, channels, width = settings.lmax, settings.channels, settings.feed_forward_width
        self.attention_norm = EquivariantRMSNorm(lmax, channels, kind=settings.norm)
        self.attention = Wigner6jAttention(settings)
        self.feed_forward_norm = EquivariantRMSNorm(lmax, channels, kind=settings.norm)
        if settings.feed_forward == "gate":
            self.feed_forward = GatedFeedForward(lmax, channels, width)
        elif settings.feed_forward == "s2":
            self.feed_forward = S2FeedForward(lmax, channels, width, settings.s2_resolution)
        else:
            raise ValueError(f"feed_forward must be 'gate' or 's2', got {settings.feed_forward!r}")

    def forward(
        self, x: torch.Tensor, edges: EdgeInputs | torch.Tensor, envelope: torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), edges, envelope, context)
        return x + self.feed_forward(self.feed_forward_norm(x))
