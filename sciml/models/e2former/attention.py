"""Wigner-6j attention: invariant query/key attention over neighbours, messages by the 6j convolution."""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.operations import KernelModule, edge_dot
from sciml.equivariant.tensor_product import Coupling
from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.convolution import Wigner6jConvolution
from sciml.models.e2former.edges import EdgeInputs, edge_network
from sciml.models.e2former.settings import BlockSettings
from sciml.nn.mlp import MLP
from sciml.nn.scatter import envelope_softmax
from sciml.nn.so3_layers import Invariants, SO3Linear

ALL_ORDERS = (0, 1, 2)


def attention_orders(order: int | str) -> tuple[int, ...]:
    """``0 | 1 | 2`` -> that order alone; ``"all"`` -> (0, 1, 2)."""
    if order == "all":
        return ALL_ORDERS
    if int(order) not in ALL_ORDERS:
        raise ValueError(f"attention order must be 0, 1, 2 or 'all', got {order!r}")
    return (int(order),)


class OrderBranch(nn.Module):
    """One attention order L at width W: value projection C -> W, per-channel radial filter, and the
    factorised convolution sum_j alpha_ij ⊙ W_mix [v_j ⊗ P^L(r_ij)] / |r_ij|^L.

    Shape: h (N, M, C), attention weights (E, H), edges (EdgeInputs or (E, F)) -> (N, M, W).
    """

    def __init__(self, settings: BlockSettings, width: int, order: int) -> None:
        super().__init__()
        self.order, self.width = order, width
        edges = settings.edges
        self.radial = edge_network(edges.features, edges.hidden, width, edges.shared)
        self.value = SO3Linear(settings.lmax, settings.channels, width)
        degrees = DegreeLayout.up_to(settings.lmax).degrees
        coupling = Coupling(degrees, order, degrees, width, width, settings.parity)
        self.convolution = Wigner6jConvolution(coupling, settings.dense, settings.backend)

    def forward(
        self, h: torch.Tensor, weights: torch.Tensor, edges: EdgeInputs | torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        per_channel = weights.repeat_interleave(self.width // weights.shape[1], dim=1) * self.radial(edges)
        alpha = per_channel / context.distances[:, None] ** self.order
        return self.convolution(self.value(h)[context.image_atom], alpha, context)


class Wigner6jAttention(KernelModule):
    """alpha_ij = softmax_j[(q_i . k_j) / sqrt(d) * MLP_h(edge)] (envelope-weighted) * radial_c(edge) / |r_ij|^L,
    m_i = W sum_j alpha_ij ⊙ [v_j ⊗ P^L(r_ij)] (factorised), then an output SO3Linear.

    Args:
        settings: the block's :class:`~sciml.models.e2former.settings.BlockSettings`: ``lmax``, ``channels`` C,
            ``heads`` (C divisible by heads), ``head_dim`` (query/key size per head), ``edges`` (the edge inputs'
            width, the edge networks' hidden width, and whether the inputs are the shared trunk's features, read
            by single linear maps: :mod:`sciml.models.e2former.edges`), ``dense`` / ``backend`` / ``parity``
            (:class:`~sciml.models.e2former.convolution.Wigner6jConvolution`) and ``order``: the attention order
            L (0, 1 or 2; 1 is the default of the model), or ``"all"``: orders 0, 1 and 2 at widths C, C/2 and
            C/4 (the paper's all-order attention), each gated per channel by a sigmoid of the receiver's scalars
            before the shared output projection. The softmax weights are shared.

    Shape: h (N, (lmax+1)^2, C), edges (EdgeInputs, or (E, F) features), envelope (E,) -> (N, (lmax+1)^2, C).
    The logits' q . k runs in the edge-dot kernel: its backward is a segment sum, not a scatter.
    """

    def __init__(self, settings: BlockSettings) -> None:
        super().__init__(settings.backend)
        lmax, channels, heads, head_dim, edges = (settings.lmax, settings.channels, settings.heads, settings.head_dim,
                                                  settings.edges)  # fmt: skip
        orders = attention_orders(settings.order)
        widths = [channels >> k for k in range(len(orders))]
        if any(width % heads for width in widths):
            raise ValueError(f"attention widths {widths} must be divisible by heads ({heads})")
        self.heads, self.head_dim = heads, head_dim
        invariant_size = (lmax + 1) * head_dim
        self.query = nn.Sequential(
            Invariants(lmax, channels, head_dim), MLP((invariant_size, channels, heads * head_dim))
        )
        self.key = nn.Sequential(
            Invariants(lmax, channels, head_dim), MLP((invariant_size, channels, heads * head_dim))
        )
        self.edge_logit = edge_network(edges.features, edges.hidden, heads, edges.shared)
        self.branches = nn.ModuleList(OrderBranch(settings, width, L) for L, width in zip(orders, widths, strict=True))
        self.gates = nn.Linear(channels, sum(widths)) if len(orders) > 1 else None
        self.output = SO3Linear(lmax, sum(widths), channels)

    def forward(
        self, h: torch.Tensor, edges: EdgeInputs | torch.Tensor, envelope: torch.Tensor, context: GraphContext
    ) -> torch.Tensor:
        graph = context.graph
        q = self.query(h).reshape(-1, self.heads, self.head_dim).transpose(1, 2)  # (N, head_dim, H)
        k = self.key(h).reshape(-1, self.heads, self.head_dim).transpose(1, 2)[context.image_atom]  # (S, ...)
        similarity = edge_dot(q, k, graph, self._backend_for(h))  # (E, H)
        logits = similarity / math.sqrt(self.head_dim) * self.edge_logit(edges)
        weights = envelope_softmax(logits, envelope, graph.row, graph.n_receivers)  # (E, H)
        messages = torch.cat([branch(h, weights, edges, context) for branch in self.branches], dim=2)
        if self.gates is not None:
            messages = messages * torch.sigmoid(self.gates(h[:, 0]))[:, None, :]
        return self.output(messages)
