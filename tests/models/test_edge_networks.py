"""The edge networks: per-type-pair first layers equal the concatenated features (float64), old checkpoints keep
their keys, the shared trunk gives an exact, equivariant model, and the per-edge multiply-add count."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from sciml.models import E2Former
from sciml.models.baselines import use_edge_convolutions
from sciml.models.e2former.cost import edge_multiply_adds
from sciml.models.e2former.edges import EdgeInputs, EdgeMLP
from sciml.nn.forces import ForceStressOutput
from sciml.nn.mlp import MLP
from sciml.testing import EnergyModelTests, graph_batch, random_crystal, random_molecule, relative
from tests.models.test_e2former import make_e2former


def edge_inputs(n_edges: int = 50, size: int = 6, n_types: int = 3, seed: int = 0) -> EdgeInputs:
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    pair = torch.randint(0, n_types**2, (n_edges,), generator=generator)
    return EdgeInputs(normal(n_edges, size).requires_grad_(), pair, normal(n_types, size), normal(n_types, size))


def test_per_pair_first_layer_equals_the_concatenated_features():
    edges = edge_inputs()
    torch.manual_seed(0)
    layer = nn.Linear(18, 7).double()
    reference = layer(edges.concatenated())
    assert relative(edges.linear(layer), reference) < 1e-13
    grad = torch.autograd.grad(edges.linear(layer).square().sum(), edges.basis)[0]
    assert relative(grad, torch.autograd.grad(reference.square().sum(), edges.basis)[0]) < 1e-13
    assert (edges.concatenated()[:, 6:12] == edges.receiver_embedding[edges.pair // 3]).all()


def test_edge_mlp_takes_edge_inputs_or_features_and_keeps_mlp_keys():
    edges = edge_inputs(seed=1)
    torch.manual_seed(0)
    network = EdgeMLP((18, 16, 4)).double()
    plain = MLP((18, 16, 4), layer_norm=True).double()
    plain.load_state_dict(network.state_dict())  # same keys and shapes as before the per-pair evaluation
    assert relative(network(edges), plain(edges.concatenated())) < 1e-13
    assert relative(network(edges.concatenated()), plain(edges.concatenated())) < 1e-15


def test_per_layer_model_keeps_the_checkpoint_layout():
    """Checkpoints written before the per-pair evaluation load: the edge MLPs read (3R) features."""
    state = make_e2former(edge_network="per_layer", edge_hidden=None).state_dict()
    assert state["blocks.0.attention.edge_logit.0.weight"].shape == (8, 24)
    assert state["edge_degree.radial.2.0.weight"].shape == (8, 24)
    assert not any(key.startswith("edge_trunk") for key in state)


class TestE2FormerPerLayerEdgeNetworks(EnergyModelTests):
    """Every radial filter and logit with its own MLP of width C (the layout before the shared trunk, now the
    default; TestE2Former covers that): the shared energy-model tests (float32 and float64)."""

    def make_model(self, dtype):
        return make_e2former(dtype, edge_network="per_layer", edge_hidden=None)


@pytest.mark.parametrize("edge_network", ["shared", "per_layer"])
def test_narrow_edge_networks_are_exact_against_dense_and_e3nn(edge_network):
    """Factorised = dense (kernel-matched per-edge product) = e3nn per edge, float64, with the crystal's stress."""
    structures = [random_crystal([29, 29, 29], seed=2), random_molecule([8, 1, 1, 6], seed=3)]
    batch = graph_batch(structures, 4.0)
    factorised = make_e2former(edge_network=edge_network, edge_hidden=6)
    dense = make_e2former(edge_network=edge_network, edge_hidden=6, dense=True)
    dense.load_state_dict(factorised.state_dict())
    reference = ForceStressOutput(factorised)(batch, stress=True)
    for other in (dense, use_edge_convolutions(copy.deepcopy(factorised))):
        outputs = ForceStressOutput(other)(batch, stress=True)
        for key in ("energy", "forces"):
            assert relative(reference[key], outputs[key]) < 1e-10, key
        assert relative(reference["stress"][0], outputs["stress"][0]) < 1e-10  # the molecule has no volume


def test_unknown_edge_network_is_refused():
    with pytest.raises(ValueError, match="edge_network"):
        E2Former([1], edge_network="per_edge")


def test_edge_multiply_adds_counts_the_recommended_architecture():
    """C 64, lmax 2, order 1, 3 layers, R 16 (E2Former's defaults but 16 radial functions), counted by hand."""
    settings = dict(channels=64, lmax=2, layers=3, heads=4, order=1, radial_basis=16, radial="gaussian")
    model = E2Former([1, 6, 8], **settings, edge_network="per_layer", edge_hidden=None)
    before = edge_multiply_adds(model, per_pair_first_layers=False)
    # embedding: 3 MLPs 48-64-64; per layer: logit 48-64-4, radial 48-64-64
    assert before["edge_networks"] == 3 * (48 * 64 + 64 * 64) + 3 * (48 * 64 + 64 * 4 + 48 * 64 + 64 * 64)
    assert before["aggregation"] == 3 * (9 + 12) * 64  # X^(0) and X^(1) blocks that the O(3) paths need
    after = edge_multiply_adds(model)
    assert after["edge_networks"] == before["edge_networks"] - 9 * 32 * 64  # first layers read R, not 3R
    shared = edge_multiply_adds(E2Former([1, 6, 8], radial_basis=16))  # the defaults' shared trunk of width 32
    assert shared["edge_networks"] == 16 * 32 + 3 * 32 * 64 + 3 * (32 * 4 + 32 * 64)
    assert shared["total"] < 0.35 * before["total"]
