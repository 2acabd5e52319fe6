"""Compiled kernels against the pure-PyTorch reference (float64, values and first and second derivatives
to 1e-12), torch.library opcheck, gradcheck/gradgradcheck, backend selection, and the CUDA build."""

from __future__ import annotations

import shutil

import pytest
import torch

from sciml.equivariant import kernels
from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.kernels import build, ops
from sciml.equivariant.operations import WeightedTensorProduct, cg_contract, edge_aggregate, edge_dot
from sciml.equivariant.tensor_product import Coupling, coupling_table, expansion_table

TOL = 1e-12


@pytest.fixture(scope="module", autouse=True)
def compiled():
    build.load(with_cuda=False)  # a failed build fails the tests: the kernels are part of the package


def _graph(n_receivers=9, n_senders=11, n_edges=40, seed=0, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    receivers = torch.randint(0, n_receivers - 1, (n_edges,), generator=generator)  # last receiver: no edges
    senders = torch.randint(0, n_senders, (n_edges,), generator=generator)
    graph, _ = EdgeGraph.from_edges(receivers.to(device), senders.to(device), n_receivers, n_senders)
    return graph


def _derivatives(function, inputs, probe):
    """Value, first derivatives and second derivatives (of a scalar built from the first) w.r.t. inputs."""
    out = function(*inputs)
    first = torch.autograd.grad((out * probe).sum(), inputs, create_graph=True)
    second = torch.autograd.grad(sum((g * torch.cos(g)).sum() for g in first), inputs)
    return [out, *first, *second]


def _assert_agree(reference, kernel, tol=TOL):
    for r, k in zip(reference, kernel, strict=True):
        assert (r - k).abs().max() <= tol


def _leaf(*shape, seed, device="cpu", dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=dtype) * 0.5).to(device).requires_grad_()


@pytest.mark.parametrize("y_channels", [1, 6])
def test_cg_contract_kernel_equals_reference(y_channels):
    table = expansion_table((0, 1, 2), 2, 4)
    x, y = _leaf(7, 9, 6, seed=1), _leaf(7, 5, y_channels, seed=2)
    probe = torch.randn(7, table.out_dim, 6, dtype=torch.float64)
    _assert_agree(
        _derivatives(lambda a, b: cg_contract(a, b, table, "reference"), (x, y), probe),
        _derivatives(lambda a, b: cg_contract(a, b, table, "cpu"), (x, y), probe),
    )


def test_edge_aggregate_kernel_equals_reference():
    graph = _graph()
    alpha, x = _leaf(graph.row.numel(), 8, seed=3), _leaf(11, 9, 8, seed=4)
    probe = torch.randn(9, 9, 8, dtype=torch.float64)
    reference = _derivatives(lambda a, b: edge_aggregate(a, b, graph, "reference"), (alpha, x), probe)
    kernel = _derivatives(lambda a, b: edge_aggregate(a, b, graph, "cpu"), (alpha, x), probe)
    _assert_agree(reference, kernel)
    assert torch.all(kernel[0][-1] == 0)  # a receiver without edges gets exactly zero


def test_edge_dot_kernel_equals_reference():
    graph = _graph()
    a, b = _leaf(9, 9, 8, seed=5), _leaf(11, 9, 8, seed=6)
    probe = torch.randn(graph.row.numel(), 8, dtype=torch.float64)
    _assert_agree(
        _derivatives(lambda u, v: edge_dot(u, v, graph, "reference"), (a, b), probe),
        _derivatives(lambda u, v: edge_dot(u, v, graph, "cpu"), (a, b), probe),
    )


def test_per_edge_graph_aggregates_per_edge_values():
    """``EdgeGraph.per_edge``: the aggregation kernel sums per-edge values (senders = edges) like index_add."""
    graph = _graph()
    alpha, x = _leaf(graph.row.numel(), 8, seed=12), _leaf(graph.row.numel(), 5, 8, seed=13)
    probe = torch.randn(9, 5, 8, dtype=torch.float64)

    def by_index_add(a, b):
        return b.new_zeros(9, 5, 8).index_add(0, graph.row, a[:, None, :] * b)

    _assert_agree(
        _derivatives(by_index_add, (alpha, x), probe),
        _derivatives(lambda a, b: edge_aggregate(a, b, graph.per_edge(), "cpu"), (alpha, x), probe),
    )


def _op_samples():
    graph = _graph()
    table = expansion_table((0, 1), 1, 2)
    for dtype in (torch.float64, torch.float32):
        x, y = _leaf(5, 4, 3, seed=7, dtype=dtype), _leaf(5, 3, 1, seed=8, dtype=dtype)
        yield ops.cg_contract, (x, y, *table.sparse(dtype, torch.device("cpu")), table.out_dim)
        alpha, feats = _leaf(graph.row.numel(), 3, seed=9, dtype=dtype), _leaf(11, 4, 3, seed=10, dtype=dtype)
        yield ops.edge_aggregate, (alpha, feats, *graph.tensors())
        yield ops.edge_dot, (_leaf(9, 4, 3, seed=11, dtype=dtype), feats, *graph.tensors())


@pytest.mark.parametrize("sample", range(6))
def test_opcheck(sample):
    op, args = list(_op_samples())[sample]
    torch.library.opcheck(op, args)


