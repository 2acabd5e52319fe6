"""The conventional SO(3) convolution of the same math, for the speed claim and as an independent check.

Per edge, an e3nn channel-wise ("uvu", as NequIP and MACE do) tensor product of h_j with the edge
filter P^L(r_ij) = c_L |r_ij|^L Y^L(r̂_ij), scaled by alpha_ij (which already carries 1 / |r_ij|^L), summed
over neighbours, then the same learned channel mixing W after aggregation. It computes exactly what
:class:`~sciml.models.e2former.convolution.Wigner6jConvolution` computes, in O(|E|) tensor products.
"""

from __future__ import annotations

import torch
from e3nn import o3
from torch import nn

from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.operations import ChannelMixing
from sciml.equivariant.so3 import float64_default, solid_harmonics
from sciml.equivariant.tensor_product import Coupling, mixing_layout
from sciml.models.e2former.context import GraphContext


def to_e3nn(x: torch.Tensor, degrees: tuple[int, ...]) -> torch.Tensor:
    """(N, M, C) channels-last -> e3nn's flat (N, sum_l C (2l + 1)) layout, multiplicity-major per degree."""
    return torch.cat([x[:, s].transpose(1, 2).reshape(x.shape[0], -1) for s in DegreeLayout(degrees).slices], dim=1)


class EdgeTensorProductConvolution(nn.Module):
    """Same interface and parameters (``mixing``) as ``Wigner6jConvolution``; one e3nn TP per edge.

    With ``parity`` the e3nn irreps carry natural parity (``0e, 1o, 2e``; the filter P^L has parity (-1)^L)
    and e3nn itself checks every path's parity; without it every irrep is even (SO(3) only).

    Shape: values (S, dim(in), C), alpha (E, C) -> (N, dim(out), C_out).
    """

    def __init__(self, coupling: Coupling) -> None:
        super().__init__()
        order, parity, channels_in = coupling.order, coupling.parity, coupling.channels_in
        self.in_degrees, self.order, self.channels = coupling.in_degrees, order, channels_in
        self.layout = mixing_layout(self.in_degrees, order, coupling.out_degrees, parity)

        def irrep(l: int) -> tuple[int, int]:
            return (l, (-1) ** l if parity else 1)

        irreps_in = o3.Irreps([(channels_in, irrep(l)) for l in self.in_degrees])
        irreps_out, instructions = [], []
        for J in self.layout.out_degrees:  # output blocks in the mixing layout's path order
            for a in self.layout.paths[J]:
                instructions.append((self.in_degrees.index(a), 0, len(irreps_out), "uvu", False))
                irreps_out.append((channels_in, irrep(J)))
        # cast the module to the working dtype afterwards, as use_edge_convolutions does
        with float64_default():
            self.product = o3.TensorProduct(
                irreps_in,
                o3.Irreps([(1, irrep(order))]),
                o3.Irreps(irreps_out),
                instructions,
                irrep_normalization="component",
                path_normalization="none",
            )
        self.mixing = ChannelMixing(self.layout, channels_in, coupling.channels_out)

    def forward(self, values: torch.Tensor, alpha: torch.Tensor, context: GraphContext) -> torch.Tensor:
        graph = context.graph
        filters = solid_harmonics(self.order, context.vectors)
        per_edge = self.product(to_e3nn(values, self.in_degrees)[graph.col], filters)  # (E, sum C (2J + 1))
        aggregated = values.new_zeros(graph.n_receivers, per_edge.shape[1]).index_add(
            0, graph.row, per_edge * self._channel_weights(alpha)
        )
        return self.mixing(self._to_mixing_layout(aggregated))

    def _channel_weights(self, alpha: torch.Tensor) -> torch.Tensor:
        """alpha (E, C) spread over e3nn's layout: each output block is C x (2J + 1), multiplicity-major."""
        blocks = [
            alpha.repeat_interleave(2 * J + 1, dim=1) for J in self.layout.out_degrees for _ in self.layout.paths[J]
        ]
        return torch.cat(blocks, dim=1)

    def _to_mixing_layout(self, flat: torch.Tensor) -> torch.Tensor:
        n, c = flat.shape[0], self.channels
        out = flat.new_zeros(n, self.layout.dim, c)
        offset = 0
        for J in self.layout.out_degrees:
            n_paths = len(self.layout.paths[J])
            for p in range(n_paths):
                block = flat[:, offset : offset + c * (2 * J + 1)].reshape(n, c, 2 * J + 1).transpose(1, 2)
                start = self.layout.start[J] + p
                out[:, start : start + (2 * J + 1) * n_paths : n_paths] = block
                offset += c * (2 * J + 1)
        return out


def use_edge_convolutions(model: nn.Module) -> nn.Module:
    """Swap every Wigner-6j convolution inside ``model`` for the per-edge e3nn baseline, keeping its
    channel-mixing parameters (same values; e3nn adds buffers of its own)."""
    from sciml.models.e2former.convolution import Wigner6jConvolution

    for name, child in list(model.named_children()):
        if isinstance(child, Wigner6jConvolution):
            channels = (child.mixing.channels_in, child.mixing.channels_out)
            coupling = Coupling(child.in_degrees, child.order, child.out_degrees, *channels, child.parity)
            baseline = EdgeTensorProductConvolution(coupling)
            baseline.mixing = child.mixing
            reference = next(child.parameters())
            setattr(model, name, baseline.to(device=reference.device, dtype=reference.dtype))
        else:
            use_edge_convolutions(child)
    return model
