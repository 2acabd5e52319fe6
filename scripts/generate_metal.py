"""NVT Langevin MD of periodic fcc Cu with ASE EMT at several temperatures and strains (stress labels vary).

    python scripts/generate_metal.py --repeat 2 --temperatures 300 600 900 --strains -0.02 0 0.02 \
        --steps 500 --every 10 --seed 0 --out data/cu_emt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _provenance import write_provenance
from ase import units
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import Trajectory
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--element", default="Cu")
    parser.add_argument("--repeat", type=int, default=2, help="cubic cell repeats (4 atoms each)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[300.0, 600.0, 900.0])
    parser.add_argument("--strains", type=float, nargs="+", default=[-0.02, 0.0, 0.02])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--timestep", type=float, default=2.0, help="fs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="folder; one .traj per (strain, temperature) run")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for strain in args.strains:
        for temperature in args.temperatures:
            atoms = bulk(args.element, "fcc", cubic=True).repeat(args.repeat)
            shear = np.eye(3) + strain * np.array([[1, 0.5, 0], [0.5, -0.5, 0], [0, 0, 0.5]])
            atoms.set_cell(atoms.cell[:] @ shear, scale_atoms=True)
            atoms.rattle(0.05, seed=int(rng.integers(1 << 31)))
            atoms.calc = EMT()
            path = out / f"{args.element}_T{temperature:.0f}_strain{strain:+.3f}.traj"
            writer = Trajectory(path, "w")
            MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
            dyn = Langevin(
                atoms,
                args.timestep * units.fs,
                temperature_K=temperature,
                friction=0.02 / units.fs,
                fixcm=False,
                rng=rng,
            )

            def record(atoms=atoms, writer=writer) -> None:
                frame = atoms.copy()
                frame.calc = SinglePointCalculator(
                    frame,
                    energy=atoms.get_potential_energy(),
                    forces=atoms.get_forces(),
                    stress=atoms.get_stress(),
                )
                writer.write(frame)

            dyn.attach(record, interval=args.every)
            dyn.run(args.steps)
            writer.close()
            count += args.steps // args.every + 1
    write_provenance(
        out / "README",
        method="ASE EMT, Langevin NVT (friction 0.02/fs)",
        element=args.element,
        atoms=4 * args.repeat**3,
        temperatures_K=args.temperatures,
        strains=args.strains,
        timestep_fs=args.timestep,
        steps_per_run=args.steps,
        keep_every=args.every,
        frames=count,
        seed=args.seed,
        note="one trajectory file per (strain, temperature) run",
        units="positions Å, energy eV, forces eV/Å, stress eV/Å^3",
    )
    print(f"{count} frames -> {out}/")


if __name__ == "__main__":
    main()