def test_gradcheck_and_gradgradcheck():
    graph = _graph(5, 6, 15)
    table = expansion_table((0, 1), 1, 2)
    x, y = _leaf(4, 4, 2, seed=12), _leaf(4, 3, 2, seed=13)
    contract = lambda a, b: cg_contract(a, b, table, "cpu")  # noqa: E731
    assert torch.autograd.gradcheck(contract, (x, y)) and torch.autograd.gradgradcheck(contract, (x, y))
    alpha, feats = _leaf(graph.row.numel(), 2, seed=14), _leaf(6, 4, 2, seed=15)
    aggregate = lambda a, b: edge_aggregate(a, b, graph, "cpu")  # noqa: E731
    assert torch.autograd.gradcheck(aggregate, (alpha, feats))
    assert torch.autograd.gradgradcheck(aggregate, (alpha, feats))


def test_empty_graph():
    graph = _graph(n_edges=0)
    out = edge_aggregate(
        torch.zeros(0, 4, dtype=torch.float64), torch.randn(11, 9, 4, dtype=torch.float64), graph, "cpu"
    )
    assert out.shape == (9, 9, 4) and torch.all(out == 0)


def test_outputs_start_from_zero_in_memory_that_held_garbage():
    """The kernels allocate their outputs empty and zero each row themselves: memory freed from a NaN-filled
    tensor of the same size (which the allocator hands out again) must not leak into any output."""
    graph, table = _graph(), expansion_table((0, 1, 2), 2, 4)
    x, y = torch.randn(7, 9, 6, dtype=torch.float64), torch.randn(7, 5, 1, dtype=torch.float64)
    alpha, values = torch.randn(graph.row.numel(), 8, dtype=torch.float64), torch.randn(11, 9, 8, dtype=torch.float64)
    a = torch.randn(9, 9, 8, dtype=torch.float64)
    calls = {
        "cg_contract": (lambda backend: cg_contract(x, y, table, backend), (7, table.out_dim, 6)),
        "edge_aggregate": (lambda backend: edge_aggregate(alpha, values, graph, backend), (9, 9, 8)),
        "edge_dot": (lambda backend: edge_dot(a, values, graph, backend), (graph.row.numel(), 8)),
    }
    for name, (call, shape) in calls.items():
        expected = call("reference")
        for _ in range(5):
            garbage = torch.full(shape, float("nan"), dtype=torch.float64)
            del garbage
            out = call("cpu")
            assert not out.isnan().any() and (out - expected).abs().max() <= TOL, name


def test_backend_selection(monkeypatch):
    assert kernels.resolve_backend("auto", "cpu") == "cpu"
    assert kernels.resolve_backend("reference", "cpu") == "reference"
    with pytest.raises(ValueError, match="unknown kernel backend"):
        kernels.resolve_backend("fast", "cpu")
    with pytest.raises(ValueError, match="cannot run tensors on device"):
        kernels.resolve_backend("cuda", "cpu")

    def broken(with_cuda=False, verbose=False):
        raise kernels.KernelUnavailable("no C++ compiler (test)")

    monkeypatch.setattr(kernels, "load", broken)
    kernels._warned.clear()
    with pytest.warns(RuntimeWarning, match=r"reference backend \(no C\+\+ compiler \(test\)\)"):
        assert kernels.resolve_backend("auto", "cpu") == "reference"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same reason warns only once
        assert kernels.resolve_backend("auto", "cpu") == "reference"


def test_swapping_backend_keeps_state_dict():
    torch.manual_seed(0)
    reference = WeightedTensorProduct(
        Coupling((0, 1, 2), 1, (0, 1, 2), 4, 4, parity=False), backend="reference"
    ).double()
    compiled = WeightedTensorProduct(Coupling((0, 1, 2), 1, (0, 1, 2), 4, 4, parity=False), backend="cpu").double()
    assert reference.state_dict().keys() == compiled.state_dict().keys()
    compiled.load_state_dict(reference.state_dict())
    x, y = torch.randn(6, 9, 4, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    assert (reference(x, y) - compiled(x, y)).abs().max() < TOL
    assert compiled.backend == "cpu" and reference.backend == "reference"


def test_kernel_table_matches_reference_for_the_coupling_table():
    table, _ = coupling_table((0, 1, 2), 2, (0, 1, 2))
    x, y = _leaf(6, 9, 5, seed=16), _leaf(6, 5, 1, seed=17)
    assert (cg_contract(x, y, table, "reference") - cg_contract(x, y, table, "cpu")).abs().max() < TOL


@pytest.mark.cuda
def test_cuda_kernels_equal_reference():
    build.load(with_cuda=True)
    graph = _graph(device="cuda")
    alpha, x = _leaf(graph.row.numel(), 8, seed=3, device="cuda"), _leaf(11, 9, 8, seed=4, device="cuda")
    probe = torch.randn(9, 9, 8, dtype=torch.float64, device="cuda")
    _assert_agree(
        _derivatives(lambda a, b: edge_aggregate(a, b, graph, "reference"), (alpha, x), probe),
        _derivatives(lambda a, b: edge_aggregate(a, b, graph, "cuda"), (alpha, x), probe),
    )
    table = expansion_table((0, 1, 2), 2, 4)
    u, v = _leaf(7, 9, 6, seed=1, device="cuda"), _leaf(7, 5, 1, seed=2, device="cuda")
    probe = torch.randn(7, table.out_dim, 6, dtype=torch.float64, device="cuda")
    _assert_agree(
        _derivatives(lambda a, b: cg_contract(a, b, table, "reference"), (u, v), probe),
        _derivatives(lambda a, b: cg_contract(a, b, table, "cuda"), (u, v), probe),
    )
    torch.library.opcheck(ops.edge_aggregate, (alpha, x, *graph.tensors()))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(tmp_path):
    """CI has no GPU: compiling every .cu to an object file is what keeps a broken CUDA kernel out."""
    assert build.compile_cuda_object(tmp_path / "cuda_ops.o").stat().st_size > 0
