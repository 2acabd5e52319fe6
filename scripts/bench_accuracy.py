"""E2Former against MACE on the same aspirin files, with the same wall-clock training budget on this machine.

Data (GFN2-xTB through tblite, Langevin MD at 0.5 fs, frames 5 fs apart, four independent runs from
different RDKit conformers and seeds, each after 1 ps of equilibration) in ``data/aspirin_md/``:
train 1500 frames at 500 K, valid 300 at 500 K, test 500 at 400 K and 500 at 600 K. Missing files are
generated first (about 12 minutes on 2 cores; needs the ``data`` extra).

Training: each model gets ``--budget`` minutes of wall-clock time on the same cores, float64. One probe
epoch of each (not counted) measures the time per epoch; the number of epochs is the budget divided by it,
and both models run their last stage over the last 20 % of epochs:
- E2Former: ``configs/e2former/aspirin_md.yaml`` (the recommended config), ``trainer.max_time`` = budget.
- MACE 0.3.16 (64x0e + 64x1o, L = 1, 2 interactions, correlation 3, r_max 5 Å; EMA 0.99, AMSGrad, SWA
  stage with energy weight 1000, forces 100) in its own virtual environment under
  ``~/.cache/sciml/envs/mace-0.3.16`` (it pins e3nn 0.4.4), created on first use.

Evaluation through each model's ASE calculator (``_accuracy_eval.py``): energy MAE/atom, force MAE and
RMSE per test half, and the energy drift of an NVE run (velocity Verlet, 0.5 fs, from the first valid
frame with 500 K velocities).

    python scripts/bench_accuracy.py [--budget 40] [--md-ps 10] [--out runs/bench_accuracy] [--resume]
    python scripts/bench_accuracy.py --ablation 10     # E2Former options, 10 minutes each
    python scripts/bench_accuracy.py --ablation 30 --epochs-e2former 8 --variants 0 4 5   # same epochs each

Last line: RESULT force_mae_ratio_vs_mace=<x> energy_mae_ratio_vs_mace=<x> nve_drift_mev_per_atom_ps=<x>
(E2Former / MACE over both test halves; E2Former's |drift|).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import ase.io

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
DATA = ROOT / "data" / "aspirin_md"
ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
# file -> (steps of 0.5 fs, temperature K, seed); every 10th step is kept
RUNS = {
    "train_500K.extxyz": (15000, 500, 1),
    "valid_500K.extxyz": (3000, 500, 2),
    "test_400K.extxyz": (5000, 400, 3),
    "test_600K.extxyz": (5000, 600, 4),
}
TESTS = ["test_400K.extxyz", "test_600K.extxyz"]
MACE_ENV = Path.home() / ".cache" / "sciml" / "envs" / "mace-0.3.16"
CONFIG = "configs/e2former/aspirin_md.yaml"


def generate_data() -> None:
    """Run the missing GFN2-xTB trajectories, two at a time (tblite is single-threaded here)."""
    missing = [name for name in RUNS if not (DATA / name).exists()]
    DATA.mkdir(parents=True, exist_ok=True)
    processes = []
    for name in missing:
        steps, temperature, seed = RUNS[name]
        command = [sys.executable, "generate_molecular_md.py", "--smiles", ASPIRIN, "--name", "aspirin"]
        command += ["--steps", str(steps), "--every", "10", "--temperature", str(temperature), "--seed", str(seed)]
        command += ["--equilibrate", "2000", "--out", str(DATA / name)]
        print("+ " + " ".join(command), flush=True)
        processes.append(subprocess.Popen(command, cwd=SCRIPTS, env={**os.environ, "OMP_NUM_THREADS": "1"}))
        if len(processes) == 2:
            processes.pop(0).wait()
    for process in processes:
        process.wait()
    for name in missing:
        if not (DATA / name).exists():
            raise RuntimeError(f"generating {name} failed")


def mace_python() -> Path:
    python = MACE_ENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(MACE_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0", "mace-torch==0.3.16"], check=True)
    return python


def timed(command: list[str], log: Path, cwd: Path = ROOT) -> float:
    """Run ``command``, output to ``log``; returns wall seconds (raises with the log's tail on failure)."""
    print("+ " + " ".join(command), flush=True)
    start = time.perf_counter()
    with open(log, "w") as handle:
        code = subprocess.run(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT).returncode
    if code:
        raise RuntimeError(f"failed ({code}): {' '.join(command)}\n" + log.read_text()[-3000:])
    return time.perf_counter() - start


# E2Former variants of the ablation: options of the model on top of the recommended config
ABLATION = {
    "recommended (order 1, gated FFN, O(3))": [],
    "all-order attention": ["--model.init_args.model.init_args.order=all"],
    "S2 feed-forward (resolution 18)": ["--model.init_args.model.init_args.feed_forward=s2"],
    "SO(3) only (parity=False)": ["--model.init_args.model.init_args.parity=false"],
    "shared edge network": ["--model.init_args.model.init_args.edge_network=shared"],
    "shared edge network, hidden 32": [
        "--model.init_args.model.init_args.edge_network=shared",
        "--model.init_args.model.init_args.edge_hidden=32",
    ],
    "edge MLPs hidden 32": ["--model.init_args.model.init_args.edge_hidden=32"],
    "joint norm, balanced edge-degree scaling (the library's defaults)": [
        "--model.init_args.model.init_args.norm=joint",
        "--model.init_args.model.init_args.edge_degree_scaling=balanced",
    ],
    "joint norm, mean edge-degree scaling": ["--model.init_args.model.init_args.norm=joint"],
}


def train_e2former(
    out: Path, budget_s: float, epochs: int | None, extra: tuple[str, ...] = ()
) -> tuple[Path, int, float]:
    sciml = [sys.executable, "-m", "sciml", "fit", "--config", CONFIG, "--trainer.logger=false"]
    sciml += ["--trainer.enable_progress_bar=false", *extra]
    out.mkdir(parents=True, exist_ok=True)
    if epochs is None:
        probe = timed(
            [*sciml, "--trainer.max_epochs=1", f"--trainer.default_root_dir={out / 'probe'}"], out / "probe.log"
        )
        epochs = max(2, int(budget_s / probe))
    stage_two = f"{{start_epoch: {int(0.8 * epochs)}, energy_weight: 1000.0, force_weight: 100.0, lr: 0.0005}}"
    limit = time.strftime("00:%H:%M:%S", time.gmtime(budget_s))
    seconds = timed(
        [
            *sciml,
            f"--trainer.max_epochs={epochs}",
            f"--trainer.max_time={limit}",
            f"--trainer.default_root_dir={out / 'run'}",
            f"--model.init_args.stage_two={stage_two}",
        ],
        out / "train.log",
    )
    return next((out / "run").rglob("last.ckpt")), epochs, seconds


def mace_files(out: Path) -> dict[str, Path]:
    """The data files with labels under REF_energy / REF_forces, as MACE reads them."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in RUNS:
        frames = ase.io.read(DATA / name, index=":")
        for atoms in frames:
            atoms.info["REF_energy"] = atoms.get_potential_energy()
            atoms.arrays["REF_forces"] = atoms.get_forces()
            atoms.calc = None
        files[name] = out / name
        ase.io.write(files[name], frames, format="extxyz")
    return files


def mace_training_seconds(log: Path) -> float:
    """From MACE's log: 'Started training' to the last 'Epoch n:' line (MACE then evaluates every stage on
    the full training and validation sets, which is not training and is not counted)."""
    stamps = [
        datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")
        for line in log.read_text().splitlines()
        if "INFO: Started training" in line or "INFO: Epoch " in line
    ]
    return (stamps[-1] - stamps[0]).total_seconds()


def train_mace(out: Path, budget_s: float, epochs: int | None) -> tuple[Path, int, float]:
    out.mkdir(parents=True, exist_ok=True)
    python, files = mace_python(), mace_files(out / "data")
    command = [str(python.parent / "mace_run_train"), "--name", "aspirin", "--seed", "0", "--device", "cpu"]
    command += ["--train_file", str(files["train_500K.extxyz"]), "--valid_file", str(files["valid_500K.extxyz"])]
    command += ["--energy_key", "REF_energy", "--forces_key", "REF_forces", "--E0s", "average"]
    command += ["--model", "MACE", "--hidden_irreps", "64x0e + 64x1o", "--num_interactions", "2"]
    command += ["--correlation", "3", "--r_max", "5.0", "--batch_size", "8", "--valid_batch_size", "32"]
    command += ["--lr", "0.01", "--amsgrad", "--ema", "--ema_decay", "0.99", "--default_dtype", "float64"]
    command += ["--energy_weight", "1.0", "--forces_weight", "100.0", "--eval_interval", "1"]

    def run(n_epochs: int, folder: Path, log: Path) -> float:
        folder.mkdir(parents=True, exist_ok=True)
        dirs = [f"--{kind}_dir={folder / kind}" for kind in ("model", "log", "checkpoints", "results")]
        swa = ["--swa", "--start_swa", str(max(1, int(0.8 * n_epochs)))] if n_epochs > 1 else []
        return timed([*command, *dirs, "--max_num_epochs", str(n_epochs), *swa], log, cwd=folder)

    if epochs is None:
        run(1, out / "probe", out / "probe.log")
        epochs = max(2, int(budget_s / mace_training_seconds(out / "probe.log")))
    run(epochs, out / "run", out / "train.log")
    seconds = mace_training_seconds(out / "train.log")
    models = sorted((out / "run" / "model").glob("*.model"))
    models = [m for m in models if "compiled" not in m.name]
    chosen = next((m for m in models if "swa" in m.name or "stagetwo" in m.name), models[0])
    return chosen, epochs, seconds


def evaluate(kind: str, model: Path, python: str, md_ps: float, log: Path) -> dict:
    command = [python, str(SCRIPTS / "_accuracy_eval.py"), "--kind", kind, "--model", str(model)]
    command += ["--test", *[str(DATA / name) for name in TESTS], "--md-start", str(DATA / "valid_500K.extxyz")]
    command += ["--md-ps", str(md_ps)]
    timed(command, log)
    line = next(line for line in log.read_text().splitlines() if line.startswith("JSON "))
    return json.loads(line[5:])


def ablation(out: Path, budget_s: float, epochs: int | None = None, variants: list[int] | None = None) -> None:
    """Variants of ``ABLATION`` (all, or those numbered in ``variants``) with the same budget (epochs from each
    one's probe epoch, or the same ``epochs`` for all), test errors over both halves."""
    rows = []
    for k, (name, extra) in enumerate(ABLATION.items()):
        if variants is not None and k not in variants:
            continue
        folder = out / f"variant{k}"
        folder.mkdir(parents=True, exist_ok=True)
        checkpoint, n_epochs, seconds = train_e2former(folder, budget_s, epochs, tuple(extra))
        result = evaluate("sciml", checkpoint, sys.executable, 0.0, folder / "eval.log")
        rows.append((name, n_epochs, seconds, result))
    print(f"\nablation: {budget_s / 60:g} min per variant, 2 CPU cores, float64, test errors over both halves:")
    print("| E2Former variant | epochs | training min | params | E MAE meV/atom | F MAE meV/Å | F RMSE meV/Å |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n_epochs, seconds, result in rows:
        print(
            f"| {name} | {n_epochs} | {seconds / 60:.1f} | {result['parameters']} "
            f"| {overall(result, 'energy_mae_mev_per_atom'):.3f} | {overall(result, 'force_mae_mev_per_a'):.2f} "
            f"| {overall(result, 'force_rmse_mev_per_a'):.2f} |"
        )


def overall(result: dict, key: str) -> float:
    halves = [result["test"][str(DATA / name)] for name in TESTS]
    return sum(h[key] * h["frames"] for h in halves) / sum(h["frames"] for h in halves)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=40.0, help="training minutes per model")
    parser.add_argument("--md-ps", type=float, default=10.0)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_accuracy"))
    parser.add_argument("--epochs-e2former", type=int, help="skip the probe epoch")
    parser.add_argument("--epochs-mace", type=int, help="skip the probe epoch")
    parser.add_argument("--ablation", type=float, help="instead: train each E2Former variant for this many minutes")
    parser.add_argument("--variants", type=int, nargs="+", help="with --ablation: only these variants (0-based)")
    parser.add_argument("--resume", action="store_true", help="reuse a model's finished stage (its stage.json)")
    args = parser.parse_args()
    out = Path(args.out).resolve()  # MACE runs in its own folder: relative paths would break
    out.mkdir(parents=True, exist_ok=True)
    generate_data()
    if args.ablation:
        ablation(out / "ablation", args.ablation * 60, args.epochs_e2former, args.variants)
        return
    budget = args.budget * 60

    def e2former_stage() -> dict:
        checkpoint, epochs, seconds = train_e2former(out / "e2former", budget, args.epochs_e2former)
        result = evaluate("sciml", checkpoint, sys.executable, args.md_ps, out / "e2former" / "eval.log")
        return {**result, "training": {"epochs": epochs, "seconds": seconds}}

    def mace_stage() -> dict:
        model, epochs, seconds = train_mace(out / "mace", budget, args.epochs_mace)
        result = evaluate("mace", model, str(mace_python()), args.md_ps, out / "mace" / "eval.log")
        return {**result, "training": {"epochs": epochs, "seconds": seconds}}

    results = {}
    for name, stage in (("E2Former", e2former_stage), ("MACE", mace_stage)):
        record = out / name.lower() / "stage.json"
        if args.resume and record.exists():
            print(f"reusing {record}", flush=True)
            results[name] = json.loads(record.read_text())
        else:
            results[name] = stage()
            record.write_text(json.dumps(results[name], indent=1))
    (out / "results.json").write_text(json.dumps(results, indent=1))

    print(f"\nbudget {args.budget:g} min per model, 2 CPU cores, float64; test errors per half (meV/atom, meV/Å):")
    print("| model | epochs | train min | params | half | E MAE/atom | F MAE | F RMSE | NVE drift meV/atom/ps |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for name, result in results.items():
        for half in TESTS:
            row = result["test"][str(DATA / half)]
            nve = result.get("nve", {})
            drift = f"{nve.get('drift_mev_per_atom_ps', float('nan')):.4f}" + (
                " (blew up)" if nve.get("blew_up") else ""
            )
            print(
                f"| {name} | {result['training']['epochs']} | {result['training']['seconds'] / 60:.1f} "
                f"| {result['parameters']} | {half[5:9]} | {row['energy_mae_mev_per_atom']:.3f} "
                f"| {row['force_mae_mev_per_a']:.2f} | {row['force_rmse_mev_per_a']:.2f} | {drift} |"
            )
    e2, mace = results["E2Former"], results["MACE"]
    ratios = {
        "force_mae_ratio_vs_mace": overall(e2, "force_mae_mev_per_a") / overall(mace, "force_mae_mev_per_a"),
        "energy_mae_ratio_vs_mace": overall(e2, "energy_mae_mev_per_atom") / overall(mace, "energy_mae_mev_per_atom"),
        "nve_drift_mev_per_atom_ps": abs(e2.get("nve", {}).get("drift_mev_per_atom_ps", float("nan"))),
        "mace_nve_drift_mev_per_atom_ps": abs(mace.get("nve", {}).get("drift_mev_per_atom_ps", float("nan"))),
    }
    print("RESULT " + " ".join(f"{key}={value:.4g}" for key, value in ratios.items()))


if __name__ == "__main__":
    main()
