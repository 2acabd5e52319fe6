"""The DFT oracle against the plain PySCF call: seconds per energy + forces label, and what the speed costs.

Stage ``oracle`` (issue 56, deliverable 1). For ethanol (9 atoms), paracetamol (20) and ibuprofen (33), a few
frames an active-learning round would pick (GFN2-xTB Langevin MD at 500 K from the MMFF94 structure, frames
``--spacing-fs`` apart, the loop's pick spacing) are labelled at PBE/def2-SVP (the level of rMD17) and at
B3LYP-D3(BJ)/def2-SVP (ethanol and paracetamol: ``--hybrid-on``), two ways, one after the other on the same
cores:

- **plain**: what sciml's oracle was, and what a user writes first: a fresh PySCF RKS per frame with four-centre
  integrals and PySCF's default (MINAO) guess, analytic gradients;
- **sciml**: ``sciml.active.pyscf_dft`` with its defaults: density fitting and the converged density of the
  nearest frame labelled before as the initial guess (frames in pick order, the first with no guess).

Reported per molecule and level: seconds per label (mean over the frames), SCF cycles, and the largest energy
(Ha) and force (eV/Å) difference between the two (density fitting's error; the guess changes nothing beyond
``conv_tol``). Each (molecule, level, way) is cached in ``--work`` as it finishes, so the benchmark resumes.

    python scripts/bench_dft.py                      # ~40 min on 2 CPU cores
    python scripts/bench_dft.py --molecules ethanol --levels pbe --frames 2
    python scripts/bench_dft.py --smoke --results /tmp/dft --work /tmp/dft-work   # water, STO-3G: seconds

Results with provenance: ``benchmarks/results/dft_oracle.{json,md}``. Last line: ``RESULT
oracle_speedup_vs_plain_pyscf=<x> (the largest molecule at PBE/def2-SVP) oracle_speedup_<molecule>_<level>=<x>
... density_fit_energy_error_ha=<max> density_fit_force_error_ev_per_a=<max>``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import ase.io
import numpy as np
from _results import RESULTS, markdown_table, write_results
from ase import Atoms, units
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

from sciml.active import DFTLevel, PySCFCalculator, molecule_from_smiles

MOLECULES = {"ethanol": "CCO", "paracetamol": "CC(=O)Nc1ccc(O)cc1", "ibuprofen": "CC(C)Cc1ccc(cc1)C(C)C(=O)O"}
LEVELS = {
    "pbe": {"xc": "PBE", "basis": "def2-SVP"},
    "b3lyp-d3bj": {"xc": "B3LYP", "basis": "def2-SVP", "dispersion": "d3bj"},
}


def picked_frames(smiles: str, count: int, spacing_fs: float, seed: int = 0) -> list[Atoms]:
    """``count`` frames ``spacing_fs`` apart of GFN2-xTB Langevin MD at 500 K (0.5 fs, friction 0.01/fs) from the
    MMFF94 structure of ``smiles``: frames like those an exploration round picks."""
    from tblite.ase import TBLite

    atoms = molecule_from_smiles(smiles)
    atoms.calc = TBLite(method="GFN2-xTB", verbosity=0)
    MaxwellBoltzmannDistribution(atoms, temperature_K=500, rng=np.random.default_rng(seed))
    dynamics = Langevin(atoms, 0.5 * units.fs, temperature_K=500, friction=0.01 / units.fs,
                        rng=np.random.default_rng(seed + 1))  # fmt: skip
    frames = []
    for _ in range(count):
        dynamics.run(int(round(spacing_fs / 0.5)))
        frames.append(Atoms(atoms.numbers, atoms.positions.copy()))
    return frames


def label_all(frames: list[Atoms], level: DFTLevel, sciml: bool) -> dict:
    """Label ``frames`` in order the plain way (fresh calculator, four-centre integrals, MINAO guess) or sciml's
    (one calculator, ``level`` as given: density fitting, the nearest frame's density as the guess)."""
    seconds, cycles, energies, forces = [], [], [], []
    calculator = PySCFCalculator(level) if sciml else None
    for frame in frames:
        atoms = frame.copy()
        atoms.calc = calculator if sciml else PySCFCalculator(level, reuse_density=False)
        start = time.perf_counter()
        energies.append(float(atoms.get_potential_energy()))
        forces.append(atoms.get_forces().tolist())
        seconds.append(time.perf_counter() - start)
        cycles.append(int(atoms.calc.results["scf_cycles"]))
    return {"seconds": seconds, "cycles": cycles, "energies_ev": energies, "forces": forces}


def cached(path: Path, compute, *args) -> dict:
    """``compute(*args)``, read from ``path`` when an earlier run wrote it, else computed and written there."""
    if path.exists():
        return json.loads(path.read_text())
    value = compute(*args)
    temporary = path.with_suffix(".partial")
    temporary.write_text(json.dumps(value))
    temporary.replace(path)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--molecules", nargs="+", default=list(MOLECULES), choices=list(MOLECULES))
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), choices=list(LEVELS))
    parser.add_argument("--frames", type=int, default=4, help="frames per molecule (3 for the largest)")
    parser.add_argument("--hybrid-on", nargs="*", default=["ethanol", "paracetamol"],
                        help="molecules labelled at the hybrid level too (its plain call is the longest)")  # fmt: skip
    parser.add_argument("--spacing-fs", type=float, default=50.0)
    parser.add_argument("--work", default="runs/bench_dft", help="cache of frames and labels (resumes)")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--smoke", action="store_true", help="water at PBE/STO-3G, 2 frames: checks the path")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    molecules, levels = {name: MOLECULES[name] for name in args.molecules}, {k: LEVELS[k] for k in args.levels}
    if args.smoke:
        molecules, levels, args.frames = {"water": "O"}, {"pbe": {"xc": "PBE", "basis": "sto-3g"}}, 2
    data, rows = {}, []
    for name, smiles in molecules.items():
        count = max(2, args.frames - 1) if name == "ibuprofen" else args.frames
        frames_path = work / f"{name}_frames.extxyz"
        if not frames_path.exists():
            ase.io.write(frames_path, picked_frames(smiles, count, args.spacing_fs), format="extxyz")
        frames = ase.io.read(frames_path, index=":")
        for key, options in levels.items():
            if key != "pbe" and name not in args.hybrid_on and not args.smoke:
                continue
            level = DFTLevel(**options)
            exact = DFTLevel(**options, density_fit=False)
            plain = cached(work / f"{name}_{key}_plain.json", label_all, frames, exact, False)
            fast = cached(work / f"{name}_{key}_sciml.json", label_all, frames, level, True)
            energy_error = max(abs(a - b) for a, b in zip(plain["energies_ev"], fast["energies_ev"], strict=True))
            force_error = float(np.abs(np.array(plain["forces"]) - np.array(fast["forces"])).max())
            speedup = float(np.mean(plain["seconds"]) / np.mean(fast["seconds"]))
            data[f"{name}/{key}"] = {"atoms": len(frames[0]), "frames": len(frames), "level": level.name,
                                     "plain": plain, "sciml": fast, "speedup": speedup,
                                     "energy_difference_ha": energy_error / units.Hartree,
                                     "force_difference_ev_per_a": force_error}  # fmt: skip
            rows.append([name, len(frames[0]), level.name.removeprefix("PySCF ").removesuffix(" (density fitting)"),
                         len(frames), f"{np.mean(plain['seconds']):.1f}", f"{np.mean(plain['cycles']):.1f}",
                         f"{np.mean(fast['seconds']):.1f}", f"{np.mean(fast['cycles']):.1f}", f"{speedup:.2f}",
                         f"{energy_error / units.Hartree:.1e}", f"{force_error:.1e}"])  # fmt: skip
            print(rows[-1], flush=True)
    header = ["molecule", "atoms", "level", "frames", "plain s/label", "plain SCF cycles", "sciml s/label",
              "sciml SCF cycles", "speedup", "max dE (Ha)", "max dF (eV/Å)"]  # fmt: skip
    sections = [
        f"Frames {args.spacing_fs:g} fs apart of GFN2-xTB Langevin MD at 500 K, labelled in order. **plain**: a "
        "fresh PySCF RKS per frame, four-centre integrals, MINAO guess (sciml's oracle before). **sciml**: "
        "`sciml.active.pyscf_dft()` defaults: density fitting (PySCF's default JK-fit auxiliary basis), the "
        "nearest labelled frame's converged density as the guess (the first frame: MINAO). Both: analytic "
        "gradients, conv_tol 1e-9 Ha, grid level 3, 2 CPU cores (PySCF's OpenMP threads). dE and dF: the "
        "largest difference between the two over the frames (density fitting's error).",
        markdown_table(header, rows),
    ]
    largest = max(molecules, key=lambda n: data[f"{n}/{next(iter(levels))}"]["atoms"])
    result = {"oracle_speedup_vs_plain_pyscf": data[f"{largest}/{next(iter(levels))}"]["speedup"]}
    result |= {f"oracle_speedup_{key.replace('/', '_').replace('-', '_')}": value["speedup"]
               for key, value in data.items()}  # fmt: skip
    result["density_fit_energy_error_ha"] = max(v["energy_difference_ha"] for v in data.values())
    result["density_fit_force_error_ev_per_a"] = max(v["force_difference_ev_per_a"] for v in data.values())
    title = "The DFT oracle against the plain PySCF call" + (" (smoke run)" if args.smoke else "")
    write_results("dft_oracle", title, sections, data, result, args.results,
                  packages=("pyscf", "pyscf-dispersion", "tblite", "torch", "ase", "numpy", "sciml"))  # fmt: skip


if __name__ == "__main__":
    main()
