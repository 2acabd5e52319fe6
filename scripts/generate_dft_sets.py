"""DFT-labelled data of one molecule: a passive training pool, a validation set and test sets at two temperatures,
each from its own GFN2-xTB Langevin MD run, relabelled with sciml's PySCF oracle.

Geometries: GFN2-xTB (tblite) Langevin MD (0.5 fs, friction 0.01/fs) from the RDKit/MMFF94 structure, after
``--equilibrate`` steps, one frame every ``--every`` steps; four independent runs (seeds 11-14): the pool at 500 K
(``--pool`` frames, what a passive route trains on), validation at 500 K, tests at 400 K and 600 K. DFT-level MD
of this length would cost days here; the reference sampling is GFN2-xTB's and the labels are DFT's (stated in
every file's provenance). Labels: ``sciml.active.pyscf_dft`` at ``--xc``/``--basis`` (density fitting), through
a :class:`~sciml.active.LabelCache` (``--label-cache``: a rerun or a killed run pays for nothing twice) on a
local pool of one-thread workers (``--workers``). Test and validation sets are labelled first, then the pool in a
shuffled order (so an interrupted run's cache holds a random part of it).

Each file keeps the GFN2-xTB labels beside the DFT ones (``xtb_energy`` in ``info``, ``xtb_forces`` in
``arrays``), for a model of the difference. A frame whose SCF fails is left out and counted in the provenance.

    python scripts/generate_dft_sets.py --smiles CCO --name ethanol --out data/ethanol_dft   # ~1 h on 2 cores
    python scripts/generate_dft_sets.py --smiles O --name water --basis sto-3g --pool 8 --valid 2 --test 4 --out /tmp/w
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import ase.io
import numpy as np
from _md_runs import run_two_at_a_time
from _provenance import write_provenance

SCRIPTS = Path(__file__).resolve().parent
# file -> (temperature K, seed); the pool is the passive training set
RUNS = {"test_400K": (400, 11), "test_600K": (600, 12), "valid_500K": (500, 13), "pool_500K": (500, 14)}


def geometries(args: argparse.Namespace, folder: Path) -> dict[str, Path]:
    """The GFN2-xTB MD run of each file (two at a time: tblite runs on one thread), cached in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = {"test_400K": args.test, "test_600K": args.test, "valid_500K": args.valid, "pool_500K": args.pool}
    paths, commands = {}, []
    for name, (temperature, seed) in RUNS.items():
        paths[name] = folder / f"{args.name}_xtb_{name}_{frames[name]}.extxyz"
        if paths[name].exists():
            continue
        command = [sys.executable, str(SCRIPTS / "generate_molecular_md.py"), "--smiles", args.smiles, "--name",
                   args.name, "--steps", str(frames[name] * args.every), "--every", str(args.every),
                   "--temperature", str(temperature), "--seed", str(seed), "--equilibrate", str(args.equilibrate),
                   "--out", str(paths[name])]  # fmt: skip
        commands.append(command)
    run_two_at_a_time(commands)
    missing = [str(path) for path in paths.values() if not path.exists()]
    if missing:
        raise SystemExit(f"GFN2-xTB MD failed to write {missing}")
    return paths


def relabel(frames: list, oracle, executor, name: str) -> tuple[list, int, float, int]:
    """``frames`` (GFN2-xTB-labelled) with the oracle's labels, the xTB ones kept as ``xtb_energy`` /
    ``xtb_forces``; returns (labelled frames in order, failed SCFs, seconds, labels the cache already held)."""
    from sciml.active import OracleFailure

    start = time.perf_counter()
    bare = [frame.copy() for frame in frames]
    for frame in bare:
        frame.calc = None
    cached = sum(oracle.cache.path(frame, oracle.name).exists() for frame in bare)
    futures = [executor.submit(oracle.label, frame) for frame in bare]
    labelled, failed = [], 0
    for index, (future, frame) in enumerate(zip(futures, frames, strict=True)):
        try:
            result = future.result()
        except OracleFailure as failure:
            print(f"{name}: frame {index} failed: {failure}", flush=True)
            failed += 1
            continue
        result.info["xtb_energy"] = frame.get_potential_energy()
        result.arrays["xtb_forces"] = frame.get_forces()
        labelled.append(result)
        if (index + 1) % 50 == 0:
            print(f"{name}: {index + 1}/{len(frames)} labelled, {time.perf_counter() - start:.0f} s", flush=True)
    return labelled, failed, time.perf_counter() - start, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smiles", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", required=True, help="folder of the labelled files")
    parser.add_argument("--xc", default="PBE")
    parser.add_argument("--basis", default="def2-SVP")
    parser.add_argument("--dispersion", default=None, choices=(None, "d3bj", "d4"))
    parser.add_argument("--pool", type=int, default=1000, help="frames of the passive training pool at 500 K")
    parser.add_argument("--valid", type=int, default=50)
    parser.add_argument("--test", type=int, default=100, help="frames per test temperature")
    parser.add_argument("--every", type=int, default=40, help="MD steps of 0.5 fs between frames")
    parser.add_argument("--equilibrate", type=int, default=2000, help="steps discarded at the start of each run")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="one-thread labelling processes")
    parser.add_argument("--label-cache", default="runs/dft_labels")
    args = parser.parse_args()

    from sciml.active import LabelCache, local_pool, pyscf_dft

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = geometries(args, Path(args.label_cache).parent / "dft_geometries")
    oracle = pyscf_dft(xc=args.xc, basis=args.basis, dispersion=args.dispersion)
    oracle.cache = LabelCache(args.label_cache)
    with local_pool(args.workers) as executor:
        for name, path in paths.items():
            target = out / f"{name}.extxyz"
            if target.exists():
                print(f"{target} exists: kept", flush=True)
                continue
            frames = ase.io.read(path, index=":")
            order = np.random.default_rng(0).permutation(len(frames)) if name == "pool_500K" else range(len(frames))
            labelled, failed, seconds, cached = relabel([frames[i] for i in order], oracle, executor, name)
            temporary = target.with_suffix(".partial.extxyz")
            ase.io.write(temporary, labelled, format="extxyz")
            temporary.replace(target)
            temperature, seed = RUNS[name]
            write_provenance(
                target, method=f"geometries: GFN2-xTB (tblite) Langevin MD; labels: {oracle.name}",
                smiles=args.smiles, molecule=args.name, temperature_K=temperature, seed=seed, timestep_fs=0.5,
                friction_per_fs=0.01, keep_every=args.every, equilibration_steps=args.equilibrate,
                frames=len(labelled), failed_scf=failed, order="shuffled" if name == "pool_500K" else "MD order",
                label_seconds=round(seconds, 1), labels_from_cache=cached, workers=args.workers,
                units="positions Å, energy eV, forces eV/Å (xtb_energy, xtb_forces: GFN2-xTB's)",
            )  # fmt: skip
            print(f"{target}: {len(labelled)} frames ({failed} failed) in {seconds / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
