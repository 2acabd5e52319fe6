"""E2Former against MACE on the same aspirin files, with the same wall-clock training budget on this machine.

Data (GFN2-xTB through tblite, Langevin MD at 0.5 fs, frames 5 fs apart, four independent runs from
different RDKit conformers and seeds, each after 1 ps of equilibration) in ``data/aspirin_md/``:
train 1500 frames at 500 K, valid 300 at 500 K, test 500 at 400 K and 500 at 600 K. Missing files are
generated first (about 12 minutes on 2 cores; needs the ``data`` extra).

Training: each model gets ``--budget`` minutes of wall-clock time on the same cores, counted from the start of
training (validations included, the start-up before it not). A probe of two epochs (not counted) measures the
first epoch and then the steady time per epoch, on each model's training clock (MACE: its log); the number of
epochs is what fits in the budget, and every model runs its last stage over the last 20 % of epochs:
- E2Former: ``configs/e2former/aspirin_md.yaml`` (the library's defaults plus the data), in the precision its
  config trains in, ``trainer.max_time`` = budget, and ``FitScheduleToTime`` shortens the planned epochs (and
  with them the learning-rate schedule and stage two) to those that still fit when epochs run slower than probed;
- MACE 0.3.16 in float64 **and** in float32 (its fastest setting; see ``_accuracy_mace.py``).
Every ratio is taken against the better MACE row for that error.

Evaluation through each model's ASE calculator (``_accuracy_eval.py``, float64): energy MAE/atom, force MAE
and RMSE per test half, and the energy drift of an NVE run (velocity Verlet, 0.5 fs, from the first valid
frame with 500 K velocities); for E2Former also the largest float32 force at sites where symmetry makes it
zero (perfect fcc carbon, methane's carbon). The learning curves (validation force MAE against training
minutes) of every row go on one plot. Results with provenance (commit, machine, versions, command):
``benchmarks/results/accuracy_vs_mace_<budget>min.{json,md,png}`` (``--results`` elsewhere); the ablation's
``accuracy_ablation_<epochs>_epochs.{json,md}``.

    python scripts/bench_accuracy.py [--budget 40] [--md-ps 10] [--out runs/bench_accuracy] [--resume]
    python scripts/bench_accuracy.py --ablation 10     # every E2Former variant, 10 minutes each
    python scripts/bench_accuracy.py --ablation 30 --epochs-e2former 8 --variants config one_stage   # same epochs
    python scripts/bench_accuracy.py --smoke --out /tmp/a --results /tmp/a   # one epoch of two batches, no MACE
    python scripts/bench_accuracy.py --molecules --budget 15    # every molecule of _accuracy_molecules.py

``--molecules [names]`` (``_accuracy_molecules.py``): the same comparison (MACE in float32) on several molecules,
their data made with aspirin's recipe, two training seeds on ``--seeds-on``; results
``accuracy_molecules_<budget>min.{json,md}``, last line ``RESULT force_mae_ratio_vs_mace_mean=<x>
force_mae_ratio_vs_mace_worst=<x> energy_mae_ratio_vs_mace_mean=<x> energy_mae_ratio_vs_mace_worst=<x>
systems=<n>``.

Last line: RESULT force_mae_ratio_vs_best_mace=<x> energy_mae_ratio_vs_best_mace=<x>
nve_drift_mev_per_atom_ps=<x> symmetric_site_max_force_f32=<x> (E2Former over the better MACE row, both test
halves together; E2Former's |drift|; eV/Å).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _accuracy_mace import DTYPES, epochs_in_budget, mace_files, mace_python, train_mace
from _md_runs import run_two_at_a_time
from _results import add_result_arguments, markdown_table, recorded, write_results

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
CONFIG = "configs/e2former/aspirin_md.yaml"


def generate_data() -> None:
    """Run the missing GFN2-xTB trajectories, two at a time (tblite is single-threaded here)."""
    missing = [name for name in RUNS if not (DATA / name).exists()]
    DATA.mkdir(parents=True, exist_ok=True)
    commands = []
    for name in missing:
        steps, temperature, seed = RUNS[name]
        command = [sys.executable, str(SCRIPTS / "generate_molecular_md.py"), "--smiles", ASPIRIN, "--name"]
        command += ["aspirin", "--steps", str(steps), "--every", "10", "--temperature", str(temperature)]
        command += ["--seed", str(seed), "--equilibrate", "2000", "--out", str(DATA / name)]
        commands.append(command)
    run_two_at_a_time(commands)
    for name in missing:
        if not (DATA / name).exists():
            raise RuntimeError(f"generating {name} failed")


def timed(command: list[str], log: Path, cwd: Path = ROOT) -> float:
    """Run ``command``, output to ``log``; returns wall seconds (raises with the log's tail on failure)."""
    print("+ " + " ".join(command), flush=True)
    start = time.perf_counter()
    with open(log, "w") as handle:
        code = subprocess.run(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT).returncode
    if code:
        raise RuntimeError(f"failed ({code}): {' '.join(command)}\n" + log.read_text()[-3000:])
    return time.perf_counter() - start


MODEL = "--model.init_args.model.init_args."
CLOCK = "sciml.training.callbacks.TrainingClock"  # logs time/training_minutes with each validation
# under max_time, shortens max_epochs (and with it the cosine and stage two) to the epochs that still fit: a probe
# cannot foresee a machine's epochs slowing down (0.46 min in the probe, 0.54 in the run of 2538f8f)
FIT_TO_TIME = "sciml.training.callbacks.FitScheduleToTime"
STAGE_TWO = {"energy_weight": 1000.0, "force_weight": 100.0}  # from 80 % of the epochs, on the same schedule


def recipe_at_lr(lr: float) -> tuple[str, ...]:
    """Overrides for PotentialModule's default recipe (AMSGrad, warm-up + cosine to 5 %) at another peak lr."""
    return (
        "--model.init_args.optimizer=torch.optim.Adam",
        f"--model.init_args.optimizer.lr={lr}",
        "--model.init_args.optimizer.amsgrad=true",
        "--model.init_args.scheduler=sciml.training.schedules.WarmupCosine",
        "--model.init_args.scheduler.warmup_steps=100",
        "--model.init_args.scheduler.min_ratio=0.05",
    )


@dataclass(frozen=True)
class Variant:
    """An E2Former variant of the ablation: command-line overrides of the config, and its stage two (loss
    weights, optionally a constant learning rate, from ``stage_two_from`` of the epochs; ``None``: one stage)."""

    description: str
    overrides: tuple[str, ...] = ()
    stage_two: dict | None = field(default_factory=lambda: dict(STAGE_TWO))
    stage_two_from: float = 0.8  # fraction of the epochs before stage two


# named, so that a printed command means the same variants whatever is added here
ABLATION = {
    "config": Variant("the config as it is"),
    "order_all": Variant("all-order attention", (MODEL + "order=all",)),
    "s2_ffn": Variant("S2 feed-forward (resolution 18)", (MODEL + "feed_forward=s2",)),
    "so3": Variant("SO(3) only (parity=False)", (MODEL + "parity=false",)),
    "per_layer_edges": Variant(
        "per-layer edge MLPs of width 64", (MODEL + "edge_network=per_layer", MODEL + "edge_hidden=64")
    ),
    "shared_edges_64": Variant(
        "shared edge network of width 64", (MODEL + "edge_network=shared", MODEL + "edge_hidden=64")
    ),
    "separable_mean": Variant(
        "separable norm, mean edge-degree scaling", (MODEL + "norm=separable", MODEL + "edge_degree_scaling=mean")
    ),
    "joint_balanced": Variant(
        "joint norm, balanced edge-degree scaling", (MODEL + "norm=joint", MODEL + "edge_degree_scaling=balanced")
    ),
    "joint_mean": Variant(
        "joint norm, mean edge-degree scaling", (MODEL + "norm=joint", MODEL + "edge_degree_scaling=mean")
    ),
    "stage_two_constant_lr": Variant(
        "stage two at a constant learning rate of 5e-4 (the recipe before)", stage_two={**STAGE_TWO, "lr": 0.0005}
    ),
    "one_stage": Variant("no stage two", stage_two=None),
    "stage_two_from_half": Variant("stage two over the second half of the epochs", stage_two_from=0.5),
    "energy_weight_10": Variant(
        "energy weight 10 before stage two (forces 100)", ("--model.init_args.energy_weight=10",)
    ),
    "lr_5e-3": Variant("peak learning rate 5e-3 (the recipe's)", recipe_at_lr(0.005)),
    "lr_1e-2": Variant("peak learning rate 1e-2", recipe_at_lr(0.01)),
    "centred": Variant(
        "centred norm, balanced edge-degree scaling", (MODEL + "norm=centred", MODEL + "edge_degree_scaling=balanced")
    ),
    "bessel_8": Variant(
        "8 Bessel functions (MACE's radial basis)", (MODEL + "radial=bessel", MODEL + "radial_basis=8")
    ),
    "float64": Variant(
        "float64 training (weights, positions, labels)",
        ("--trainer.precision=64-true", "--data.init_args.dtype=float64"),
    ),
    "lr_2e-3": Variant("peak learning rate 2e-3", recipe_at_lr(0.002)),
    "gaussian_16": Variant(
        "16 Gaussians (the radial basis before)", (MODEL + "radial=gaussian", MODEL + "radial_basis=16")
    ),
    "float32": Variant(
        "float32 training (weights, positions, labels)",
        ("--trainer.precision=32-true", "--data.init_args.dtype=float32"),
    ),
}


def variant_named(name: str) -> Variant:
    """A variant of ``ABLATION``, or several joined by ``+`` (``centred+lr_5e-3``): their overrides in turn, and
    the stage two of the last one that changes it."""
    parts = name.split("+")
    unknown = [part for part in parts if part not in ABLATION]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {sorted(ABLATION)} (join several with +)")
    chosen, plain = [ABLATION[part] for part in parts], Variant("")
    staged = [v for v in chosen if (v.stage_two, v.stage_two_from) != (plain.stage_two, plain.stage_two_from)]
    last = staged[-1] if staged else plain
    return Variant(
        "; ".join(v.description for v in chosen),
        tuple(o for v in chosen for o in v.overrides),
        last.stage_two,
        last.stage_two_from,
    )


SMOKE = ("--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1")  # --smoke: the same path, seconds


def train_e2former(
    out: Path,
    budget_s: float,
    epochs: int | None,
    variant: Variant = ABLATION["config"],
    seed: int = 0,
    extra: tuple[str, ...] = (),
    config: str = CONFIG,
) -> tuple[Path, int, float]:
    """Train ``config`` (with ``variant``'s overrides and ``extra``) for ``epochs``, or for as many as a probe
    says fit in ``budget_s``; returns the last checkpoint, the epochs and the training seconds."""
    sciml = [sys.executable, "-m", "sciml", "fit", "--config", config, "--trainer.enable_progress_bar=false"]
    sciml += [f"--seed_everything={seed}", *extra]
    sciml += ["--trainer.logger=lightning.pytorch.loggers.CSVLogger", "--trainer.callbacks+=" + CLOCK]
    sciml += ["--trainer.callbacks+=" + FIT_TO_TIME]
    sciml += list(variant.overrides)
    out.mkdir(parents=True, exist_ok=True)
    if epochs is None:
        epochs = probe_epochs(sciml, out, budget_s)
    stage_two = "null"
    if variant.stage_two is not None:
        stage_two = json.dumps({"start_fraction": variant.stage_two_from, **variant.stage_two})  # of max_epochs
    limit = time.strftime("00:%H:%M:%S", time.gmtime(budget_s))
    seconds = timed(
        [
            *sciml,
            f"--trainer.max_epochs={epochs}",
            f"--trainer.max_time={limit}",
            f"--trainer.default_root_dir={out / 'run'}",
            f"--trainer.logger.save_dir={out / 'run'}",
            f"--model.init_args.stage_two={stage_two}",
        ],
        out / "train.log",
    )
    minutes = [point["minutes"] for point in e2former_curve(out / "run")]
    seconds = 60 * minutes[-1] if minutes else seconds  # fit start to the last validation, as MACE's is counted
    return next((out / "run").rglob("checkpoints/last.ckpt")), epochs, seconds


def probe_epochs(sciml: list[str], out: Path, budget_s: float) -> int:
    """The epochs that fit in ``budget_s``, from a probe of two epochs read off the training clock (fit start
    to each validation's end, as MACE's log is read): the first epoch, then the steady time per epoch. The
    start-up before fit (imports, reading and neighbour lists) is not training time and is not counted."""
    folder = out / "probe"
    where = [f"--trainer.default_root_dir={folder}", f"--trainer.logger.save_dir={folder}"]
    timed([*sciml, "--trainer.max_epochs=2", *where], out / "probe.log")
    return epochs_in_budget([point["minutes"] * 60 for point in e2former_curve(folder)], budget_s)


def evaluate(
    kind: str,
    model: Path,
    python: str,
    md_ps: float,
    log: Path,
    max_frames: int = 0,
    tests: list[Path] | None = None,
    md_start: Path | None = None,
    extra: tuple[str, ...] = (),
) -> dict:
    """Test errors on ``tests`` (default: aspirin's two halves) and an NVE run of ``md_ps`` from ``md_start``'s
    first frame, through ``_accuracy_eval.py`` run by ``python`` (sciml's or MACE's environment) with ``extra``
    arguments."""
    tests = [DATA / name for name in TESTS] if tests is None else tests  # [] for a scan alone
    md_start = md_start or DATA / "valid_500K.extxyz"
    command = [python, str(SCRIPTS / "_accuracy_eval.py"), "--kind", kind, "--model", str(model)]
    command += ["--test", *[str(path) for path in tests], "--md-start", str(md_start)]
    command += ["--md-ps", str(md_ps), "--max-frames", str(max_frames), *extra]
    timed(command, log)
    line = next(line for line in log.read_text().splitlines() if line.startswith("JSON "))
    return json.loads(line[5:])


def ablation(
    out: Path,
    budget_s: float,
    epochs: int | None = None,
    variants: list[str] | None = None,
    seed: int = 0,
    smoke: bool = False,
) -> dict:
    """Variants of ``ABLATION`` (all, or those named in ``variants``) with the same budget (epochs from each
    one's probe epoch, or the same ``epochs`` for all) and training seed, test errors over both halves."""
    chosen = {name: variant_named(name) for name in variants or ABLATION}
    rows, record = [], {}
    for name, variant in chosen.items():
        folder = out / (name if seed == 0 else f"{name}_seed{seed}")
        checkpoint, n_epochs, seconds = train_e2former(folder, budget_s, epochs, variant, seed, SMOKE if smoke else ())
        result = evaluate("sciml", checkpoint, sys.executable, 0.0, folder / "eval.log", 20 if smoke else 0)
        record[name] = {**result, "epochs": n_epochs, "seconds": seconds, "description": variant.description}
        (folder / "result.json").write_text(json.dumps({**result, "epochs": n_epochs, "seconds": seconds}, indent=1))
        rows.append((name, n_epochs, seconds, result))
    print(f"\nablation: {budget_s / 60:g} min per variant, 2 CPU cores, test errors over both halves:")
    print("| variant | epochs | training min | params | E MAE meV/atom | F MAE meV/Å | F RMSE meV/Å |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n_epochs, seconds, result in rows:
        print(
            f"| `{name}`: {chosen[name].description} | {n_epochs} | {seconds / 60:.1f} | {result['parameters']} "
            f"| {overall(result, 'energy_mae_mev_per_atom'):.3f} | {overall(result, 'force_mae_mev_per_a'):.2f} "
            f"| {overall(result, 'force_rmse_mev_per_a'):.2f} |"
        )
    return record


def overall(result: dict, key: str) -> float:
    halves = [result["test"][str(DATA / name)] for name in TESTS]
    return sum(h[key] * h["frames"] for h in halves) / sum(h["frames"] for h in halves)


def e2former_curve(run: Path) -> list[dict]:
    """``[{epoch, minutes, force_mae_mev_per_a}]`` of each validation, from the run's CSV log."""
    curve = []
    for path in run.rglob("metrics.csv"):
        with open(path) as handle:
            for row in csv.DictReader(handle):
                if row.get("val/force_mae") and row.get("time/training_minutes"):
                    minutes, mae = float(row["time/training_minutes"]), 1e3 * float(row["val/force_mae"])
                    curve.append({"epoch": int(row["epoch"]), "minutes": minutes, "force_mae_mev_per_a": mae})
    return sorted(curve, key=lambda point: point["epoch"])


def curve_at(curve: list[dict], minutes: float) -> float:
    """Validation force MAE (meV/Å) of a learning curve at ``minutes`` of training, interpolated linearly between
    its validations (NaN outside them)."""
    import numpy as np

    if not curve:
        return float("nan")
    times, maes = zip(*((p["minutes"], p["force_mae_mev_per_a"]) for p in curve), strict=True)
    return float(np.interp(minutes, times, maes, left=float("nan"), right=float("nan")))


def epochs_trained(training: dict) -> str:
    """The epochs a row trained: ``"n"``, or ``"n of planned"`` where ``trainer.max_time`` stopped the run before
    the epochs its probe planned (each epoch of the run is validated once: its curve counts them)."""
    planned, curve = training["epochs"], training.get("curve", [])
    trained = len(curve) if curve else planned
    return str(planned) if trained >= planned else f"{trained} of {planned}"


def equal_time_validation(results: dict) -> tuple[float, dict[str, float]]:
    """Every row's validation force MAE at the same training time: the shortest row's last validation (a probe
    cannot foresee a model slowing down later in its run, so the rows' runs end at different times)."""
    curves = {name: result["training"].get("curve", []) for name, result in results.items()}
    minutes = min((curve[-1]["minutes"] for curve in curves.values() if curve), default=float("nan"))
    return minutes, {name: curve_at(curve, minutes) for name, curve in curves.items()}


def plot_curves(results: dict, path: Path, title: str) -> None:
    """Validation force MAE (meV/Å, log scale) against training minutes, every row on one plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for name, result in results.items():
        curve = result["training"].get("curve", [])
        if curve:
            axes.plot([p["minutes"] for p in curve], [p["force_mae_mev_per_a"] for p in curve], "o-", ms=3, label=name)
    axes.set(xlabel="training wall-clock minutes (2 CPU cores)", ylabel="validation force MAE (meV/Å)", yscale="log")
    axes.set_title(title)
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def symmetric_site_force(checkpoint: Path) -> float:
    """Largest float32 force (eV/Å) the trained model puts where symmetry makes it zero: every atom of a
    perfect fcc carbon crystal (a = 3.57 Å, 4 x 4 x 4 cells) and the carbon of a tetrahedral methane."""
    import numpy as np
    from ase.build import bulk, molecule

    from sciml.calculators import SciMLCalculator

    calc = SciMLCalculator.from_checkpoint(checkpoint, dtype="float32")
    crystal, methane = bulk("C", "fcc", a=3.57, cubic=True).repeat(4), molecule("CH4")
    crystal.calc = methane.calc = calc
    return float(max(np.abs(crystal.get_forces()).max(), np.abs(methane.get_forces()[0]).max()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=40.0, help="training minutes per model")
    parser.add_argument("--md-ps", type=float, default=10.0)
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_accuracy"))
    parser.add_argument("--epochs-e2former", type=int, help="skip the probe epochs")
    parser.add_argument("--epochs-mace", type=int, help="skip the probe epochs (both precisions)")
    parser.add_argument("--mace-dtypes", nargs="+", choices=DTYPES, help=f"default {list(DTYPES)}; --smoke: none")
    parser.add_argument("--ablation", type=float, help="instead: train each E2Former variant for this many minutes")
    parser.add_argument("--variants", nargs="+", help=f"with --ablation: only these variants, of {sorted(ABLATION)}")
    parser.add_argument("--resume", action="store_true", help="reuse a model's finished stage (its stage.json)")
    parser.add_argument("--seed", type=int, default=0, help="with --ablation: the training seed (seed_everything)")
    parser.add_argument("--note", default="", help="a paragraph for the results file (e.g. how --resume assembled it)")
    parser.add_argument("--molecules", nargs="*", help="instead: E2Former against MACE float32 on each molecule "
                        "(none named: all of _accuracy_molecules.MOLECULES), --budget minutes each")  # fmt: skip
    parser.add_argument("--seeds-on", nargs="*", default=["aspirin", "fluorophenyl_sulfonamide"],
                        help="with --molecules: these get a second training seed (the spread)")  # fmt: skip
    add_result_arguments(parser)
    args = parser.parse_args()
    if args.mace_dtypes is None:
        args.mace_dtypes = [] if args.smoke else list(DTYPES)
    if args.smoke:  # one epoch of two batches, 20 test frames per half, 10 fs of NVE; MACE only if asked
        args.epochs_e2former, args.epochs_mace, args.md_ps = 1, 1, 0.01
    out = Path(args.out).resolve()  # MACE runs in its own folder: relative paths would break
    out.mkdir(parents=True, exist_ok=True)
    if args.molecules is not None:
        over_molecules(args, out)
        return
    generate_data()
    if args.ablation:
        tag = f"{args.epochs_e2former}_epochs" if args.epochs_e2former else f"{args.ablation:g}min"
        name = f"accuracy_ablation_{tag}" + (f"_seed{args.seed}" if args.seed else "")
        title = f"E2Former ablation on aspirin_md, {tag.replace('_', ' ')} per variant"
        with recorded(name, title, args.results):
            ablation(out / "ablation", args.ablation * 60, args.epochs_e2former, args.variants, args.seed, args.smoke)
        return
    compare(args, out)


def over_molecules(args, out: Path) -> None:
    """``--molecules``: E2Former against MACE on several molecules (``_accuracy_molecules.py``)."""
    from _accuracy_molecules import HEADER, MOLECULES, compare_molecules, molecule_rows

    unknown = sorted(set(args.molecules) - set(MOLECULES))
    if unknown:
        raise SystemExit(f"unknown molecules {unknown}; known: {sorted(MOLECULES)}")
    molecules = args.molecules or list(MOLECULES)
    if args.smoke:
        molecules, args.md_ps = ["ethanol"], 0.01
    records = compare_molecules(molecules, args.seeds_on, out, args.budget * 60, args.md_ps, args.smoke)
    rows, result = molecule_rows(records)
    table = markdown_table(HEADER, rows, "llrrrlrr")
    print(f"\n{args.budget:g} min per model per molecule, 2 CPU cores:\n{table}")
    sections = [
        f"Each molecule: GFN2-xTB Langevin MD data made as aspirin's (train 1500 frames at 500 K, validation 300, "
        f"tests 500 at 400 K and 500 at 600 K, independent runs). E2Former: `{CONFIG}` with the data paths "
        f"changed; MACE 0.3.16 float32; {args.budget:g} min of wall-clock training each (epochs from a two-epoch "
        "probe), one window, the same cores. Ratios: E2Former over MACE at the same seed, both test files.",
        table,
    ] + ([args.note] if args.note else [])
    name = f"accuracy_molecules_{args.budget:g}min" + ("_smoke" if args.smoke else "")
    title = f"E2Former against MACE over {len(records)} molecules, {args.budget:g} min each" + (
        " (smoke run)" if args.smoke else "")  # fmt: skip
    write_results(name, title, sections, records, result, args.results)


def compare(args, out: Path) -> None:
    """E2Former against MACE at the same budget: the stages, the table, the ratios, the results files."""
    budget = args.budget * 60
    extra, frames = (SMOKE, 20) if args.smoke else ((), 0)

    def e2former_stage() -> dict:
        checkpoint, epochs, seconds = train_e2former(out / "e2former", budget, args.epochs_e2former, extra=extra)
        result = evaluate("sciml", checkpoint, sys.executable, args.md_ps, out / "e2former" / "eval.log", frames)
        result["symmetric_site_max_force_f32"] = symmetric_site_force(checkpoint)
        curve = e2former_curve(out / "e2former" / "run")
        return {**result, "training": {"epochs": epochs, "seconds": seconds, "curve": curve}}

    def mace_stage(dtype: str) -> Callable[[], dict]:
        def stage() -> dict:
            files = mace_files(DATA, list(RUNS), out / "mace_data")
            folder = out / f"mace_{dtype}"
            model, epochs, seconds, curve = train_mace(files, folder, budget, args.epochs_mace, dtype, timed)
            result = evaluate("mace", model, str(mace_python()), args.md_ps, folder / "eval.log", frames)
            return {**result, "training": {"epochs": epochs, "seconds": seconds, "curve": curve}}

        return stage

    stages = {"E2Former": e2former_stage, **{f"MACE {dtype}": mace_stage(dtype) for dtype in args.mace_dtypes}}
    results = {}
    for name, stage in stages.items():
        record = out / name.lower().replace(" ", "_") / "stage.json"
        if args.resume and record.exists():
            print(f"reusing {record}", flush=True)
            results[name] = json.loads(record.read_text())
        else:
            results[name] = stage()
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(results[name], indent=1))
    name = f"accuracy_vs_mace_{args.budget:g}min" + ("_smoke" if args.smoke else "")
    figure = Path(args.results) / f"{name}.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_curves(results, figure, f"aspirin, GFN2-xTB, {args.budget:g} min per model")

    header = ["model", "epochs", "train min", "params", "test half", "E MAE meV/atom", "E mean signed meV/atom"]
    header += ["F MAE meV/Å", "F RMSE meV/Å", "NVE drift meV/atom/ps"]
    rows = []
    for model, result in results.items():
        nve = result.get("nve", {})
        drift = "not run" if "drift_mev_per_atom_ps" not in nve else f"{nve['drift_mev_per_atom_ps']:.4f}"
        drift += " (blew up)" if nve.get("blew_up") else ""
        for k, half in enumerate(TESTS):
            row = result["test"][str(DATA / half)]
            train_minutes = f"{result['training']['seconds'] / 60:.1f}"
            first = [model, epochs_trained(result["training"]), train_minutes] if not k else []
            rows.append(
                (first or ["", "", ""])
                + ([f"{result['parameters']:,}".replace(",", " ")] if not k else [""])
                + [half[5:9], f"{row['energy_mae_mev_per_atom']:.3f}"]
                + [f"{row.get('energy_mean_signed_error_mev_per_atom', float('nan')):+.3f}"]
                + [f"{row['force_mae_mev_per_a']:.2f}", f"{row['force_rmse_mev_per_a']:.2f}", drift if not k else ""]
            )
    table = markdown_table(header, rows, "llrrlrrrrr")
    print(f"\nbudget {args.budget:g} min per model, 2 CPU cores; test errors per half:\n{table}")
    e2, peers = results["E2Former"], [result for model, result in results.items() if model.startswith("MACE")]
    best_force = min((overall(peer, "force_mae_mev_per_a") for peer in peers), default=float("nan"))
    best_energy = min((overall(peer, "energy_mae_mev_per_atom") for peer in peers), default=float("nan"))
    ratios = {  # each against the better MACE row for that error
        "force_mae_ratio_vs_best_mace": overall(e2, "force_mae_mev_per_a") / best_force,
        "energy_mae_ratio_vs_best_mace": overall(e2, "energy_mae_mev_per_atom") / best_energy,
        "nve_drift_mev_per_atom_ps": abs(e2.get("nve", {}).get("drift_mev_per_atom_ps", float("nan"))),
        "symmetric_site_max_force_f32": e2["symmetric_site_max_force_f32"],
    }
    minutes, at_minutes = equal_time_validation(results)
    equal_time = (
        f"Validation force MAE at {minutes:.1f} training minutes, the shortest row's run: "
        + ", ".join(f"{name} {mae:.2f} meV/Å" for name, mae in at_minutes.items())
        + " (interpolated on each row's curve)."
    )
    sections = [
        f"Aspirin (GFN2-xTB, `data/aspirin_md/`): train 1500 frames at 500 K, test 500 at 400 K and 500 at 600 K. "
        f"Every model trained for the same {args.budget:g} minutes of wall-clock time on the same cores (epochs from "
        "a two-epoch probe each, the last stage over the last 20 % of them), evaluated through its ASE calculator in "
        f"float64; NVE: velocity Verlet, 0.5 fs, {args.md_ps:g} ps from the first validation frame at 500 K. "
        "E2Former: `configs/e2former/aspirin_md.yaml` (the library's defaults). MACE 0.3.16: 64x0e + 64x1o, L 1, "
        "2 interactions, correlation 3, in the precisions named. Ratios are against the better MACE row.",
        table,
        f"Symmetric-site float32 force of the trained E2Former: {ratios['symmetric_site_max_force_f32']:.2e} eV/Å "
        "(perfect fcc carbon and methane's carbon, where symmetry makes it zero).",
        f"Validation force MAE against training time, every row: ![learning curves]({figure.name})",
        equal_time,
    ] + ([args.note] if args.note else [])
    title = f"E2Former against MACE, {args.budget:g} minutes of training each, aspirin" + (
        " (smoke run)" if args.smoke else ""
    )
    equal = {"minutes": minutes, "validation_force_mae_mev_per_a": at_minutes}
    write_results(name, title, sections, {"results": results, "ratios": ratios, "equal_time": equal}, ratios,
                  args.results)  # fmt: skip


if __name__ == "__main__":
    main()
