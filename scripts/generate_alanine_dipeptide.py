"""Alanine dipeptide in implicit solvent with OpenMM (amber14 + OBC2), saved as an ASE trajectory.

pdbfixer ships the heavy-atom PDB; hydrogens are added with amber14. Langevin middle integrator, 4 fs
steps with hydrogen mass repartitioning (HMR 3 amu), one CPU thread. At 300 K the phi transition almost
never happens in a few ns; here 2 ns at 500 K gave none either, so the shipped run is 10 ns at 600 K
(frames every 5 ps). The slow modes are therefore those of the hot system, as the provenance records.

    python scripts/generate_alanine_dipeptide.py --ns 10 --save-ps 5 --temperature 600 --seed 0 \
        --out data/alanine_dipeptide_600K.traj
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import openmm
import pdbfixer
from _provenance import write_provenance
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import Trajectory
from openmm import app, unit

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
    system = forcefield.createSystem(
        modeller.topology, nonbondedMethod=app.NoCutoff, constraints=app.HBonds, hydrogenMass=3 * unit.amu
    )
    integrator = openmm.LangevinMiddleIntegrator(temperature * unit.kelvin, 1 / unit.picosecond, 4 * unit.femtosecond)
    integrator.setRandomNumberSeed(seed)
    platform = openmm.Platform.getPlatformByName("CPU")
    simulation = app.Simulation(modeller.topology, system, integrator, platform, {"Threads": "1"})
    simulation.context.setPositions(modeller.positions)
    simulation.minimizeEnergy()
    simulation.context.setVelocitiesToTemperature(temperature * unit.kelvin, seed)
    return simulation, modeller.topology


def backbone_dihedrals(topology: app.Topology) -> dict[str, list[int]]:
    """Atom indices of phi (C_ACE-N-CA-C) and psi (N-CA-C-N_NME) in the hydrated topology."""
    index = {(atom.residue.name, atom.name): atom.index for atom in topology.atoms()}
    return {
        "phi": [index["ACE", "C"], index["ALA", "N"], index["ALA", "CA"], index["ALA", "C"]],
        "psi": [index["ALA", "N"], index["ALA", "CA"], index["ALA", "C"], index["NME", "N"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", type=float, default=10.0, help="simulated time")
    parser.add_argument("--save-ps", type=float, default=5.0, help="save interval")
    parser.add_argument("--temperature", type=float, default=600.0, help="K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("OPENMM_CPU_THREADS", "1")

    simulation, topology = build_simulation(args.temperature, args.seed)
    numbers = [atom.element.atomic_number for atom in topology.atoms()]
    dihedrals = backbone_dihedrals(topology)
    steps_per_frame = int(round(args.save_ps * 1000 / 4))
    n_frames = int(round(args.ns * 1000 / args.save_ps))
    simulation.step(steps_per_frame * 10)  # short equilibration at the target temperature
    writer = Trajectory(args.out, "w")
    phis = []
    start = time.perf_counter()
    for _ in range(n_frames):
        simulation.step(steps_per_frame)
        state = simulation.context.getState(getPositions=True, getEnergy=True, getForces=True)
        positions = state.getPositions(asNumpy=True).value_in_unit(unit.angstrom)
        energy = state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole) * KJ_PER_MOL_TO_EV
        forces = state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.angstrom)
        atoms = Atoms(numbers=numbers, positions=np.asarray(positions))
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=np.asarray(forces) * KJ_PER_MOL_TO_EV)
        for name, quadruple in dihedrals.items():
            atoms.info[name] = float(atoms.get_dihedral(*quadruple))  # degrees in [0, 360)
        phis.append(atoms.info["phi"])
        writer.write(atoms)
    writer.close()
    elapsed = time.perf_counter() - start
    write_provenance(
        args.out,
        method="OpenMM 8.6.1, amber14-all + implicit/obc2, LangevinMiddle 1/ps, "
        "4 fs with HMR (3 amu), HBonds constrained, 1 CPU thread",
        molecule="alanine dipeptide (pdbfixer test PDB, hydrogens added)",
        temperature_K=args.temperature,
        simulated_ns=args.ns,
        save_interval_ps=args.save_ps,
        frames=n_frames,
        seed=args.seed,
        seconds=round(elapsed, 1),
        dihedral_atoms=dihedrals,
        phi_transitions=count_transitions(phis),
        note="high temperature so that phi transitions happen in a short run; slow modes are those of the hot system",
        units="positions Å, energy eV, forces eV/Å (amber14/OBC2 labels)",
    )
    print(f"{n_frames} frames, {count_transitions(phis)} phi transitions, {elapsed:.0f} s -> {args.out}")


def count_transitions(phi_degrees: list[float]) -> int:
    """Crossings between the phi < 0 basin (C7eq/alpha_R) and the phi > 0 basin (C7ax/alpha_L), with
    hysteresis: a transition is counted when phi enters the other basin's core (-150..-30 vs 30..120 deg)."""
    basin = None
    count = 0
    for phi in np.mod(np.asarray(phi_degrees) + 180, 360) - 180:
        core = "negative" if -150 < phi < -30 else "positive" if 30 < phi < 120 else None
        if core is not None and basin is not None and core != basin:
            count += 1
        basin = core or basin
    return count


if __name__ == "__main__":
    main()
