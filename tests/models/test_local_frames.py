"""Local frames of the factorised convolution: the cells, exactness (frames never change the result), and
float32 forces whose error does not grow with the periodic box."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from ase.build import bulk

from sciml.models import E2Former
from sciml.models.e2former.context import GraphContext, local_frames, unique_rows
from sciml.nn.forces import ForceStressOutput
from sciml.testing import graph_batch, random_crystal, random_molecule, randomise_output_head, relative, with_dtype

CUTOFF = 4.0


def carbon_box(repeat: int):
    atoms = bulk("C", "fcc", a=3.61, cubic=True).repeat((repeat, repeat, repeat))
    atoms.rattle(0.05, seed=1)
    return atoms


def model(frame_size: float | None, dtype=torch.float64, species=(6,), **kwargs) -> E2Former:
    torch.manual_seed(0)
    e2former = E2Former(
        list(species),
        cutoff=CUTOFF,
        channels=8,
        lmax=2,
        layers=2,
        heads=2,
        radial_basis=8,
        frame_size=frame_size,
        **kwargs,
    )
    return randomise_output_head(e2former).to(dtype).eval()


def test_unique_rows_equals_torch_unique():
    generator = torch.Generator().manual_seed(0)
    key = torch.randint(-2, 3, (500, 4), generator=generator).double()
    count, inverse, first = unique_rows(key)
    distinct, expected_inverse = torch.unique(key, dim=0, return_inverse=True)
    assert count == distinct.shape[0]
    torch.testing.assert_close(inverse, expected_inverse)  # same (lexicographic) ids
    torch.testing.assert_close(key[first], distinct)


def test_cells_cover_each_structure_and_bound_the_expansions():
    batch = graph_batch([carbon_box(6), random_molecule([8, 1, 1], seed=3)], CUTOFF)  # 21.7 Å box + a molecule
    cell, origin = local_frames(batch.pos, batch.batch, 2, 8.0)
    in_box = batch.batch == 0
    assert cell[in_box].unique().numel() == 8  # floor(21.7 / 8) = 2 cells per axis, of edge 10.8 Å
    assert cell[~in_box].unique().numel() == 1  # smaller than two cells: one frame (its bounding-box centre)
    assert set(cell[in_box].tolist()).isdisjoint(cell[~in_box].tolist())
    assert (batch.pos[in_box] - origin[in_box]).abs().max() <= 21.7 / 4 + 1e-6
    context = GraphContext.build(
        batch.pos, torch.zeros_like(batch.numbers), batch.batch, 2, batch.edge_index, batch.shifts, 1, 8.0
    )
    reach = math.sqrt(3) * 21.7 / 4 + CUTOFF
    assert context.image_positions.norm(dim=1).max() <= reach  # never farther than half a cell diagonal + cutoff
    centred = GraphContext.build(
        batch.pos, torch.zeros_like(batch.numbers), batch.batch, 2, batch.edge_index, batch.shifts, 1, math.inf
    )
    assert centred.image_positions.norm(dim=1).max() > reach  # what the frames prevent
    torch.testing.assert_close(context.vectors, centred.vectors, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dense", [False, True])
def test_frames_never_change_energies_forces_or_stress(dense):
    """Tiny cells (1.5 Å: many frames, senders duplicated across them) against one frame per structure,
    float64, molecules and small periodic cells (atoms seeing their own images) in one batch."""
    structures = [
        random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1),
        random_crystal([29, 29, 29], seed=2),
        random_crystal([29, 29], seed=4, cell_length=2.6),
    ]
    batch = graph_batch(structures, CUTOFF)
    species = (1, 6, 8, 29)
    tiny = ForceStressOutput(model(1.5, species=species, dense=dense))(batch, stress=True)
    single = ForceStressOutput(model(math.inf, species=species, dense=dense))(batch, stress=True)
    assert tiny["forces"].abs().max() > 1e-4
    for key in ("energy", "forces"):
        assert relative(tiny[key], single[key]) < 1e-10, key
    assert relative(tiny["stress"][1:], single["stress"][1:]) < 1e-10  # periodic cells only (no volume otherwise)


def float32_force_errors(frame_size: float | None, **settings) -> list[float]:
    """RMS relative error of float32 forces against float64 on the same (float32-rounded) positions, for
    boxes of 108, 864 and 4000 atoms (10.8, 21.7 and 36.1 Å)."""
    errors = []
    exact = model(frame_size, **settings)
    single = copy.deepcopy(exact).float()
    for repeat in (3, 6, 10):
        batch = with_dtype(graph_batch([carbon_box(repeat)], CUTOFF, torch.float32), torch.float32)
        reference = ForceStressOutput(exact)(with_dtype(batch, torch.float64))["forces"].detach()
        got = ForceStressOutput(single)(batch)["forces"].detach().double()
        errors.append(float((got - reference).pow(2).mean().sqrt() / reference.pow(2).mean().sqrt()))
    return errors


# the defaults of checkpoint format version 1: there the cancellation shows already at 4000 atoms
VERSION_1 = {"norm": "joint", "radial": "gaussian", "edge_network": "per_layer", "edge_hidden": None}


def test_float32_force_error_does_not_grow_with_the_box():
    """Measured with local frames (defaults): 9.7e-6, 7.6e-6, 6.7e-6; the defaults without frames stay at
    9.7 / 8.3 / 7.9e-6 up to 4000 atoms, so the control is the version-1 architecture (joint norm, Gaussians,
    per-layer edges), where one centred frame per box grows 7.1 / 9.4 / 14e-6 (the cancellation of solid
    harmonics of positions up to the box size) and local frames keep 7.1 / 5.9 / 5.8e-6."""
    local = float32_force_errors(2 * CUTOFF)
    assert max(local) < 2e-5
    assert local[-1] < 1.1 * local[0]
    local, centred = float32_force_errors(2 * CUTOFF, **VERSION_1), float32_force_errors(math.inf, **VERSION_1)
    assert local[-1] < 1.1 * local[0]
    assert centred[-1] > 1.2 * centred[0]  # the same test fails without local frames
