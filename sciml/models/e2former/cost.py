"""Multiply-adds per edge of one E2Former forward, by part: what the O(|E|) side of the model costs.

Counted: matrix products applied per edge (the edge networks; a first layer's type part is evaluated per
type pair, not per edge), the attention's q . k, the per-edge, per-channel products that form alpha, and the
aggregation (each summed number costs one multiply-add per channel). Not counted: element-wise activations
and norms, the softmax's exponentials, and everything per atom or per frame image (the node-side tensor
products, the feed-forward). ``per_pair_first_layers=False`` counts the first layers on the concatenated
(E, 3R) features, as E2Former evaluated them before :mod:`sciml.models.e2former.edges`.
"""

from __future__ import annotations

from torch import nn

from sciml.models.e2former.attention import Wigner6jAttention
from sciml.models.e2former.edges import EdgeMLP, EdgeTrunk


def _network(module: nn.Module, basis_size: int, per_pair: bool) -> int:
    """Multiply-adds per edge of an edge network (EdgeMLP, EdgeTrunk or a consumer's nn.Linear)."""
    linears = [module] if isinstance(module, nn.Linear) else [m for m in module.modules() if isinstance(m, nn.Linear)]
    total = 0
    for k, linear in enumerate(linears):
        reads_edge_features = k == 0 and isinstance(module, EdgeMLP | EdgeTrunk)
        inputs = basis_size if reads_edge_features and per_pair else linear.in_features
        total += inputs * linear.out_features
    return total


def edge_multiply_adds(model: nn.Module, per_pair_first_layers: bool = True) -> dict[str, int]:
    """Per-edge multiply-adds of ``model`` (an :class:`~sciml.models.e2former.model.E2Former`) by part:
    ``edge_networks`` (trunk, radial filters, logits, embedding radials), ``attention`` (q . k and the
    alpha products), ``aggregation`` (the factorised or dense sums), ``embedding_sums`` (the edge-degree
    embedding's sums) and ``total``."""
    basis = model.radial_basis.size
    parts = dict.fromkeys(("edge_networks", "attention", "aggregation", "embedding_sums"), 0)
    if model.edge_trunk is not None:
        parts["edge_networks"] += _network(model.edge_trunk, basis, per_pair_first_layers)
    embedding = model.edge_degree
    for l, radial in enumerate(embedding.radial):
        parts["edge_networks"] += _network(radial, basis, per_pair_first_layers)
        parts["embedding_sums"] += (2 * l + 2) * embedding.channels  # weight x envelope, then 2l + 1 sums
    for attention in (m for m in model.modules() if isinstance(m, Wigner6jAttention)):
        parts["edge_networks"] += _network(attention.edge_logit, basis, per_pair_first_layers)
        parts["attention"] += attention.heads * (attention.head_dim + 1)  # q . k, times the logit scale
        for branch in attention.branches:
            parts["edge_networks"] += _network(branch.radial, basis, per_pair_first_layers)
            parts["attention"] += 2 * branch.width  # softmax weight x radial filter, / |r|^L
            convolution = branch.convolution
            if convolution.dense:  # one tensor product per edge, then its sums
                coupling = convolution.coupling
                parts["aggregation"] += (coupling.out_dim + coupling.nonzeros) * branch.width
            else:
                parts["aggregation"] += sum(table.out_dim for table in convolution.expansions) * branch.width
    parts["total"] = sum(parts.values())
    return parts
