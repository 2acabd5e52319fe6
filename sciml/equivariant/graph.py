"""``EdgeGraph``: receiver-sorted (CSR) edges with the sender-sorted transpose, as the kernels need them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def padded_size(count: int) -> int:
    """``count`` rounded up to a multiple of 2^(floor(log2 count) - 3): at most 12.5 % rounding and eight sizes
    per doubling."""
    step = 1 << max(count.bit_length() - 4, 0)
    return -(-count // step) * step


def grown_capacity(count: int, capacity: int) -> int:
    """A buffer capacity that only grows: ``capacity`` while ``count`` fits, else ``count`` plus 10 % headroom
    in :func:`padded_size` buckets, so buffers of slowly changing size (edges and images in MD) keep one shape
    for long."""
    return capacity if count <= capacity else padded_size(math.ceil(count * 1.1))


def _rowptr(index: torch.Tensor, size: int) -> torch.Tensor:
    counts = torch.bincount(index, minlength=size)
    return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])


@dataclass(frozen=True)
class EdgeGraph:
    """Edges i <- j sorted by receiver i.

    Attributes:
        row: (E,) receivers, sorted. col: (E,) senders.
        rowptr: (R + 1,) edges of receiver i are ``rowptr[i]:rowptr[i + 1]``.
        perm_t: (E,) stable sort of edges by sender; inv_perm_t its inverse; rowptr_t (S + 1,) sender CSR.
        n_receivers, n_senders: R and S.
    """

    row: torch.Tensor
    col: torch.Tensor
    rowptr: torch.Tensor
    perm_t: torch.Tensor
    inv_perm_t: torch.Tensor
    rowptr_t: torch.Tensor
    n_receivers: int
    n_senders: int

    @classmethod
    def from_edges(
        cls, receivers: torch.Tensor, senders: torch.Tensor, n_receivers: int, n_senders: int
    ) -> tuple[EdgeGraph, torch.Tensor]:
        """Build the graph; also returns ``order`` (E,) so that edge features become ``features[order]``."""
        order = torch.argsort(receivers, stable=True)
        row, col = receivers[order].contiguous(), senders[order].contiguous()
        perm_t = torch.argsort(col, stable=True)
        inv_perm_t = torch.empty_like(perm_t)
        inv_perm_t[perm_t] = torch.arange(perm_t.numel(), device=perm_t.device)
        graph = cls(
            row,
            col,
            _rowptr(row, n_receivers),
            perm_t,
            inv_perm_t,
            _rowptr(col, n_senders),
            n_receivers,
            n_senders,
        )
        return graph, order

    def per_edge(self) -> EdgeGraph:
        """The same receivers with every edge its own sender (S = E, sender e is edge e): aggregating
        per-edge values with the same kernel as per-sender ones."""
        edges = torch.arange(self.row.numel(), device=self.row.device)
        rowptr_t = torch.arange(self.row.numel() + 1, device=self.row.device)
        return EdgeGraph(self.row, edges, self.rowptr, edges, edges, rowptr_t, self.n_receivers, self.row.numel())

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The graph arguments of ``sciml::edge_aggregate`` / ``sciml::edge_dot``."""
        return self.row, self.col, self.rowptr, self.perm_t, self.inv_perm_t, self.rowptr_t
