"""The invariant edge networks: radial filters and attention logits from distances and atom types.

Every edge network reads the edge features [basis(|r_ij|), e_recv(type_i), e_send(type_j)] (E, 3R). Their
first layer is linear, so its type part depends only on the pair of types: :meth:`EdgeInputs.linear`
evaluates it once per type pair (T^2 rows) and per edge only the basis part, R x out multiply-adds per
edge instead of 3R x out, with the same parameters and the same result up to rounding.

Two layouts (``E2Former(edge_network=...)``):

- ``"per_layer"``: every consumer (each layer's radial filter and logits, each degree of the
  edge-degree embedding) is an MLP (3R -> hidden -> out) of its own.
- ``"shared"`` (the default): one trunk (3R -> hidden, LayerNorm, SiLU) runs once per forward; each consumer is a single
  linear map hidden -> out (as radial networks shared across interactions in NequIP-like models).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sciml.nn.mlp import MLP

EDGE_NETWORKS = ("per_layer", "shared")


@dataclass
class EdgeInputs:
    """basis (E, R): radial basis of the distances; pair (E,) int64: receiver type x T + sender type;
    receiver_embedding, sender_embedding (T, R): the type embeddings. ``concatenated()`` is the (E, 3R)
    feature matrix they stand for."""

    basis: torch.Tensor
    pair: torch.Tensor
    receiver_embedding: torch.Tensor
    sender_embedding: torch.Tensor

    def concatenated(self) -> torch.Tensor:
        n_types = self.receiver_embedding.shape[0]
        receivers, senders = self.pair // n_types, self.pair % n_types
        return torch.cat([self.basis, self.receiver_embedding[receivers], self.sender_embedding[senders]], dim=1)

    def linear(self, layer: nn.Linear) -> torch.Tensor:
        """``layer(self.concatenated())`` (E, out), with the type part summed per type pair."""
        size = self.basis.shape[1]
        weight = layer.weight
        receiver_part = self.receiver_embedding @ weight[:, size : 2 * size].T  # (T, out)
        sender_part = self.sender_embedding @ weight[:, 2 * size :].T
        pair_table = (receiver_part[:, None] + sender_part[None, :]).flatten(0, 1)  # (T^2, out)
        if layer.bias is not None:
            pair_table = pair_table + layer.bias
        return torch.addmm(pair_table[self.pair], self.basis, weight[:, :size].T)


class EdgeMLP(MLP):
    """An :class:`~sciml.nn.mlp.MLP` (LayerNorm between layers) that also takes :class:`EdgeInputs`, whose
    first layer it evaluates per type pair. Shape: (E, in) or EdgeInputs -> (E, out)."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__(sizes, layer_norm=True)

    def forward(self, edges: EdgeInputs | torch.Tensor) -> torch.Tensor:
        if isinstance(edges, torch.Tensor):
            return super().forward(edges)
        first, *rest = self.children()
        x = edges.linear(first)
        for layer in rest:
            x = layer(x)
        return x


class EdgeTrunk(nn.Module):
    """The shared trunk: SiLU(LayerNorm(W [basis, e_recv, e_send] + b)). Shape: EdgeInputs -> (E, hidden)."""

    def __init__(self, edge_features: int, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(edge_features, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, edges: EdgeInputs) -> torch.Tensor:
        return nn.functional.silu(self.norm(edges.linear(self.linear)))


def edge_network(edge_features: int, hidden: int, out: int, shared: bool) -> nn.Module:
    """A consumer's network: ``EdgeMLP((edge_features, hidden, out))``, or with ``shared`` (the inputs are the
    shared trunk's features already) one ``nn.Linear(edge_features, out)``."""
    if shared:
        return nn.Linear(edge_features, out)
    return EdgeMLP((edge_features, hidden, out))
