"""DFT quality with the fewest DFT calls: the oracle against the plain PySCF call, then every route to a DFT-level
model of ethanol (9 atoms) or N-methylacetamide (12) side by side.

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
Results: ``benchmarks/results/dft_oracle.{json,md}``.

Stage ``routes`` (deliverables 2-4; ``_dft_routes.py``): on ``data/<name>_dft/`` (made by
``generate_dft_sets.py`` when missing, ~1 h for either), passive E2Former at several sizes, MACE on the largest
passive set, a DFT - GFN2-xTB difference model, on-the-fly learning with DFT alone and the two-level route
(``configs/learn/<name>_dft.yaml``), each tested at 400 K and 600 K. Each route is cached in
``<work>/routes_<name>/<route>/stage.json`` as it finishes: a run stopped anywhere resumes at the next route.
Results: ``benchmarks/results/dft_routes_<name>.{json,md,png}``.

    python scripts/bench_dft.py                                  # both stages; hours on 2 CPU cores, resumable
    python scripts/bench_dft.py --stages oracle --molecules ethanol --levels pbe --frames 2
    python scripts/bench_dft.py --stages routes --routes passive_1000 mace_1000 --budget 10
    python scripts/bench_dft.py --stages routes --name n_methylacetamide            # its pool: 500 frames
    python scripts/bench_dft.py --smoke --results /tmp/dft --work /tmp/dft-work   # water, STO-3G: minutes

Last line (routes): ``RESULT dft_calls_ratio_vs_passive=<x> force_mae_ratio_vs_passive=<x>
force_mae_ratio_vs_mace_same_labels=<x> oracle_speedup_vs_plain_pyscf=<x> minutes_to_dft_model=<x>`` (the
two-level route the learn config takes, by its ``transfer``, against the largest passive set; E2Former against
MACE on that set; the oracle stage's speedup on the largest molecule; the two-level route's minutes, both levels).
With ``--stages oracle`` alone: the oracle stage's values (``oracle_speedup_<molecule>_<level>``, density
fitting's largest errors).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import ase.io
import numpy as np
import yaml
from _results import RESULTS, markdown_table, write_results
from ase import Atoms, units
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

from sciml.active import DFTLevel, PySCFCalculator, molecule_from_smiles

MOLECULES = {"ethanol": "CCO", "paracetamol": "CC(=O)Nc1ccc(O)cc1", "ibuprofen": "CC(C)Cc1ccc(cc1)C(C)C(=O)O"}
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pyscf", "pyscf-dispersion", "tblite", "torch", "ase", "numpy", "sciml")
# molecules with DFT sets (data/<name>_dft), configs (<name>_dft.yaml) and a torsion to scan (_rotor.TORSIONS)
ROUTE_SMILES = {"ethanol": "CCO", "n_methylacetamide": "CNC(C)=O"}
POOL_FRAMES = {"ethanol": 1000, "n_methylacetamide": 500}  # the passive pool, sized to what a label costs
TEST_NAMES = ["400 K", "600 K"]


def default_routes(pool: int) -> list[str]:
    """Passive on the whole pool, MACE on it, the two-level routes, then the smaller passive, difference and
    distilled sets (a tenth and a quarter of the pool) and DFT alone: the order a stopped run resumes in."""
    return [f"passive_{pool}", f"mace_{pool}", "two_level_difference", "two_level_composite", "two_level",
            f"passive_{pool // 10}", f"passive_{pool // 4}", f"delta_{pool // 10}", f"distill_{pool // 10}",
            "dft_alone"]  # fmt: skip


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


def oracle_stage(args: argparse.Namespace, work: Path) -> dict[str, float]:
    """The oracle against the plain PySCF call: the table, ``dft_oracle.{json,md}``; returns its RESULT values."""
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
    write_results("dft_oracle", title, sections, data, result, args.results, packages=PACKAGES, print_result=False)
    return result


def routes_stage(args: argparse.Namespace, work: Path, oracle_speedup: float) -> None:
    """Every route of ``_dft_routes`` on ``args.name``'s DFT sets: the table, the plot, ``dft_routes_<name>``."""
    from _dft_routes import HEADER, Routes, mean_force_mae, plot_routes, result_line, route_rows, xtb_ms_per_step
    from _rotor import TORSIONS

    name, data = ("water", work / "water_dft") if args.smoke else (args.name, ROOT / "data" / f"{args.name}_dft")
    smoke_routes = ["passive_8", "delta_8", "distill_8", "two_level", "two_level_difference", "two_level_composite"]
    chosen = smoke_routes if args.smoke else args.routes or default_routes(POOL_FRAMES[name])
    needed = ["test_400K", "test_600K", "valid_500K"]
    needed += (
        ["pool_500K"] if any(route.split("_")[0] in ("passive", "delta", "distill", "mace") for route in chosen) else []
    )
    if not all((data / f"{file}.extxyz").exists() for file in needed):
        command = [sys.executable, str(ROOT / "scripts" / "generate_dft_sets.py"), "--smiles",
                   ROUTE_SMILES.get(name, "O"), "--name", name, "--out", str(data), "--label-cache",
                   args.label_cache]  # fmt: skip
        command += ["--pool", str(POOL_FRAMES[name])] if not args.smoke else []
        if args.smoke:
            command += ["--basis", "sto-3g", "--pool", "8", "--valid", "2", "--test", "3"]
        print("+ " + " ".join(command), flush=True)
        subprocess.run(command, check=True)
    stem = f"dft_routes_{name}" + ("_smoke" if args.smoke else "")
    committed = Path(args.results) / f"{stem}.json"
    reuse = args.reuse_results and committed.exists()
    recorded = json.loads(committed.read_text())["results"]["routes"] if reuse else {}
    routes = Routes(name, data, work / f"routes_{name}", args.budget * 60, args.md_ps, Path(args.label_cache),
                    args.smoke, recorded)  # fmt: skip
    records = {}
    for route in chosen:
        records[route] = routes.stage(route)
        print(f"{route}: {records[route]['dft_calls']} DFT calls, test force MAE "
              f"{mean_force_mae(records[route]):.1f} meV/Å", flush=True)  # fmt: skip
    xtb_ms = xtb_ms_per_step(ase.io.read(data / "valid_500K.extxyz", index=0))
    figure = Path(args.results) / f"{stem}.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_routes(records, figure, f"{name}, PBE/def2-SVP: test force error against DFT calls")
    scan = routes.reference_scan() if args.reference_scan else {}
    scan_text = f"{scan['barrier_mev']:.0f} meV" if scan else "not scanned (--no-reference-scan or a smoke run)"
    torsion = TORSIONS["ethanol" if args.smoke else name]
    first, second = torsion.well_names
    provenance = json.loads((data / "test_400K.extxyz.provenance.json").read_text())
    pool = data / "pool_500K.extxyz.provenance.json"
    speed = ""
    if pool.exists():
        pool_provenance = json.loads(pool.read_text())
        speed = (f"A DFT label costs {routes.label_seconds():.1f} s (wall time over the labels computed, the sets "
                 f"labelled in MD order; the shuffled pool's cost more) on {pool_provenance['workers']} one-thread "
                 "workers: the passive routes' DFT minutes. ")  # fmt: skip
    sections = [
        f"{name} at {provenance['method'].split('labels: ')[-1]}: test sets of {', '.join(TEST_NAMES)} "
        f"(`{data.relative_to(ROOT) if data.is_relative_to(ROOT) else data}`, made by "
        "`scripts/generate_dft_sets.py`: geometries of separate GFN2-xTB Langevin MD runs, DFT labels). "
        f"{speed}Every training: {args.budget:g} min of wall-clock time "
        "(epochs from a two-epoch probe); learning routes: `sciml learn --config "
        f"{routes.learn_config.relative_to(ROOT)}` (`--pretrain none`: DFT alone), their time budget in the config. "
        "Delta rows learn DFT - GFN2-xTB and are tested as GFN2-xTB + model (exactly the model's error on the "
        "difference labels); their MD needs a GFN2-xTB call every step besides the model, as does "
        "two_level_composite's (GFN2-xTB + the two-level run's final difference model, `composite.ckpt`). "
        f"NVE: velocity Verlet, 0.5 fs, {args.md_ps:g} ps from the first validation frame at 500 K. Torsion "
        f"barrier: {torsion.label}, {first} ({torsion.wells[0]:.0f}°) -> {second} ({torsion.wells[1]:.0f}°) on a "
        f"relaxed scan of the dihedral ({torsion.angles[0]}° to {torsion.angles[-1]}°, 20° steps, BFGS to 0.02 "
        f"eV/Å) from the first validation frame; {name}'s own at the DFT level: {scan_text}.",
        markdown_table(HEADER, route_rows(records, xtb_ms), "lrrrrrlrrrrl"),
        f"Test force MAE against DFT calls, every route (learning routes: each round's model, then the final "
        f"one): ![routes]({figure.name})",
    ]
    transfer = yaml.safe_load(routes.learn_config.read_text()).get("transfer", "fine-tune")
    result = result_line(records, oracle_speedup, "two_level_difference" if transfer == "difference" else "two_level")
    title = f"Routes to a DFT-level model of {name}" + (" (smoke run)" if args.smoke else "")
    write_results(
        stem, title, sections, {"routes": records, "dft_rotor_scan": scan}, result, args.results, packages=PACKAGES
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", nargs="+", default=["oracle", "routes"], choices=["oracle", "routes"])
    parser.add_argument("--molecules", nargs="+", default=list(MOLECULES), choices=list(MOLECULES))
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), choices=list(LEVELS))
    parser.add_argument("--frames", type=int, default=4, help="frames per molecule (3 for the largest)")
    parser.add_argument("--hybrid-on", nargs="*", default=["ethanol", "paracetamol"],
                        help="molecules labelled at the hybrid level too (its plain call is the longest)")  # fmt: skip
    parser.add_argument("--spacing-fs", type=float, default=50.0)
    parser.add_argument("--name", default="ethanol", choices=list(ROUTE_SMILES), help="routes: the molecule")
    parser.add_argument("--routes", nargs="+", help="routes: passive_N, mace_N, delta_N, distill_N, dft_alone, "
                        "two_level, two_level_difference, two_level_composite, refit_<learning route> (in this "
                        "order; default: default_routes of the molecule's pool)")  # fmt: skip
    parser.add_argument("--budget", type=float, default=10.0, help="routes: training minutes per passive model")
    parser.add_argument("--md-ps", type=float, default=5.0, help="routes: ps of each final model's NVE run")
    parser.add_argument("--label-cache", default="runs/dft_labels", help="DFT labels keyed by geometry and level")
    parser.add_argument("--work", default="runs/bench_dft", help="cache of frames, labels and models (resumes)")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--reference-scan", action=argparse.BooleanOptionalAction, default=True,
                        help="routes: the DFT level's own relaxed torsion scan (~20 min, 12 atoms)")  # fmt: skip
    parser.add_argument("--reuse-results", action=argparse.BooleanOptionalAction, default=True,
                        help="routes: a route the work folder lacks is taken from the results file when it has it "
                        "(a benchmark resumed on a new machine)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="water at PBE/STO-3G, a few frames: checks the path")
    args = parser.parse_args()
    work = Path(args.work).resolve()  # MACE trains in its own folder: absolute paths
    work.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        args.label_cache, args.md_ps = str(work / "dft_labels"), 0.01
    oracle = oracle_stage(args, work) if "oracle" in args.stages else {}
    if "routes" in args.stages:
        speedup = oracle.get("oracle_speedup_vs_plain_pyscf")
        if speedup is None and (Path(args.results) / "dft_oracle.json").exists():
            speedup = json.loads((Path(args.results) / "dft_oracle.json").read_text())["result"][
                "oracle_speedup_vs_plain_pyscf"]  # fmt: skip
        routes_stage(args, work, float("nan") if speedup is None else speedup)
    else:
        print("RESULT " + " ".join(f"{key}={value:.4g}" for key, value in oracle.items()))


if __name__ == "__main__":
    main()
