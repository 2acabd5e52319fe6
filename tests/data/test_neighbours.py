"""Neighbour lists equal ASE's on periodic (skewed, tiny, mixed) and non-periodic systems."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.neighborlist import neighbor_list

from sciml.data import radius_graph

BACKENDS = ["vesin", "torch"] + (["torch_cluster"] if importlib.util.find_spec("torch_cluster") else [])


def _systems():
    rng = np.random.default_rng(0)
    skewed = np.array([[4.0, 0, 0], [1.7, 3.6, 0], [-0.9, 1.1, 3.3]])
    yield "skewed", Atoms("Cu8", cell=skewed, scaled_positions=rng.random((8, 3)), pbc=True), 3.5
    yield (
        "tiny",
        Atoms("Al2", cell=np.diag([1.9, 2.2, 2.5]) + 0.3, scaled_positions=rng.random((2, 3)), pbc=True),
        4.0,
    )
    yield (
        "mixed",
        Atoms(
            "Ni6",
            cell=[[3.0, 0.4, 0], [0, 3.2, 0], [0, 0, 12.0]],
            scaled_positions=rng.random((6, 3)),
            pbc=[True, True, False],
        ),
        3.0,
    )
    yield "molecule", Atoms("C5H7", positions=rng.normal(scale=1.6, size=(12, 3)), pbc=False), 2.5
    outside = Atoms("Cu5", cell=skewed, scaled_positions=rng.random((5, 3)) * 3 - 1, pbc=True)
    yield "unwrapped", outside, 3.2


def _as_set(i, j, shifts, decimals=6):
    return sorted(zip(i.tolist(), j.tolist(), map(tuple, np.round(shifts, decimals).tolist()), strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,atoms,cutoff", list(_systems()), ids=[s[0] for s in _systems()])
def test_equals_ase(backend, name, atoms, cutoff):
    i_ref, j_ref, s_ref = neighbor_list("ijS", atoms, cutoff)
    expected = _as_set(i_ref, j_ref, s_ref @ atoms.cell[:])
    pos = torch.tensor(atoms.positions, dtype=torch.float64)
    edge_index, shifts = radius_graph(
        pos, torch.tensor(atoms.cell[:]), torch.tensor(atoms.pbc), cutoff, backend=backend
    )
    got = _as_set(edge_index[0].numpy(), edge_index[1].numpy(), shifts.numpy())
    assert len(got) == len(expected) > 0
    assert got == expected
    vectors = pos[edge_index[1]] + shifts - pos[edge_index[0]]
    assert torch.all(vectors.norm(dim=1) < cutoff)
    if name == "tiny":  # the cell is smaller than the cutoff: atoms see their own images
        assert torch.any(edge_index[0] == edge_index[1])


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown neighbour-list backend"):
        radius_graph(torch.zeros(1, 3), torch.eye(3), torch.tensor([False] * 3), 1.0, backend="nope")
