"""The Wigner-6j convolution: sum_j alpha_ij ⊙ W [h_j ⊗ P^L(r_ij)]^J without any per-edge tensor product.

Factorised (default): for b = 0..L, per sender image X^(b) = [h ⊗ P^b(r_s)] (all degrees), per edge only
the scalar-weighted sum A^(b)_i = sum_j alpha_ij X^(b)_j (the compiled edge-aggregation kernel), per
receiver again a recoupled product with P^(L-b)(r_i) carrying the binomial and 6j factors; the learned
channel mixing W is shared by all b. ``dense=True`` evaluates the same message per edge (one tensor
product per edge, summed by the same compiled aggregation kernel over a graph whose senders are the edges)
with the same parameters: the exactness test, and the kernel-matched per-edge baseline of the speed claims.
"""

from __future__ import annotations

import torch

from sciml.equivariant.operations import ChannelMixing, KernelModule, cg_contract, edge_aggregate
from sciml.equivariant.so3 import solid_harmonics
from sciml.equivariant.tensor_product import (
    CGTable,
    Coupling,
    expansion_table,
    recoupled_blocks,
    recoupling_table,
)
from sciml.models.e2former.context import GraphContext


class Wigner6jConvolution(KernelModule):
    """Args: coupling: the layouts of h (``in_degrees``) and of the message (``out_degrees``), the filter's
    degree L (``order``), the channels and ``parity`` (only the paths a ⊗ L -> J with a + L + J even:
    natural-parity features in and out, O(3) equivariance); dense: evaluate per edge; backend: kernel
    backend (see :mod:`sciml.equivariant.kernels`).

    Shape: values (S, dim(in), C_in) at sender images, alpha (E, C_in) already divided by |r_ij|^L
    -> (N, dim(out), C_out).
    """

    def __init__(self, coupling: Coupling, dense: bool = False, backend: str = "auto") -> None:
        super().__init__(backend)
        order, parity = coupling.order, coupling.parity
        self.order, self.dense, self.parity = order, dense, parity
        self.in_degrees, self.out_degrees = coupling.in_degrees, coupling.out_degrees
        self.coupling, layout = coupling.table()
        self.mixing = ChannelMixing(layout, coupling.channels_in, coupling.channels_out)
        top = max(self.out_degrees)
        self.expansions, self.recouplings = [], []
        for b in range(order + 1):  # only the expansion blocks some output path needs
            blocks = recoupled_blocks(self.in_degrees, order, b, self.out_degrees, top + order - b, parity)
            self.expansions.append(expansion_table(self.in_degrees, b, top + order - b, blocks))
            self.recouplings.append(
                recoupling_table(self.in_degrees, order, b, self.out_degrees, top + order - b, parity, blocks)
            )

    def tables(self) -> list[CGTable]:
        return [self.coupling, *self.expansions, *self.recouplings]

    def forward(self, values: torch.Tensor, alpha: torch.Tensor, context: GraphContext) -> torch.Tensor:
        backend = self._backend_for(values)
        graph, L = context.graph, self.order
        if self.dense:
            edge_powers = solid_harmonics(L, context.vectors)[..., None]  # P^L(r_ij), one product per edge
            per_edge = cg_contract(values[graph.col], edge_powers, self.coupling, backend)
            return self.mixing(edge_aggregate(alpha, per_edge, graph.per_edge(), backend))
        contracted = None
        for b in range(L + 1):
            expanded = cg_contract(values, context.image_powers[b][..., None], self.expansions[b], backend)
            aggregated = edge_aggregate(alpha, expanded, graph, backend)
            term = cg_contract(aggregated, context.receiver_powers[L - b][..., None], self.recouplings[b], backend)
            contracted = term if contracted is None else contracted + term
        return self.mixing(contracted)
