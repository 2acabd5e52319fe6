"""Wigner-6j attention: invariant query/key attention over neighbours, messages by the 6j convolution."""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.convolution import Wigner6jConvolution
from sciml.nn.mlp import MLP
from sciml.nn.scatter import envelope_softmax
from sciml.nn.so3_layers import Invariants, SO3Linear


class Wigner6jAttention(nn.Module):
    """alpha_ij = softmax_j[(q_i . k_j) / sqrt(d) * MLP_h(edge)] (envelope-weighted) * radial_c(edge) / |r_ij|^L,
    m_i = W sum_j alpha_ij ⊙ [v_j ⊗ P^L(r_ij)] (factorised), then an output SO3Linear.

    Args:
        lmax: feature degrees 0..lmax. channels: C. heads: attention heads (C divisible by heads).
        order: attention order L (0, 1 or 2; 1 is the default of the model).
        edge_features: size of the invariant edge features (radial basis + species embeddings).
        head_dim: query/key size per head. dense / backend / parity: see :class:`Wigner6jConvolution`.

    Shape: h (N, (lmax+1)^2, C), edge features (E, F), envelope (E,) -> (N, (lmax+1)^2, C).
    """

    def __init__(
        self,
        lmax: int,
        channels: int,
        heads: int,
        order: int,
        edge_features: int,
        head_dim: int = 16,
        dense: bool = False,
        backend: str = "auto",
        parity: bool = True,
    ) -> None:
        super().__init__()
        if channels % heads:
            raise ValueError(f"channels ({channels}) must be divisible by heads ({heads})")
        self.heads, self.head_dim, self.order, self.channels = heads, head_dim, order, channels
        invariant_size = (lmax + 1) * head_dim
        self.query = nn.Sequential(
            Invariants(lmax, channels, head_dim), MLP((invariant_size, channels, heads * head_dim))
        )
        self.key = nn.Sequential(
            Invariants(lmax, channels, head_dim), MLP((invariant_size, channels, heads * head_dim))
        )
        self.edge_logit = MLP((edge_features, channels, heads), layer_norm=True)
        self.radial = MLP((edge_features, channels, channels), layer_norm=True)
        self.value = SO3Linear(lmax, channels, channels)
        degrees = tuple(range(lmax + 1))
        self.convolution = Wigner6jConvolution(degrees, order, degrees, channels, channels, dense, backend, parity)
        self.output = SO3Linear(lmax, channels, channels)

    def forward(
        self, h: torch.Tensor, edge_features: torch.Tensor, envelope: torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        graph = context.graph
        senders = context.image_atom[graph.col]
        q = self.query(h).reshape(-1, self.heads, self.head_dim)
        k = self.key(h).reshape(-1, self.heads, self.head_dim)
        logits = (q[graph.row] * k[senders]).sum(-1) / math.sqrt(self.head_dim) * self.edge_logit(edge_features)
        weights = envelope_softmax(logits, envelope, graph.row, graph.n_receivers)  # (E, H)
        per_channel = weights.repeat_interleave(self.channels // self.heads, dim=1) * self.radial(edge_features)
        alpha = per_channel / context.distances[:, None] ** self.order
        values = self.value(h)[context.image_atom]
        return self.output(self.convolution(values, alpha, context))
