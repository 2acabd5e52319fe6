"""Tensor-product tables: layouts, the exact node factorisation of the edge product, equivariance."""

from __future__ import annotations

import pytest
import torch

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.kernels import resolve_backend
from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.operations import WeightedTensorProduct, cg_contract, edge_aggregate
from sciml.equivariant.so3 import couple, random_rotation, solid_harmonics, wigner_d
from sciml.equivariant.tensor_product import (
    Coupling,
    coupling_table,
    expansion_table,
    recoupled_blocks,
    recoupling_table,
)

DEGREES = (0, 1, 2)
BACKENDS = ["reference", "cpu"]


def rotate_features(x: torch.Tensor, rotation: torch.Tensor, degrees) -> torch.Tensor:
    """Apply D^l(R) blockwise to (N, M, C) features of a layout."""
    blocks = [
        torch.einsum("ij,njc->nic", wigner_d(l, rotation), x[:, s])
        for l, s in zip(degrees, DegreeLayout(degrees).slices, strict=True)
    ]
    return torch.cat(blocks, dim=1)


def test_coupling_table_blocks_are_cg_couplings():
    table, layout = coupling_table(DEGREES, 1, DEGREES)
    x = torch.randn(4, 9, 3, dtype=torch.float64)
    y = torch.randn(4, 3, dtype=torch.float64)
    out = table.reference(x, y[..., None])
    for J in DEGREES:
        for p, a in enumerate(layout.paths[J]):
            direct = couple(x[:, a * a : (a + 1) ** 2].transpose(1, 2), y[:, None, :], a, 1, J).transpose(1, 2)
            n_paths = len(layout.paths[J])
            got = out[:, layout.start[J] + p : layout.start[J] + (2 * J + 1) * n_paths : n_paths]
            torch.testing.assert_close(got, direct, atol=1e-14, rtol=0)


