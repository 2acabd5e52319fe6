"""Accuracy and speed of E2Former's named sizes (``E2Former.preset``: small, medium = the defaults, large) on a
molecule and on a metal, each trained with the library's recipe for the same number of epochs.

- Aspirin (``configs/e2former/aspirin_md.yaml``: GFN2-xTB MD, train 1500 frames at 500 K, test 1000 at 400 K
  and 600 K): ``--epochs-aspirin`` epochs, test errors through the ASE calculator in float64 (the evaluation
  of ``bench_accuracy.py``).
- fcc Cu (``configs/e2former/cu_pbc.yaml``: ASE EMT MD at 300/600/900 K and -2/0/+2 % strain, split by
  trajectory, energies, forces and stress): ``--epochs-cu`` epochs, test errors from ``sciml test``.
- Speed: ASE velocity Verlet (1 fs) through ``SciMLCalculator`` in float32 with the trained aspirin model on
  aspirin (21 atoms) and the trained Cu model on a 256-atom fcc Cu box (``_systems.py``), milliseconds per
  step; and the training time per epoch of each dataset.

Results with provenance: ``benchmarks/results/presets.{json,md}`` (``--results`` elsewhere).

    python scripts/bench_presets.py [--presets small medium large] [--epochs-aspirin 4] [--epochs-cu 15]
    python scripts/bench_presets.py --smoke --results /tmp/presets    # seconds: same code path, tiny budget

Last line: RESULT force_mae_aspirin_<preset>_mev_per_a=<x> ... force_mae_cu_<preset>_mev_per_a=<x> ...
md_ms_per_step_cu256_<preset>=<x> ...
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from _accuracy_eval import test_errors
from _bench_utils import verlet_seconds
from _results import RESULTS, markdown_table, write_results
from _systems import cu_crystal, molecule
from bench_accuracy import DATA, TESTS, timed

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ("small", "medium", "large")
SYSTEMS = {  # system -> config, the recipe's stage two needs max_epochs (PotentialModule's default: last 20 %)
    "aspirin": "configs/e2former/aspirin_md.yaml",
    "cu": "configs/e2former/cu_pbc.yaml",
}
SMOKE = ["--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1", "--trainer.limit_test_batches=1"]


def sciml_command(system: str, preset: str, run: Path, smoke: bool) -> list[str]:
    command = [sys.executable, "-m", "sciml", "--config", SYSTEMS[system]]
    command += [f"--model.init_args.model=configs/e2former/presets/{preset}.yaml", "--seed_everything=0"]
    command += ["--trainer.enable_progress_bar=false", "--trainer.logger=lightning.pytorch.loggers.CSVLogger"]
    command += [f"--trainer.default_root_dir={run}", f"--trainer.logger.save_dir={run}"]
    return command + (SMOKE if smoke else [])


def train(system: str, preset: str, epochs: int, out: Path, smoke: bool) -> tuple[Path, float]:
    """Train ``preset`` on ``system`` for ``epochs``; (last checkpoint, training seconds)."""
    folder = out / system / preset
    folder.mkdir(parents=True, exist_ok=True)
    command = sciml_command(system, preset, folder / "run", smoke)
    command.insert(3, "fit")
    seconds = timed([*command, f"--trainer.max_epochs={epochs}"], folder / "train.log", cwd=ROOT)
    return next((folder / "run").rglob("checkpoints/last.ckpt")), seconds


def cu_test_errors(preset: str, checkpoint: Path, out: Path, smoke: bool) -> dict:
    """``sciml test`` of the Cu model on the Cu test split: energy (meV/atom), force (meV/Å), stress (meV/Å^3)."""
    folder = out / "cu" / preset
    command = sciml_command("cu", preset, folder / "test", smoke)
    command.insert(3, "test")
    timed([*command, f"--ckpt_path={checkpoint}"], folder / "test.log", cwd=ROOT)
    (metrics,) = (folder / "test").rglob("metrics.csv")
    with open(metrics) as handle:
        row = next(r for r in csv.DictReader(handle) if r.get("test/force_mae"))
    return {
        "energy_mae_mev_per_atom": 1e3 * float(row["test/energy_mae_per_atom"]),
        "force_mae_mev_per_a": 1e3 * float(row["test/force_mae"]),
        "stress_mae_mev_per_a3": 1e3 * float(row["test/stress_mae"]),
    }


def aspirin_test_errors(checkpoint: Path, smoke: bool) -> dict:
    """Test errors over both aspirin test files (``bench_accuracy.py``'s evaluation; smoke: 20 frames each)."""
    from sciml.calculators import SciMLCalculator

    calc = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    halves = [test_errors(calc, str(DATA / name), 20 if smoke else 0) for name in TESTS]
    frames = sum(h["frames"] for h in halves)
    return {
        key: sum(h[key] * h["frames"] for h in halves) / frames
        for key in ("energy_mae_mev_per_atom", "force_mae_mev_per_a", "force_rmse_mev_per_a")
    }


def md_ms_per_step(checkpoint: Path, system: str, steps: int) -> tuple[int, float]:
    """(atoms, milliseconds per velocity-Verlet step) in float32 through the ASE calculator, on aspirin or a
    256-atom fcc Cu box (``_systems.py``)."""
    from sciml.calculators import SciMLCalculator

    atoms = molecule() if system == "aspirin" else cu_crystal(256)
    calc = SciMLCalculator.from_checkpoint(checkpoint, dtype="float32")
    return len(atoms), 1e3 * verlet_seconds(calc, atoms, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--epochs-aspirin", type=int, default=4)
    parser.add_argument("--epochs-cu", type=int, default=15)
    parser.add_argument("--md-steps", type=int, default=50)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_presets"))
    parser.add_argument("--results", default=str(RESULTS), help="folder of presets.json / presets.md")
    parser.add_argument("--smoke", action="store_true", help="1 epoch of 2 batches, 2 MD steps: checks the path")
    args = parser.parse_args()
    if args.smoke:
        args.epochs_aspirin = args.epochs_cu = 1
        args.md_steps = 2
    out = Path(args.out).resolve()
    epochs = {"aspirin": args.epochs_aspirin, "cu": args.epochs_cu}
    data: dict[str, dict] = {}
    for preset in args.presets:
        row: dict = {}
        for system in SYSTEMS:
            checkpoint, seconds = train(system, preset, epochs[system], out, args.smoke)
            errors = aspirin_test_errors(checkpoint, args.smoke) if system == "aspirin" else None
            errors = errors or cu_test_errors(preset, checkpoint, out, args.smoke)
            atoms, ms = md_ms_per_step(checkpoint, system, args.md_steps)
            row[system] = {
                "epochs": epochs[system], "training_s": seconds, "s_per_epoch": seconds / epochs[system],
                "test": errors, "md_atoms": atoms, "md_ms_per_step_f32": ms,
            }  # fmt: skip
        from sciml.calculators import load_model

        row["parameters"] = sum(p.numel() for p in load_model(checkpoint).parameters())
        data[preset] = row

    aspirin_rows = [
        [f"`{p}`", f"{r['parameters']:,}".replace(",", " "), f"{r['aspirin']['test']['energy_mae_mev_per_atom']:.3f}",
         f"{r['aspirin']['test']['force_mae_mev_per_a']:.2f}", f"{r['aspirin']['test']['force_rmse_mev_per_a']:.2f}",
         f"{r['aspirin']['s_per_epoch'] / 60:.2f}", f"{r['aspirin']['md_ms_per_step_f32']:.1f}"]
        for p, r in data.items()
    ]  # fmt: skip
    cu_rows = [
        [f"`{p}`", f"{r['cu']['test']['energy_mae_mev_per_atom']:.3f}", f"{r['cu']['test']['force_mae_mev_per_a']:.2f}",
         f"{r['cu']['test']['stress_mae_mev_per_a3']:.3f}", f"{r['cu']['s_per_epoch']:.1f}",
         f"{r['cu']['md_ms_per_step_f32']:.1f}"]
        for p, r in data.items()
    ]  # fmt: skip
    sections = [
        f"Aspirin (GFN2-xTB; {args.epochs_aspirin} epochs of 1500 frames; test: 1000 frames at 400 K and 600 K; "
        "MD: 21 atoms, float32):",
        markdown_table(
            ["preset", "parameters", "E MAE meV/atom", "F MAE meV/Å", "F RMSE meV/Å", "min/epoch", "MD ms/step"],
            aspirin_rows,
        ),
        f"fcc Cu (ASE EMT; {args.epochs_cu} epochs; test: a held-out trajectory; MD: 256 atoms, float32):",
        markdown_table(
            ["preset", "E MAE meV/atom", "F MAE meV/Å", "stress MAE meV/Å³", "s/epoch", "MD ms/step"], cu_rows
        ),
        "Presets: `small` = C 32, 2 layers; `medium` = the defaults (C 64, lmax 2, 3 layers, 4 heads); `large` = "
        "C 128, 4 layers, 8 heads. Each is trained with PotentialModule's default recipe (float32).",
    ]
    result = {}
    for preset, row in data.items():
        result[f"force_mae_aspirin_{preset}_mev_per_a"] = row["aspirin"]["test"]["force_mae_mev_per_a"]
        result[f"force_mae_cu_{preset}_mev_per_a"] = row["cu"]["test"]["force_mae_mev_per_a"]
        result[f"md_ms_per_step_cu256_{preset}"] = row["cu"]["md_ms_per_step_f32"]
    title = "E2Former presets: accuracy and speed on aspirin and fcc Cu" + (" (smoke run)" if args.smoke else "")
    write_results("presets", title, sections, data, result, args.results)


if __name__ == "__main__":
    main()
