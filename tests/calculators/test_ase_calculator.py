"""SciMLCalculator: ASE gradient tests for forces and stress, invariance, extensivity, NVE energy
conservation, checkpoint round trips, refusals and the neighbour-list skin."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from ase import Atoms, units
from ase.build import bulk, molecule
from ase.calculators.calculator import PropertyNotImplementedError
from ase.calculators.test import gradient_test
from ase.filters import FrechetCellFilter
from ase.md.verlet import VelocityVerlet

from sciml.calculators import CheckpointError, SciMLCalculator
from sciml.equivariant.so3 import random_rotation
from sciml.md import MDSettings, energy_drift, run_ase_md
from sciml.models import E2Former
from sciml.testing import randomise_output_head


def small_model(**kwargs) -> E2Former:
    torch.manual_seed(0)
    model = E2Former(
        [1, 6, 8, 29],
        cutoff=3.5,
        channels=8,
        layers=2,
        heads=2,
        radial_basis=8,
        avg_neighbours=8.0,
        energy_reference=[-1.0, -2.0, -3.0, -4.0],
        **kwargs,
    )
    return randomise_output_head(model).eval()


@pytest.fixture
def calculator():
    return SciMLCalculator(small_model(), dtype="float64", skin=0.3)


def copper(repeat=(1, 1, 1)) -> Atoms:
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat(repeat)
    atoms.rattle(0.05, seed=1)
    return atoms


def ethanol() -> Atoms:
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.02, seed=2)
    return atoms


def test_forces_pass_ase_gradient_test(calculator):
    atoms = ethanol()
    atoms.calc = calculator
    analytic, numeric = gradient_test(atoms)
    assert np.abs(analytic).max() > 1e-3  # a real, non-zero force was tested
    np.testing.assert_allclose(analytic, numeric, atol=1e-6)


def test_stress_passes_gradient_test_through_cell_filter(calculator):
    atoms = copper()
    atoms.calc = calculator
    analytic, numeric = gradient_test(FrechetCellFilter(atoms))
    np.testing.assert_allclose(analytic, numeric, atol=1e-5)
    assert np.abs(atoms.get_stress()).max() > 1e-4  # a real, non-zero stress was tested


def test_rotation_invariance_and_equivariance(calculator):
    atoms = copper((1, 1, 2))
    atoms.calc = calculator
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()
    rotation = random_rotation(generator=torch.Generator().manual_seed(4)).numpy()
    rotated = atoms.copy()
    rotated.set_cell(atoms.cell[:] @ rotation.T, scale_atoms=False)
    rotated.positions = atoms.positions @ rotation.T
    rotated.calc = SciMLCalculator(small_model(), dtype="float64")
    assert abs(rotated.get_potential_energy() - energy) < 1e-10 * abs(energy)
    np.testing.assert_allclose(rotated.get_forces(), forces @ rotation.T, atol=1e-10)


def chirality(atoms: Atoms) -> float:
    """Signed volume spanned by the first carbon's three nearest neighbours (its sign flips in a mirror)."""
    centre = atoms.positions[0]
    nearest = np.argsort(np.linalg.norm(atoms.positions - centre, axis=1))[1:4]
    return float(np.linalg.det(atoms.positions[nearest] - centre))


@pytest.mark.parametrize("parity", [True, False])
def test_enantiomers_get_the_same_energy(parity):
    """A rattled ethanol (no symmetry left: chiral) and its mirror image. The O(3) model gives them the same
    energy and mirrored forces; the SO(3)-only model (parity=False) does not, which shows the test can fail."""
    left = ethanol()
    right = left.copy()
    right.positions = left.positions * [-1.0, 1.0, 1.0]
    assert chirality(left) * chirality(right) < 0 and abs(chirality(left)) > 0.1  # a true enantiomer pair
    energies, forces = [], []
    for atoms in (left, right):
        atoms.calc = SciMLCalculator(small_model(parity=parity), dtype="float64")
        energies.append(atoms.get_potential_energy())
        forces.append(atoms.get_forces())
    assert np.abs(forces[0]).max() > 1e-3
    difference = max(abs(energies[1] - energies[0]), np.abs(forces[1] - forces[0] * [-1.0, 1.0, 1.0]).max())
    if parity:
        assert difference < 1e-10 * max(1.0, abs(energies[0]))
    else:
        assert difference > 1e-6


def test_supercell_energy_is_extensive(calculator):
    cell = copper()
    cell.calc = calculator
    supercell = cell.repeat((2, 2, 2))
    supercell.calc = SciMLCalculator(small_model(), dtype="float64")
    assert abs(supercell.get_potential_energy() / (8 * cell.get_potential_energy()) - 1) < 1e-5
    np.testing.assert_allclose(supercell.get_forces()[: len(cell)], cell.get_forces(), atol=1e-8)
    np.testing.assert_allclose(supercell.get_stress(), cell.get_stress(), atol=1e-8)


