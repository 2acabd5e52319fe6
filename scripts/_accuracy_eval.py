"""Test errors, an NVE run and a relaxed torsion scan (``_rotor.TORSIONS``: ethanol's C-C-O-H, N-methylacetamide's
amide bond) of one trained potential through its ASE calculator; prints one JSON line.

Runs in sciml's environment (``--kind sciml``: a ``sciml fit`` checkpoint; ``--kind pyscf``: the DFT reference
itself, for its own scan) or in MACE's own environment (``--kind mace``: a ``.model`` file from
``mace_run_train``), so it imports only ASE and numpy at the top.

    python _accuracy_eval.py --kind sciml --model last.ckpt --test a.extxyz b.extxyz --md-start v.extxyz --md-ps 10
    python _accuracy_eval.py --kind pyscf --model PBE/def2-SVP --md-start v.extxyz --md-ps 0 --rotor-scan v.extxyz
"""

from __future__ import annotations

import argparse
import json
import time

import ase.io
import numpy as np
from ase import units
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet


def calculator(kind: str, model: str, expected_calls: int | None = None):
    """The ASE calculator of ``model``; a sciml one told the run's length (``expected_calls``), so that it builds
    its ahead-of-time program only where the run is long enough to repay it."""
    if kind == "pyscf":  # the reference itself (a relaxed scan's), model "PBE/def2-SVP"
        from sciml.active import PySCFCalculator

        xc, basis = model.split("/")
        return PySCFCalculator(xc=xc, basis=basis)
    if kind == "sciml":
        from sciml.calculators import SciMLCalculator

        return SciMLCalculator.from_checkpoint(model, dtype="float64", expected_calls=expected_calls)
    from mace.calculators import MACECalculator

    return MACECalculator(model_paths=model, device="cpu", default_dtype="float64")


def test_errors(calc, path: str, max_frames: int = 0) -> dict:
    """Energy MAE and mean signed error per atom (meV/atom), force MAE and RMSE per component (meV/Å) over every
    frame of ``path`` (or ``max_frames`` evenly spaced ones)."""
    energy_errors, force_errors = [], []
    frames = ase.io.read(path, index=":")
    if max_frames:
        frames = frames[:: max(1, len(frames) // max_frames)][:max_frames]
    for atoms in frames:
        reference_energy, reference_forces = atoms.get_potential_energy(), atoms.get_forces()
        atoms.calc = calc
        energy_errors.append((atoms.get_potential_energy() - reference_energy) / len(atoms))
        force_errors.append((atoms.get_forces() - reference_forces).ravel())
    energy, forces = np.asarray(energy_errors), np.concatenate(force_errors)
    return {
        "frames": len(energy_errors),
        "energy_mae_mev_per_atom": float(np.abs(energy).mean() * 1e3),
        "energy_mean_signed_error_mev_per_atom": float(energy.mean() * 1e3),  # a level the model misses
        "force_mae_mev_per_a": float(np.abs(forces).mean() * 1e3),
        "force_rmse_mev_per_a": float(np.sqrt((forces**2).mean()) * 1e3),
    }


def nve_drift(calc, start: str, picoseconds: float, temperature: float, timestep_fs: float, seed: int) -> dict:
    """Velocity Verlet from the first frame of ``start`` with Maxwell-Boltzmann velocities at ``temperature``.

    Drift: slope of a least-squares line through the total energy per atom (meV/atom/ps); also the largest
    excursion and whether the run blew up (non-finite energy or an atom moving over 3 Å in one step)."""
    atoms = ase.io.read(start, index=0)
    atoms.calc = calc
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    ZeroRotation(atoms)
    dynamics = VelocityVerlet(atoms, timestep_fs * units.fs)
    steps = int(round(picoseconds * 1000 / timestep_fs))
    times, energies, blew_up = [], [], False
    previous = atoms.positions.copy()
    start_time = time.perf_counter()
    for step in range(steps + 1):
        if step:
            dynamics.run(1)
        total = atoms.get_potential_energy() + atoms.get_kinetic_energy()
        if not np.isfinite(total) or np.abs(atoms.positions - previous).max() > 3.0:
            blew_up = True
            break
        previous = atoms.positions.copy()
        if step % 10 == 0:
            times.append(step * timestep_fs / 1000)
            energies.append(total / len(atoms) * 1e3)
    seconds = time.perf_counter() - start_time
    energies = np.asarray(energies)
    slope = float(np.polyfit(times, energies, 1)[0]) if len(times) > 1 else float("nan")
    return {
        "md_ps": times[-1] if times else 0.0,
        "drift_mev_per_atom_ps": slope,
        "max_excursion_mev_per_atom": float(np.abs(energies - energies[0]).max()),
        "blew_up": blew_up,
        "steps_per_s": steps / seconds if seconds > 0 else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=["sciml", "mace", "pyscf"], required=True)
    parser.add_argument("--model", required=True, help="a checkpoint or model file; pyscf: the level, PBE/def2-SVP")
    parser.add_argument("--test", nargs="*", default=[])
    parser.add_argument("--md-start", required=True)
    parser.add_argument("--md-ps", type=float, default=10.0)
    parser.add_argument("--temperature", type=float, default=500.0)
    parser.add_argument("--timestep", type=float, default=0.5, help="fs")
    parser.add_argument("--max-frames", type=int, default=0, help="evenly spaced test frames per file (0: all)")
    parser.add_argument("--rotor-scan", help="a relaxed scan of --torsion (20° steps, fmax 0.02 eV/Å) from this "
                        "file's first frame")  # fmt: skip
    parser.add_argument("--torsion", default="ethanol", help="the molecule whose torsion (_rotor.TORSIONS) is scanned")
    args = parser.parse_args()
    frames = sum(len(ase.io.read(path, index=":")) for path in args.test)
    steps = int(round(args.md_ps * 1000 / args.timestep))
    calc = calculator(args.kind, args.model, frames + steps + (2000 if args.rotor_scan else 0))  # a scan: ~2,000
    model = {"sciml": lambda: calc.model, "mace": lambda: calc.models[0], "pyscf": lambda: None}[args.kind]()
    result = {"parameters": sum(p.numel() for p in model.parameters()) if model is not None else 0}
    result["test"] = {path: test_errors(calc, path, args.max_frames) for path in args.test}
    if args.md_ps > 0:
        result["nve"] = nve_drift(calc, args.md_start, args.md_ps, args.temperature, args.timestep, seed=0)
    if args.rotor_scan:
        from _rotor import TORSIONS, torsion_scan

        result["rotor"] = torsion_scan(ase.io.read(args.rotor_scan, index=0), calc, TORSIONS[args.torsion], fmax=0.02)
    print("JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
