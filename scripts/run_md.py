"""Molecular dynamics of a structure with a trained sciml potential (ASE), NVE or Langevin.

    python scripts/run_md.py --checkpoint runs/quickstart/.../last.ckpt --structure data/ethanol_gfn2.extxyz \
        --ensemble nve --timestep 0.5 --steps 2000 --temperature 300

Writes the trajectory (every 10th step) to ``--out``, by default ``md.traj`` in the checkpoint's run
directory, atomically; an existing file is refused unless ``--overwrite``. Prints steps/s and, for NVE,
the total-energy drift per atom per ps (slope of a linear fit) and the largest excursion of the total
energy per atom.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ase.io

from sciml.calculators import SciMLCalculator
from sciml.calculators.md import energy_drift, run_md


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--structure", required=True, help="any file ASE reads; --index picks the frame")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--ensemble", default="nve", choices=["nve", "langevin"])
    parser.add_argument("--timestep", type=float, default=0.5, help="fs")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--temperature", type=float, default=300.0, help="K (initial velocities, thermostat)")
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skin", type=float, default=0.5, help="neighbour-list skin, Å")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="trajectory file (default: md.traj in the checkpoint's run directory)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    args = parser.parse_args()
    if args.out is None:  # the run directory holds the checkpoints folder
        args.out = str(Path(args.checkpoint).resolve().parent.parent / "md.traj")
    atoms = ase.io.read(args.structure, index=args.index)
    atoms.calc = None
    calculator = SciMLCalculator.from_checkpoint(args.checkpoint, device=args.device, dtype=args.dtype, skin=args.skin)
    result = run_md(
        atoms, calculator, args.ensemble, args.timestep, args.steps, args.temperature, args.seed, args.out,
        overwrite=args.overwrite,
    )  # fmt: skip
    print(
        f"{len(atoms)} atoms, {args.steps} steps of {args.timestep} fs ({args.ensemble}): "
        f"{result['steps_per_second']:.1f} steps/s, {calculator.rebuilds} neighbour-list builds -> {args.out}"
    )
    if args.ensemble == "nve":
        slope, excursion = energy_drift(result["times_ps"], result["total_energy"], len(atoms))
        print(f"energy drift {slope:.3e} eV/atom/ps, largest excursion {excursion:.3e} eV/atom")


if __name__ == "__main__":
    main()
