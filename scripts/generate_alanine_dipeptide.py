"""Alanine dipeptide in implicit solvent with OpenMM (amber14 + OBC2), saved as an ASE trajectory.

pdbfixer ships the heavy-atom PDB; hydrogens are added with amber14. Langevin middle integrator, 4 fs
steps with hydrogen mass repartitioning (HMR 3 amu), one CPU thread. At 300 K the phi transition almost
never happens in a few ns, so the default temperature is 500 K (about 40 phi transitions per 10
core-minutes): the slow modes are those of the hot system, as the provenance records.

    python scripts/generate_alanine_dipeptide.py --ns 2 --save-ps 1 --temperature 500 --seed 0 \
        --out data/alanine_dipeptide_500K.traj
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import openmm
import pdbfixer
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import Trajectory
from openmm import app, unit

from _provenance import write_provenance

KJ_PER_MOL_TO_EV = 0.010364269656262174


def build_simulation(temperature: float, seed: int) -> tuple[app.Simulation, app.Topology]:
    pdb_path = Path(pdbfixer.__file__).parent / "tests" / "data" / "alanine-dipeptide.pdb"
    if not pdb_path.exists():
        found = sorted(Path(pdbfixer.__file__).parent.rglob("alanine*dipeptide*.pdb"))
        if not found:
            raise FileNotFoundError("pdbfixer does not ship an alanine-dipeptide PDB in this version")
        pdb_path = found[0]
    pdb = app.PDBFile(str(pdb_path))
    forcefield = app.ForceField("amber14-all.xml", "implicit/obc2.xml")
    modeller = app.Modeller(pdb.topology, pdb.positions)
    modeller.addHydrogens(forcefield)
    system = forcefield.createSystem(modeller.topology, nonbondedMethod=app.NoCutoff,
                                     constraints=app.HBonds, hydrogenMass=3 * unit.amu)
    integrator = openmm.LangevinMiddleIntegrator(temperature * unit.kelvin, 1 / unit.picosecond,
                                                 4 * unit.femtosecond)
    integrator.setRandomNumberSeed(seed)
    platform = openmm.Platform.getPlatformByName("CPU")
    simulation = app.Simulation(modeller.topology, system, integrator, platform, {"Threads": "1"})
    simulation.context.setPositions(modeller.positions)
    simulation.minimizeEnergy()
    simulation.context.setVelocitiesToTemperature(temperature * unit.kelvin, seed)
    return simulation, modeller.topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", type=float, default=2.0, help="simulated time")
    parser.add_argument("--save-ps", type=float, default=1.0, help="save interval")
    parser.add_argument("--temperature", type=float, default=500.0, help="K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("OPENMM_CPU_THREADS", "1")

    simulation, topology = build_simulation(args.temperature, args.seed)
    numbers = [atom.element.atomic_number for atom in topology.atoms()]
    steps_per_frame = int(round(args.save_ps * 1000 / 4))
    n_frames = int(round(args.ns * 1000 / args.save_ps))
    simulation.step(steps_per_frame * 10)  # short equilibration at the target temperature
    writer = Trajectory(args.out, "w")
    start = time.perf_counter()
    for _ in range(n_frames):
        simulation.step(steps_per_frame)
        state = simulation.context.getState(getPositions=True, getEnergy=True, getForces=True)
        positions = state.getPositions(asNumpy=True).value_in_unit(unit.angstrom)
        energy = state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole) * KJ_PER_MOL_TO_EV
        forces = state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.angstrom)
        atoms = Atoms(numbers=numbers, positions=np.asarray(positions))
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=np.asarray(forces) * KJ_PER_MOL_TO_EV)
        writer.write(atoms)
    writer.close()
    elapsed = time.perf_counter() - start
    write_provenance(args.out, method="OpenMM 8.6.1, amber14-all + implicit/obc2, LangevinMiddle 1/ps, "
                     "4 fs with HMR (3 amu), HBonds constrained, 1 CPU thread",
                     molecule="alanine dipeptide (pdbfixer test PDB, hydrogens added)",
                     temperature_K=args.temperature, simulated_ns=args.ns, save_interval_ps=args.save_ps,
                     frames=n_frames, seed=args.seed, seconds=round(elapsed, 1),
                     note="500 K so that phi transitions happen in a short run; slow modes are those at 500 K",
                     units="positions Å, energy eV, forces eV/Å (amber14/OBC2 labels)")
    print(f"{n_frames} frames in {elapsed:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
