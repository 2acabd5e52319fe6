"""CalculatorPotential: an ASE calculator as the replica driver's potential (the reference method's MD)."""

import numpy as np
import pytest
import torch
from ase.build import bulk
from ase.calculators.calculator import Calculator
from ase.calculators.emt import EMT

from sciml.calculators.calculator_potential import CalculatorPotential


def _replicas(atoms, count: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.tensor(atoms.positions[None] + 0.05 * rng.standard_normal((count, len(atoms), 3)))


@pytest.mark.parametrize("workers", [1, 2])
def test_each_replica_gets_the_calculators_energy_and_forces(workers):
    atoms = bulk("Cu", cubic=True).repeat((2, 1, 1))
    positions = _replicas(atoms, 3)
    with CalculatorPotential(EMT, atoms, workers=workers) as potential:
        energy, forces = potential(positions)
    assert energy.shape == (3,) and forces.shape == (3, len(atoms), 3) and energy.dtype == torch.float64
    for r in range(3):
        copy = atoms.copy()
        copy.positions = positions[r].numpy()
        copy.calc = EMT()
        assert energy[r].item() == pytest.approx(copy.get_potential_energy(), abs=1e-12)
        np.testing.assert_allclose(forces[r].numpy(), copy.get_forces(), atol=1e-12)


class _FailsFarFromStart(Calculator):
    implemented_properties = ["energy", "forces"]

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        super().calculate(atoms, properties, system_changes)
        if atoms.positions[0, 0] > 0.5:
            raise RuntimeError("SCF did not converge")
        self.results = {"energy": 0.0, "forces": np.zeros((len(atoms), 3))}


def test_a_failing_calculator_names_the_replica():
    atoms = bulk("Cu", cubic=True)
    positions = torch.tensor(np.stack([atoms.positions, atoms.positions + 1.0]))
    potential = CalculatorPotential(_FailsFarFromStart, atoms)
    with pytest.raises(RuntimeError, match="failed on replica 1: RuntimeError: SCF did not converge"):
        potential(positions)
    with pytest.raises(ValueError, match="positions hold 3 atoms per replica, the system has 4"):
        potential(positions[:, :3])
