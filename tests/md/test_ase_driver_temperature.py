"""The ASE path's Langevin thermostat (``sciml md --engine ase``) samples the temperature it is given (ASE's
``fixcm=False`` with a ``FixCom`` constraint: 3N - 3 degrees of freedom), checked on a 19-atom cluster as a
statistical test."""

from __future__ import annotations

import numpy as np
from ase.calculators.emt import EMT
from ase.cluster import Octahedron
from ase.constraints import FixCom

from sciml.md import MDSettings, run_ase_md


def test_langevin_samples_the_target_temperature_of_a_small_cluster():
    atoms = Octahedron("Cu", 3, 0)  # 19 atoms: the centre of mass matters (3 of 57 degrees of freedom)
    run = run_ase_md(atoms, EMT(), MDSettings("nvt-langevin", timestep=0.5, steps=12000, temperature=700.0, seed=1,
                                          interval=20, friction=0.05))  # fmt: skip
    assert any(isinstance(constraint, FixCom) for constraint in atoms.constraints)
    temperatures = run["temperatures"][50:]  # after 0.5 ps (25 thermostat times)
    blocks = temperatures[: len(temperatures) // 50 * 50].reshape(-1, 50).mean(1)  # 0.5 ps blocks
    error = blocks.std(ddof=1) / np.sqrt(len(blocks))
    # instantaneous T fluctuates by T sqrt(2 / 54) ~ 135 K; the mean of 5.5 ps is good to ~10 K
    assert abs(temperatures.mean() - 700.0) < max(3 * error, 10.0) and abs(temperatures.mean() - 700.0) < 30.0
    # ASE counts the constraint: the kinetic energy per degree of freedom is kT/2 with 3N - 3 of them
    assert atoms.get_number_of_degrees_of_freedom() == 3 * 19 - 3
