"""Structures and graph batches for tests: random molecules and crystals, rigid motions, permutations, and
the relative error the tests bound."""

from __future__ import annotations

import copy

import numpy as np
import torch
from ase import Atoms
from torch_geometric.data import Batch

from sciml.data.graph import frame_to_graph
from sciml.data.labels import read_frame


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference over the largest |b| (the relative error the tests bound)."""
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def random_molecule(numbers: list[int], seed: int = 0, spacing: float = 1.3) -> Atoms:
    """A random compact molecule-like cluster (no two atoms closer than ~0.8 spacing)."""
    rng = np.random.default_rng(seed)
    positions = []
    while len(positions) < len(numbers):
        candidate = rng.normal(scale=spacing * len(numbers) ** (1 / 3) / 2, size=3)
        if all(np.linalg.norm(candidate - p) > 0.8 * spacing for p in positions):
            positions.append(candidate)
    return Atoms(numbers=numbers, positions=positions, pbc=False)


def random_crystal(numbers: list[int], seed: int = 0, cell_length: float = 3.2, skew: float = 0.3) -> Atoms:
    """A small skewed periodic cell with random fractional positions (atoms see their own images)."""
    rng = np.random.default_rng(seed)
    cell = np.eye(3) * cell_length + rng.uniform(-skew, skew, size=(3, 3))
    return Atoms(numbers=numbers, cell=cell, scaled_positions=rng.random((len(numbers), 3)), pbc=True)


def graph_batch(structures: list[Atoms], cutoff: float, dtype: torch.dtype = torch.float64) -> Batch:
    """A graph batch of unlabelled structures (data-layer conventions)."""
    graphs = [frame_to_graph(read_frame(atoms, "test", k), cutoff, dtype) for k, atoms in enumerate(structures)]
    return Batch.from_data_list(graphs)


def moved(batch: Batch, rotation: torch.Tensor | None = None, translation: torch.Tensor | None = None) -> Batch:
    """The batch mapped by an orthogonal matrix (a rotation, or a reflection when det = -1) applied to positions,
    cell and shifts, and then translated."""
    batch = copy.copy(batch)
    if rotation is not None:
        rotation = rotation.to(batch.pos.dtype)
        batch.pos, batch.shifts, batch.cell = batch.pos @ rotation.T, batch.shifts @ rotation.T, batch.cell @ rotation.T
    if translation is not None:
        batch.pos = batch.pos + translation.to(batch.pos.dtype)
    return batch


def permuted(batch: Batch, permutation: torch.Tensor) -> Batch:
    """Atoms reordered by ``permutation`` (within structures: pass one that keeps ``batch.batch`` sorted)."""
    inverse = torch.empty_like(permutation)
    inverse[permutation] = torch.arange(permutation.numel())
    batch = copy.copy(batch)
    batch.pos, batch.numbers, batch.batch = batch.pos[permutation], batch.numbers[permutation], batch.batch[permutation]
    batch.edge_index = inverse[batch.edge_index]
    return batch


def with_dtype(batch: Batch, dtype: torch.dtype) -> Batch:
    """A shallow copy of ``batch`` with positions, shifts and cells in ``dtype``."""
    batch = copy.copy(batch)
    batch.pos, batch.shifts, batch.cell = batch.pos.to(dtype), batch.shifts.to(dtype), batch.cell.to(dtype)
    return batch


def randomise_output_head(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Give a freshly built E2Former a random last energy layer (it starts at zero, which makes an untrained
    model constant and its force tests vacuous)."""
    generator = torch.Generator().manual_seed(seed)
    last = model.energy_head[-1]
    with torch.no_grad():
        last.weight.copy_(torch.randn(last.weight.shape, generator=generator) / last.weight.shape[1] ** 0.5)
    return model