def test_atoms_far_outside_the_cell_give_the_same_results_and_graph(calculator):
    """MD engines do not wrap positions: atoms translated by lattice vectors (unwrapped coordinates after a
    long run) give the same energy, forces and stress (float64, 1e-10) and a graph of the same size."""
    atoms = copper((2, 2, 2))
    atoms.calc = calculator
    energy, forces, stress = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
    images = calculator._graph(atoms).edge_index.shape[1]
    travelled = atoms.copy()
    jumps = np.random.default_rng(3).integers(-6, 7, size=(len(atoms), 3))
    travelled.positions += jumps @ travelled.cell[:]
    travelled.calc = SciMLCalculator(small_model(), dtype="float64", skin=0.3)
    assert abs(travelled.get_potential_energy() - energy) < 1e-10 * abs(energy)
    np.testing.assert_allclose(travelled.get_forces(), forces, atol=1e-10)
    np.testing.assert_allclose(travelled.get_stress(), stress, atol=1e-10)
    graph = travelled.calc._graph(travelled)
    longest = float(atoms.cell.lengths().max())
    assert graph.edge_index.shape[1] == images and float(graph.shifts.abs().max()) < 2 * longest


def test_skin_never_returns_stale_forces():
    atoms = ethanol()
    with_skin = SciMLCalculator(small_model(), dtype="float64", skin=1.0)
    without = SciMLCalculator(small_model(), dtype="float64", skin=0.0)
    atoms.calc = with_skin
    atoms.set_momenta(
        np.random.default_rng(0).normal(scale=0.3, size=(len(atoms), 3)) * np.sqrt(atoms.get_masses())[:, None]
    )
    dynamics = VelocityVerlet(atoms, 1.0 * units.fs)
    for _ in range(60):
        dynamics.run(1)
        reference = atoms.copy()
        reference.calc = without
        np.testing.assert_allclose(atoms.get_forces(), reference.get_forces(), atol=1e-12)
    assert 1 <= with_skin.rebuilds < without.rebuilds


def test_refusals(calculator, tmp_path):
    unknown_element = Atoms("CN", positions=[[0, 0, 0], [0, 0, 1.2]])
    unknown_element.calc = calculator
    with pytest.raises(ValueError, match=r"elements \['N'\] are not among the model's species"):
        unknown_element.get_potential_energy()
    molecule = ethanol()
    molecule.calc = calculator
    with pytest.raises(PropertyNotImplementedError, match="periodic"):
        molecule.get_stress()
    in_training_mode = ethanol()
    in_training_mode.calc = SciMLCalculator(small_model().train(), dtype="float64")
    with pytest.raises(RuntimeError, match="training mode"):
        in_training_mode.get_potential_energy()
    unsafe = tmp_path / "unsafe.ckpt"
    with open(unsafe, "wb") as handle:
        pickle.dump({"sciml_model": {"class_path": "sciml.models.E2Former"}, "payload": Atoms("H")}, handle)
    with pytest.raises(CheckpointError, match="needs arbitrary pickled code"):
        SciMLCalculator.from_checkpoint(unsafe)
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    with pytest.raises(CheckpointError, match="no 'sciml_model' entry"):
        SciMLCalculator.from_checkpoint(tmp_path / "foreign.ckpt")
    e2former = "sciml.models.e2former.model.E2Former"
    crafted = {
        "os.system": ({"class_path": "os.system", "init_args": {}}, "'os.system' is not a registered model"),
        "cli": ({"class_path": "sciml.cli.run", "init_args": {"args": ["fit"]}}, "'sciml.cli.run' is not a registered"),
        "huge": (
            {"class_path": e2former, "init_args": {"species": [1], "cutoff": 4.0, "channels": 10**9}},
            r"init_args.channels of .* = 1000000000 is out of range",
        ),
        "unknown": (
            {"class_path": e2former, "init_args": {"species": [1], "cutoff": 4.0, "payload": "x"}},
            "init_args do not fit .*unexpected keyword argument 'payload'",
        ),
        "nan": ({"class_path": e2former, "init_args": {"species": [1], "cutoff": float("nan")}}, "cutoff .* is NaN"),
    }
    for name, (spec, message) in crafted.items():
        torch.save({"sciml_model": spec, "state_dict": {}}, tmp_path / f"{name}.ckpt")
        with pytest.raises(CheckpointError, match=message):
            SciMLCalculator.from_checkpoint(tmp_path / f"{name}.ckpt")


def test_checkpoint_round_trip_and_nve_conservation(quickstart_run):
    _, checkpoint = quickstart_run
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    again = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    from ase.io import read

    atoms = read("data/ethanol_gfn2.extxyz", index=-1)
    atoms.calc = None
    first = atoms.copy()
    first.calc = calculator
    second = atoms.copy()
    second.calc = again
    assert first.get_potential_energy() == second.get_potential_energy()
    assert np.array_equal(first.get_forces(), second.get_forces())
    assert abs(first.get_potential_energy() - read("data/ethanol_gfn2.extxyz", index=-1).get_potential_energy()) < 1.0
    result = run_ase_md(atoms, calculator, MDSettings("nve", timestep=0.5, steps=800, temperature=300.0))  # 0.4 ps
    slope, excursion = energy_drift(result["times_ps"], result["total_energy"], len(atoms))
    assert abs(slope) < 1e-3 and excursion < 1e-3


def test_potential_wrapper_follows_the_model_mode():
    """An eval-mode model gives an eval-mode ForceStressOutput (no create_graph in the calculator's backward:
    before, every MD step kept the graph for a second derivative)."""
    calculator = SciMLCalculator(small_model(), dtype="float64")
    assert not calculator.potential.training
