"""The oracles (GFN2-xTB through tblite, PySCF DFT) and the start structures: units, failures, missing extras."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from ase import Atoms

from sciml.active import (
    OracleFailure,
    conformers_from_smiles,
    gfn2_xtb,
    molecule_from_smiles,
    pyscf_dft,
    rattled_copies,
)
from sciml.active.dft import PySCFCalculator

WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])


def central_difference(calculator, atoms: Atoms, atom: int, axis: int, step: float = 1e-3) -> float:
    """-dE/dx of one coordinate by central differences (eV/Å), with a fresh copy per energy."""
    energies = []
    for sign in (1, -1):
        displaced = atoms.copy()
        displaced.positions[atom, axis] += sign * step
        displaced.calc = calculator
        energies.append(displaced.get_potential_energy())
    return -(energies[0] - energies[1]) / (2 * step)


def test_gfn2_xtb_labels_energy_and_forces_that_are_its_gradient():
    oracle = gfn2_xtb()
    labelled = oracle.label(WATER)
    assert labelled.calc is not None and labelled is not WATER
    forces = labelled.get_forces()
    from tblite.ase import TBLite

    # GFN2-xTB analytic forces against its own energy differences: a units or sign slip would show
    numeric = central_difference(TBLite(method="GFN2-xTB", verbosity=0), WATER, 1, 0)
    assert forces[1, 0] == pytest.approx(numeric, abs=2e-4)
    assert abs(forces.sum(0)).max() < 1e-6  # no net force on an isolated molecule


def test_pyscf_forces_are_minus_the_energy_gradient_in_ev_per_angstrom():
    atoms = WATER.copy()
    calculator = PySCFCalculator(xc="PBE", basis="def2-SVP")
    atoms.calc = calculator
    forces = atoms.get_forces()
    numeric = central_difference(PySCFCalculator(xc="PBE", basis="def2-SVP"), WATER, 1, 0)
    # eV/Å: Hartree/Bohr would be ~51x smaller; agreement to 5 meV/Å is the DFT grid's noise
    assert forces[1, 0] == pytest.approx(numeric, abs=5e-3)
    assert atoms.get_potential_energy() == pytest.approx(-76.3 * 27.2114, rel=5e-3)  # PBE/def2-SVP water ~ -76.3 Ha


def test_an_unconverged_scf_is_an_oracle_failure_naming_the_cause():
    with pytest.raises(OracleFailure, match="SCF not converged in 2 cycles"):
        pyscf_dft(max_cycle=2).label(WATER)


def test_a_missing_oracle_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tblite.ase", None)  # what an environment without tblite imports
    expected = r"the GFN2-xTB oracle needs the 'tblite' package: pip install 'sciml\[oracle\]'"
    with pytest.raises(ImportError, match=expected):
        gfn2_xtb()


def test_smiles_start_has_hydrogens_and_force_field_geometry():
    ethanol = molecule_from_smiles("CCO")
    assert ethanol.get_chemical_formula() == "C2H6O"
    carbons = [i for i, z in enumerate(ethanol.numbers) if z == 6]
    assert ethanol.get_distance(*carbons) == pytest.approx(1.51, abs=0.03)  # MMFF C-C single bond
    with pytest.raises(ValueError, match="cannot parse the SMILES string 'C1CC'"):
        molecule_from_smiles("C1CC")


def test_conformers_of_ethanol_are_its_three_oh_rotamers_the_first_the_smiles_start():
    conformers = conformers_from_smiles("CCO", 5)  # ethanol has three minima: fewer come back
    hydroxyl_h = next(i for i in range(len(conformers[0])) if conformers[0].get_distance(2, i) < 1.1 and i != 2)
    torsions = sorted(round(atoms.get_dihedral(0, 1, 2, hydroxyl_h)) % 360 for atoms in conformers)
    assert len(conformers) == 3 and torsions == pytest.approx([60, 180, 300], abs=15)  # g+, trans, g-
    assert np.allclose(conformers[0].positions, molecule_from_smiles("CCO").positions)
    assert all("mmff_energy" in atoms.info for atoms in conformers[1:])
    assert len(conformers_from_smiles("CCO", 1)) == 1
    with pytest.raises(ValueError, match="count >= 1"):
        conformers_from_smiles("CCO", 0)


def test_rattled_copies_rise_to_the_largest_displacement():
    copies = rattled_copies(WATER, 4, largest=0.2, seed=1)
    spread = [np.std(copy.positions - WATER.positions) for copy in copies]
    assert len(copies) == 4 and spread == sorted(spread)
    assert spread[-1] == pytest.approx(0.2, rel=0.6)  # 9 samples of a 0.2 Å Gaussian