def _random_graph(n: int, e: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    receivers = torch.randint(0, n, (e,), generator=generator)
    senders = torch.randint(0, n, (e,), generator=generator)
    keep = receivers != senders
    return receivers[keep], senders[keep], generator


@pytest.mark.parametrize("parity", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("L", [1, 2, 3])
def test_node_factorisation_equals_dense_edge_product(L, backend, parity):
    """sum_j alpha_ij [h_j ⊗ P^L(r_j - r_i)]^J computed per edge == expansion, aggregation, recoupling."""
    resolve_backend(backend)  # loads the compiled kernels (the functional ops do not), so the test runs alone
    n, channels = 12, 5
    receivers, senders, generator = _random_graph(n, 60, seed=L)
    pos = torch.randn(n, 3, dtype=torch.float64, generator=generator) * 2
    h = torch.randn(n, 9, channels, dtype=torch.float64, generator=generator)
    graph, order = EdgeGraph.from_edges(receivers, senders, n, n)
    alpha = torch.randn(graph.row.numel(), channels, dtype=torch.float64, generator=generator)

    table, _ = coupling_table(DEGREES, L, DEGREES, parity)
    edge_vectors = pos[graph.col] - pos[graph.row]
    per_edge = table.reference(h[graph.col], solid_harmonics(L, edge_vectors)[..., None])
    dense = torch.zeros(n, table.out_dim, channels, dtype=torch.float64).index_add(
        0, graph.row, alpha[:, None] * per_edge
    )

    factorised = torch.zeros_like(dense)
    for b in range(L + 1):
        max_degree = max(DEGREES) + L - b
        # with parity only the blocks that an output path needs (without it: all of them)
        blocks = recoupled_blocks(DEGREES, L, b, DEGREES, max_degree, parity) if parity else None
        expansion = expansion_table(DEGREES, b, max_degree, blocks)
        expanded = cg_contract(h, solid_harmonics(b, pos)[..., None], expansion, backend)
        aggregated = edge_aggregate(alpha, expanded, graph, backend)
        recoupled = recoupling_table(DEGREES, L, b, DEGREES, max_degree, parity, blocks)
        factorised += cg_contract(aggregated, solid_harmonics(L - b, pos)[..., None], recoupled, backend)
    relative = (factorised - dense).abs().max() / dense.abs().max()
    assert relative < 1e-12


@pytest.mark.parametrize("backend", BACKENDS)
def test_weighted_product_is_equivariant(backend):
    torch.manual_seed(0)
    product = WeightedTensorProduct(Coupling(DEGREES, 1, DEGREES, 4, 6, parity=False), backend=backend).double()
    x = torch.randn(10, 9, 4, dtype=torch.float64)
    r = torch.randn(10, 3, dtype=torch.float64)
    rotation = random_rotation(generator=torch.Generator().manual_seed(3))
    rotated_in = product(rotate_features(x, rotation, DEGREES), solid_harmonics(1, r @ rotation.T))
    rotated_out = rotate_features(product(x, solid_harmonics(1, r)), rotation, DEGREES)
    torch.testing.assert_close(rotated_in, rotated_out, atol=1e-12, rtol=0)
    assert product.backend == backend


@pytest.mark.parametrize("parity", [True, False])
def test_parity_allowed_paths_commute_with_inversion(parity):
    """Under inversion a natural-parity degree-l block picks up (-1)^l and P^1(-r) = -P^1(r). Only the
    parity-allowed product commutes with it; the full SO(3) product (1 ⊗ 1 -> 1 etc.) does not."""
    torch.manual_seed(0)
    product = WeightedTensorProduct(Coupling(DEGREES, 1, DEGREES, 4, 4, parity)).double()
    x = torch.randn(10, 9, 4, dtype=torch.float64)
    r = torch.randn(10, 3, dtype=torch.float64)
    signs = torch.tensor([(-1.0) ** l for l in DEGREES for _ in range(2 * l + 1)], dtype=torch.float64)[:, None]
    inverted = product(x * signs, solid_harmonics(1, -r))
    error = (inverted - product(x, solid_harmonics(1, r)) * signs).abs().max()
    if parity:
        assert error < 1e-12
    else:
        assert error > 1e-3


def test_degree_layout_offsets_slices_and_e3nn_dims():
    from e3nn import o3

    layout = DegreeLayout((0, 1, 1, 2))
    assert layout.offsets == (0, 1, 4, 7) and layout.dim == 12 == o3.Irreps("0e + 1o + 1o + 2e").dim
    assert [s.stop - s.start for s in layout.slices] == [1, 3, 3, 5]
    full = DegreeLayout.up_to(3)
    assert full.slices[2] == slice(4, 9) and full.dim == 16 and list(full) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="degrees must be >= 0"):
        DegreeLayout((0, -1))


def test_degree_blocks_are_the_slices_as_views_with_the_same_gradient():
    layout = DegreeLayout((0, 1, 1, 2))
    x = torch.randn(4, layout.dim, 3, dtype=torch.float64, requires_grad=True)
    blocks = layout.blocks(x)
    assert layout.sizes == (1, 3, 3, 5) and len(blocks) == 4
    for block, s in zip(blocks, layout.slices, strict=True):
        assert block.data_ptr() == x[:, s].data_ptr() and torch.equal(block, x[:, s])
    weights = torch.randn(layout.dim, 3, dtype=torch.float64)
    pairs = zip(blocks, layout.slices, strict=True)
    (split_gradient,) = torch.autograd.grad(sum((block * weights[s]).sum() for block, s in pairs), x)
    (slice_gradient,) = torch.autograd.grad(sum((x[:, s] * weights[s]).sum() for s in layout.slices), x)
    assert torch.equal(split_gradient, slice_gradient)


def test_reset_parameters_redraws_the_equivariant_weights():
    from sciml.nn.so3_layers import EquivariantRMSNorm, SO3Linear

    torch.manual_seed(0)
    for module in (WeightedTensorProduct(Coupling(DEGREES, 1, DEGREES, 3, 3, parity=False)).mixing, SO3Linear(2, 3, 4)):
        before = [p.detach().clone() for p in module.parameters() if p.numel() > 4]
        module.reset_parameters()
        after = [p for p in module.parameters() if p.numel() > 4]
        assert before and all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    norm = EquivariantRMSNorm(2, 3)
    with torch.no_grad():
        norm.weight.mul_(3.0)
    norm.reset_parameters()
    assert torch.equal(norm.weight, torch.ones(3, 3))
