"""Segment operations over edges grouped by receiver."""

from __future__ import annotations

import torch


def envelope_softmax(
    logits: torch.Tensor,
    envelope: torch.Tensor,
    receivers: torch.Tensor,
    n_receivers: int,
    eps: float = 1e-3,
    cap: float = 10.0,
) -> torch.Tensor:
    """Softmax over each receiver's edges, weighted by a smooth envelope:
    w_e = exp(a_e) env_e / (sum_e' exp(a_e') env_e' + eps), with a = cap * tanh(logits / cap).

    The smooth cap bounds exp(a) without a (non-smooth) max shift, and eps makes the weights tend to 0
    continuously as the last neighbour leaves the cutoff: the weights are smooth in the positions, so
    forces from them are exactly conservative.

    Shape: logits (E, H), envelope (E,), receivers (E,) -> (E, H).
    """
    weights = torch.exp(cap * torch.tanh(logits / cap)) * envelope[:, None]
    total = weights.new_zeros(n_receivers, logits.shape[1]).index_add(0, receivers, weights)
    return weights / (total[receivers] + eps)
