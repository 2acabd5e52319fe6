"""Backend-dispatching equivariant operations and the modules built on them.

Each operation has a pure-PyTorch reference (the ground truth and the fallback) and a compiled
``sciml::`` op; modules record the backend that actually ran in ``module.backend``. Swapping a backend
never changes a state_dict (the backend is not a parameter or buffer).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.kernels import resolve_backend
from sciml.equivariant.tensor_product import CGTable, Coupling, MixingLayout


def cg_contract(x: torch.Tensor, y: torch.Tensor, table: CGTable, backend: str = "reference") -> torch.Tensor:
    """Channel-wise CG contraction ("uuu"): x (N, table.dim1, C), y (N, table.dim2, 1 or C) -> (N, out_dim, C)."""
    if backend == "reference":
        return table.reference(x, y)
    from sciml.equivariant.kernels import ops

    return ops.cg_contract(x.contiguous(), y.contiguous(), *table.sparse(x.dtype, x.device), table.out_dim)


def edge_aggregate(alpha: torch.Tensor, x: torch.Tensor, graph: EdgeGraph, backend: str = "reference") -> torch.Tensor:
    """out[i, m, c] = sum over edges (i <- j) of alpha[e, c] * x[j, m, c].

    Shape: alpha (E, C) in the graph's edge order, x (S, M, C) -> (R, M, C). The reference materialises
    the (E, M, C) messages; the compiled kernels never do.
    """
    if backend == "reference":
        messages = alpha[:, None, :] * x[graph.col]
        return x.new_zeros(graph.n_receivers, x.shape[1], x.shape[2]).index_add(0, graph.row, messages)
    from sciml.equivariant.kernels import ops

    return ops.edge_aggregate(alpha.contiguous(), x.contiguous(), *graph.tensors())


def edge_dot(a: torch.Tensor, b: torch.Tensor, graph: EdgeGraph, backend: str = "reference") -> torch.Tensor:
    """out[e, c] = sum_m a[i, m, c] * b[j, m, c] for each edge e = (i <- j).

    Shape: a (R, M, C) at receivers, b (S, M, C) at senders -> (E, C) in the graph's edge order. The compiled
    backward is a segment sum over the graph (no scatter into a[row] / b[col]).
    """
    if backend == "reference":
        return (a[graph.row] * b[graph.col]).sum(dim=1)
    from sciml.equivariant.kernels import ops

    return ops.edge_dot(a.contiguous(), b.contiguous(), *graph.tensors())


class KernelModule(nn.Module):
    """Holds the requested backend and resolves it on first use for the tensors' device."""

    def __init__(self, backend: str = "auto") -> None:
        super().__init__()
        self.requested_backend = backend
        self.backend = backend  # what actually runs, once resolved
        self._resolved_for: torch.device | None = None

    def resolve(self, device: torch.device) -> str:
        """The backend that runs on ``device`` (resolved once per device: it may build the kernels)."""
        if self._resolved_for != device:
            self.backend = resolve_backend(self.requested_backend, device)
            self._resolved_for = device
        return self.backend

    def request(self, backend: str) -> None:
        """Run ``backend`` from now on (resolved anew at the next call)."""
        self.requested_backend = self.backend = backend
        self._resolved_for = None

    def _backend_for(self, tensor: torch.Tensor) -> str:
        return self.resolve(tensor.device)

    def tables(self) -> list[CGTable]:
        """The coefficient tables this module contracts with."""
        return []

    def prepare(self, device: torch.device, dtype: torch.dtype) -> None:
        """Resolve the backend and build the tables' sparse coefficients for ``device`` and ``dtype`` now, so
        that a compiled graph finds them built (filling a cache while tracing would recompile next call)."""
        if self.resolve(device) != "reference":
            for table in self.tables():
                table.sparse(dtype, device)

    def extra_repr(self) -> str:
        return f"backend={self.backend!r}"


class ChannelMixing(nn.Module):
    """Per-path "uvw" weights after a contraction: out_J = sum_a T_(a -> J) @ W_(a, J) / sqrt(P_J C_in).

    Shape: (N, layout.dim, C_in) -> (N, sum_J (2J + 1), C_out), degrees in ``layout.out_degrees`` order.
    """

    def __init__(self, layout: MixingLayout, channels_in: int, channels_out: int) -> None:
        super().__init__()
        self.layout, self.channels_in, self.channels_out = layout, channels_in, channels_out
        # each output degree's block of the contraction, consecutive along dim 1 (from layout.start)
        self.block_sizes = [(2 * J + 1) * len(layout.paths[J]) for J in layout.out_degrees]
        self.weights = nn.ParameterList(
            [nn.Parameter(torch.empty(len(layout.paths[J]), channels_in, channels_out)) for J in layout.out_degrees]
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Standard-normal weights (the 1 / sqrt(P_J C_in) is applied in forward)."""
        for weight in self.weights:
            nn.init.normal_(weight)

    def forward(self, contracted: torch.Tensor) -> torch.Tensor:
        n, degrees, parts = contracted.shape[0], self.layout.out_degrees, contracted.split(self.block_sizes, dim=1)
        blocks = []
        for J, weight, part in zip(degrees, self.weights, parts, strict=True):
            n_paths = len(self.layout.paths[J])
            if n_paths == 0:
                blocks.append(contracted.new_zeros(n, 2 * J + 1, self.channels_out))
                continue
            block = part.reshape(n, 2 * J + 1, n_paths * self.channels_in)
            scale = 1.0 / math.sqrt(n_paths * self.channels_in)
            blocks.append(block @ (weight.reshape(n_paths * self.channels_in, self.channels_out) * scale))
        return torch.cat(blocks, dim=1)


class WeightedTensorProduct(KernelModule):
    """The weighted node product ("uvw"): [x ⊗ y^L]^J with learned channel mixing per path (a, L -> J).

    Args:
        coupling: the degrees of x (e.g. (0, 1, 2)), the degree L of y (one channel, e.g. a solid harmonic),
            the output degrees, the channels C -> C' and whether only parity-allowed paths are kept.
        backend: kernel backend (see :mod:`sciml.equivariant.kernels`).

    Shape: x (N, dim(in_degrees), C), y (N, 2L + 1) or (N, 2L + 1, 1) -> (N, dim(out_degrees), C').
    """

    def __init__(self, coupling: Coupling, backend: str = "auto") -> None:
        super().__init__(backend)
        self.table, layout = coupling.table()
        self.mixing = ChannelMixing(layout, coupling.channels_in, coupling.channels_out)

    def tables(self) -> list[CGTable]:
        return [self.table]

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        y = y[..., None] if y.dim() == 2 else y
        return self.mixing(cg_contract(x, y, self.table, self._backend_for(x)))
