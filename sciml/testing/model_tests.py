"""``EnergyModelTests``: the tests every energy model gets (subclass it and provide ``make_model``).

Tolerances (relative): float64 1e-10; float32 1e-5 for energies and 1e-4 for forces.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk

from sciml.equivariant.so3 import random_rotation
from sciml.nn.forces import ForceStressOutput
from sciml.testing.structures import (
    graph_batch,
    moved,
    permuted,
    random_crystal,
    random_molecule,
    relative,
    with_dtype,
)

TOLERANCES = {torch.float64: (1e-10, 1e-10), torch.float32: (1e-5, 1e-4)}


class EnergyModelTests:
    """Subclasses define ``make_model(self, dtype) -> nn.Module`` (eval mode, species H, C, O, Cu) and
    ``cutoff``. The model must not be constant (an untrained model with a zero-initialised head is):
    every test checks that forces are non-trivial first."""

    cutoff = 4.0
    exact_at_symmetric_sites = True  # False only for a model known to fail there (E2Former's separable norm)

    def make_model(self, dtype: torch.dtype):
        raise NotImplementedError

    def potential(self, dtype):
        return ForceStressOutput(self.make_model(dtype)).eval()

    def structures(self):
        return [
            random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1),
            random_crystal([29, 29, 29], seed=2),
            random_molecule([8, 1, 1], seed=3),
        ]

    @pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
    def test_rotation_translation_permutation(self, dtype):
        energy_tol, force_tol = TOLERANCES[dtype]
        potential = self.potential(dtype)
        batch = graph_batch(self.structures(), self.cutoff, dtype)
        reference = potential(batch)
        assert reference["forces"].abs().max() > 1e-4, "the model is (nearly) constant: these tests would be vacuous"
        rotation = random_rotation(generator=torch.Generator().manual_seed(5))
        rotated = potential(moved(batch, rotation, torch.tensor([1.3, -2.1, 0.7])))
        assert relative(rotated["energy"], reference["energy"]) < energy_tol
        assert relative(rotated["forces"], reference["forces"] @ rotation.T.to(dtype)) < force_tol
        order = torch.cat([torch.nonzero(batch.batch == b).flatten().flip(0) for b in range(batch.num_graphs)])
        shuffled = potential(permuted(batch, order))
        assert relative(shuffled["energy"], reference["energy"]) < energy_tol
        assert relative(shuffled["forces"], reference["forces"][order]) < force_tol

    @pytest.mark.parametrize("kind", ["inversion", "mirror", "rotoreflection"])
    def test_reflection_and_inversion(self, kind):
        """E(3): energies invariant and forces equivariant under improper orthogonal maps (det -1), which
        turn a molecule into its mirror image (float64, 1e-10 relative)."""
        energy_tol, force_tol = TOLERANCES[torch.float64]
        potential = self.potential(torch.float64)
        batch = graph_batch(self.structures(), self.cutoff, torch.float64)
        reference = potential(batch, stress=False)
        assert reference["forces"].abs().max() > 1e-4, "the model is (nearly) constant: these tests would be vacuous"
        rotation = random_rotation(generator=torch.Generator().manual_seed(11))
        improper = {
            "inversion": -torch.eye(3, dtype=torch.float64),
            "mirror": torch.diag(torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)),
            "rotoreflection": -rotation,
        }[kind]
        mirrored = potential(moved(batch, improper, torch.tensor([0.4, -0.3, 1.1])))
        assert relative(mirrored["energy"], reference["energy"]) < energy_tol
        assert relative(mirrored["forces"], reference["forces"] @ improper.T) < force_tol

    def test_float32_far_from_origin(self):
        """Coordinates offset by 100 Å keep float32 accuracy (positions are centred inside the model)."""
        exact = self.potential(torch.float64)
        single = ForceStressOutput(copy.deepcopy(exact.model).float()).eval()
        batch = graph_batch(self.structures(), self.cutoff, torch.float64)
        reference = exact(batch)
        far = single(with_dtype(moved(batch, translation=torch.full((3,), 100.0)), torch.float32))
        assert relative(far["energy"].double(), reference["energy"]) < 1e-5
        assert relative(far["forces"].double(), reference["forces"]) < 1e-4

    @pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
    def test_forces_at_symmetric_sites(self, dtype):
        """Where symmetry fixes the forces they come out so to rounding: zero on every atom of a perfect fcc
        crystal (each site a centre of inversion with cubic symmetry), zero on methane's carbon and along the
        bond on its hydrogens. Features of degree 1 and 2 vanish at such sites, which a norm that divides them
        by their own size turns into noise (see ``sciml.nn.so3_layers.EquivariantRMSNorm``): a model with
        ``exact_at_symmetric_sites = False`` must fail these checks (so the flag cannot hide a regression)."""
        if not self.exact_at_symmetric_sites:
            with pytest.raises(AssertionError):
                self._check_symmetric_sites(dtype)
            return
        self._check_symmetric_sites(dtype)

    def _check_symmetric_sites(self, dtype) -> None:
        _, force_tol = TOLERANCES[dtype]
        crystal = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
        bonds = 0.63 * np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]])
        methane = Atoms("CH4", positions=[[0.0, 0.0, 0.0], *bonds])
        batch = graph_batch([crystal, methane], self.cutoff, dtype)
        forces = self.potential(dtype)(batch)["forces"].detach().double()
        hydrogens = forces[-4:]
        scale = hydrogens.norm(dim=1).max()
        assert scale > 1e-4, "methane's hydrogens feel no force: this test would be vacuous"
        assert forces[: len(crystal)].abs().max() / scale < force_tol
        assert forces[len(crystal)].abs().max() / scale < force_tol
        unit = torch.tensor(bonds / np.linalg.norm(bonds, axis=1, keepdims=True))
        across = hydrogens - (hydrogens * unit).sum(1, keepdim=True) * unit
        assert across.abs().max() / scale < force_tol
        assert (hydrogens.norm(dim=1) - scale).abs().max() / scale < force_tol

    def test_forces_are_minus_energy_gradient(self):
        potential = self.potential(torch.float64)
        atoms = self.structures()[0]
        forces = potential(graph_batch([atoms], self.cutoff))["forces"].detach().numpy()
        assert np.abs(forces).max() > 1e-4
        step = 1e-5
        for atom, axis in [(0, 0), (2, 1), (5, 2)]:
            energies = []
            for sign in (1, -1):
                shifted = atoms.copy()
                shifted.positions[atom, axis] += sign * step
                energies.append(float(potential(graph_batch([shifted], self.cutoff))["energy"]))
            assert abs(-(energies[0] - energies[1]) / (2 * step) - forces[atom, axis]) < 1e-6 * max(
                1, abs(forces).max()
            )

    def test_stress_is_strain_derivative(self):
        potential = self.potential(torch.float64)
        atoms = self.structures()[1]
        stress = potential(graph_batch([atoms], self.cutoff), stress=True)["stress"][0]
        assert stress.abs().max() > 1e-6
        step, volume = 1e-5, atoms.get_volume()
        for i, j in [(0, 0), (1, 2), (2, 2)]:
            energies = []
            for sign in (1, -1):
                strain = np.eye(3)
                strain[i, j] += sign * step / (2 if i != j else 1)
                strain[j, i] += sign * step / 2 if i != j else 0
                strained = atoms.copy()
                strained.set_cell(atoms.cell[:] @ strain, scale_atoms=True)
                energies.append(float(potential(graph_batch([strained], self.cutoff))["energy"]))
            assert abs((energies[0] - energies[1]) / (2 * step) / volume - float(stress[i, j])) < 1e-7

    def test_energy_smooth_across_cutoff(self):
        potential = self.potential(torch.float64)
        molecule = random_molecule([8, 1, 1], seed=3)
        energies, forces = [], []
        for delta in (-1e-6, 1e-6):
            atoms = molecule.copy()
            atoms.append("C")
            atoms.positions[-1] = atoms.positions[0] + [self.cutoff + delta, 0, 0]  # far from the others
            outputs = potential(graph_batch([atoms], self.cutoff + 0.0))
            energies.append(float(outputs["energy"]))
            forces.append(outputs["forces"].numpy())
        assert abs(energies[0] - energies[1]) < 1e-9
        assert np.abs(forces[0] - forces[1]).max() < 1e-6

    def test_batch_equals_each_structure_alone(self):
        potential = self.potential(torch.float64)
        structures = self.structures()
        together = potential(graph_batch(structures, self.cutoff))
        alone = [potential(graph_batch([s], self.cutoff)) for s in structures]
        assert relative(together["energy"], torch.cat([a["energy"] for a in alone])) < 1e-12
        assert relative(together["forces"], torch.cat([a["forces"] for a in alone])) < 1e-12

    def test_isolated_atoms(self):
        potential = self.potential(torch.float64)
        from ase import Atoms

        lonely = [Atoms("C"), Atoms("OH", positions=[[0, 0, 0], [0, 0, 3 * self.cutoff]])]
        outputs = potential(graph_batch(lonely, self.cutoff))
        assert torch.isfinite(outputs["energy"]).all() and torch.all(outputs["forces"] == 0)
