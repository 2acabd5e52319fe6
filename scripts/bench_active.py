"""On-the-fly learning against passive sampling, and the calibration of the uncertainty on held-out data.

On a molecule that ``data/`` does not ship (paracetamol, C8H9NO2, 20 atoms, from its SMILES string):

1. Reference data, GFN2-xTB Langevin MD (tblite, 0.5 fs, friction 0.01/fs): the passive training set (frames
   sampled uniformly from a run at the target temperature, 1500 like ``data/aspirin_md``) and two independent
   test runs, at the target temperature and 100 K above it.
2. Passive baselines, trained on the passive set with ``sciml.active.train_round`` (the loop's own training):
   the single model with its last-layer (LLPR) uncertainty, the loop's default, and a four-member committee.
   Their calibration at both test temperatures (trained at T, the hotter run is held out and beyond):
   Spearman of per-frame predicted force uncertainty against per-frame force RMSE, coverage of
   ``|error| <= 2 sigma`` per force component, the reliability plot; and the cost of the single-model estimate
   per calculator call.
3. Active learning (``sciml.active.ActiveLearning`` with the ``sciml learn`` defaults at the target
   temperature, GFN2-xTB oracle): each round's model is tested, so the oracle calls it needs to reach the
   passive model's test force MAE are read off; the wall time is split into oracle, training and MD.
4. A long ML Langevin run at the target temperature with the final model: the largest per-atom force
   uncertainty over it against the threshold, and whether every covalent bond of the start survived.

Results with provenance: ``benchmarks/results/active.{json,md}`` and ``active_calibration_{single,committee}.png``.
Every stage keeps its output in ``--out`` (reference frames, models, the loop's directory): a rerun reuses them,
with the times they took when they ran (``timings.json``), and redoes the evaluations and the long run.

    python scripts/bench_active.py [--temperature 500] [--md-ps 100] [--passive-epochs 20]
    python scripts/bench_active.py --smoke --results /tmp/active   # minutes: the same path, tiny budgets

Last line: RESULT oracle_calls_ratio_vs_passive=<x> force_mae_ratio_vs_passive=<x> spearman_committee=<x>
spearman_single=<x> coverage_2sigma=<x> md_<ps>ps_max_uncertainty_ratio=<x>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

import ase.io
import numpy as np
from _bench_utils import calculator_seconds
from _provenance import run_provenance
from _results import RESULTS, markdown_table, write_results
from ase import Atoms, units
from ase.calculators.singlepoint import SinglePointCalculator
from ase.constraints import FixCom
from ase.md.langevin import Langevin

from sciml.active import ActiveLearning, ExplorationSettings, LearningSettings, TrainingSettings, gfn2_xtb, train_round
from sciml.active.exploration import covalent_bonds
from sciml.active.structures import molecule_from_smiles
from sciml.calculators import SciMLCalculator, load_model
from sciml.md.ase_driver import initial_velocities
from sciml.uncertainty.report import calibration_report

ROOT = Path(__file__).resolve().parents[1]
SMILES = "CC(=O)Nc1ccc(O)cc1"  # paracetamol


def stage_timings(out: Path, results: Path) -> dict:
    """Seconds of the stages already run in ``out`` (``timings.json``; else the previous results file's): a
    rerun that reuses cached reference data, models or the loop reports the times they took when they ran."""
    if (out / "timings.json").exists():
        return json.loads((out / "timings.json").read_text())
    previous = results / "active.json"
    if not previous.exists():
        return {}
    data = json.loads(previous.read_text())["results"]
    timings = dict(data.get("reference", {}))
    timings |= {f"passive_{kind}_training_s": row["training_s"] for kind, row in data.get("passive", {}).items()}
    if "active" in data:
        timings["active_wall_s"] = data["active"]["wall_s"]
    return timings


def record_timing(out: Path, timings: dict, key: str, seconds: float) -> None:
    timings[key] = seconds
    (out / "timings.json").write_text(json.dumps(timings, indent=1))


def reference_md(start: Atoms, temperature: float, frames: int, every: int, seed: int, equilibrate: int) -> list[Atoms]:
    """``frames`` GFN2-xTB-labelled frames every ``every`` steps of Langevin MD (0.5 fs) after ``equilibrate``."""
    atoms = start.copy()
    atoms.calc = gfn2_xtb().factory()
    initial_velocities(atoms, temperature, seed)
    atoms.set_constraint(FixCom())
    dynamics = Langevin(atoms, 0.5 * units.fs, temperature_K=temperature, friction=0.01 / units.fs, fixcm=False,
                        rng=np.random.default_rng(seed + 1))  # fmt: skip
    dynamics.run(equilibrate)
    kept = []
    for _ in range(frames):
        dynamics.run(every)
        frame = Atoms(atoms.numbers, atoms.positions)
        frame.calc = SinglePointCalculator(frame, energy=atoms.get_potential_energy(),
                                           forces=atoms.get_forces(apply_constraint=False))  # fmt: skip
        kept.append(frame)
    return kept


def reference_sets(
    out: Path,
    start: Atoms,
    temperature: float,
    passive_frames: int,
    passive_every: int,
    test_frames: int,
    equilibrate: int,
    timings: dict,
) -> dict[str, list[Atoms]]:
    """The reference frames, generated into ``out`` once (``passive``, ``test``, ``test_hot`` extxyz, their
    seeds fixed) and read back after that: the passive set and the test run at ``temperature``, a test run
    100 K above it."""
    sets = {}
    runs = [("passive", temperature, passive_frames, passive_every, 1),
            ("test", temperature, test_frames, 40, 2),
            ("test_hot", temperature + 100, test_frames, 40, 3)]  # fmt: skip
    for name, run_temperature, count, every, seed in runs:
        path = out / f"{name}.extxyz"
        begin = time.perf_counter()
        if not path.exists():
            ase.io.write(path, reference_md(start, run_temperature, count, every, seed, equilibrate))
            record_timing(out, timings, f"reference_md_{name}_s", time.perf_counter() - begin)
        sets[name] = ase.io.read(path, index=":")
        print(f"{name}: {len(sets[name])} GFN2-xTB frames at {run_temperature:.0f} K", flush=True)
    return sets


def evaluate(checkpoint: Path, frames: list[Atoms]) -> tuple[dict, object]:
    """Test errors (meV/atom, meV/Å) and calibration figures of a checkpoint with an uncertainty estimate."""
    report = calibration_report(SciMLCalculator.from_checkpoint(checkpoint, dtype="float64"), frames)
    atoms = len(frames[0])
    figures = dict(report.figures)
    figures["force_mae_mev_per_a"] = 1e3 * float(np.mean(np.abs(report.component_error)))
    figures["energy_mae_mev_per_atom"] = 1e3 * float(np.mean(np.abs(report.energy_error))) / atoms
    return figures, report


def bond_set(atoms: Atoms) -> set[tuple[int, int]]:
    """The covalent bonds of ``atoms`` as the loop's exploration sees them (1.2 x the natural radii, no
    neighbour-list skin: a skin of 0.3 Å would count 1-3 pairs near the cutoff as bonds that come and go)."""
    return {(int(i), int(j)) for i, j in covalent_bonds(atoms)}


def long_run(checkpoint: Path, start: Atoms, temperature: float, picoseconds: float, threshold: float) -> dict:
    """ML Langevin MD at ``temperature`` (0.5 fs, the loop's thermostat): largest per-atom force uncertainty, and
    its running maximum every 5 ps, steps above ``threshold``, bonds of the start kept (checked every 100 steps),
    milliseconds per step."""
    calculator = SciMLCalculator.from_checkpoint(checkpoint, uncertainty=True)
    atoms = start.copy()
    atoms.calc = calculator
    initial_velocities(atoms, temperature, 7)
    atoms.set_constraint(FixCom())
    dynamics = Langevin(atoms, 0.5 * units.fs, temperature_K=temperature, friction=0.01 / units.fs, fixcm=False,
                        rng=np.random.default_rng(8))  # fmt: skip
    bonds, steps = bond_set(start), round(picoseconds * 2000)
    largest, above, running, broken_at, begin = 0.0, 0, [], None, time.perf_counter()
    for step in range(1, steps + 1):
        dynamics.run(1)
        value = float(np.max(calculator.results["forces_uncertainty"]))
        largest, above = max(largest, value), above + (value > threshold)
        if broken_at is None and step % 100 == 0 and bond_set(atoms) != bonds:
            broken_at = step
        if step % 10_000 == 0 or step == steps:
            running.append([step / 2000, largest])
    seconds = time.perf_counter() - begin
    return {"ps": picoseconds, "steps": steps, "max_uncertainty": largest, "ratio_to_threshold": largest / threshold,
            "running_max": running, "steps_above_threshold": above, "bonds_intact": broken_at is None,
            "bonds_changed_at_step": broken_at, "ms_per_step": 1e3 * seconds / max(steps, 1)}  # fmt: skip


def cached_long_run(out: Path, checkpoint: Path, start: Atoms, temperature: float, picoseconds: float,
                    threshold: float) -> dict:  # fmt: skip
    """:func:`long_run`, read back from ``<out>/long_run.json`` when it ran with this checkpoint (its SHA-256) and
    these settings (an hour of MD that a rerun changing only the passive models need not repeat); the result
    then carries ``read_back``: when and at which commit it was measured."""
    key = {"checkpoint_sha256": hashlib.sha256(checkpoint.read_bytes()).hexdigest(), "temperature": temperature,
           "ps": picoseconds, "threshold": threshold}  # fmt: skip
    cache = out / "long_run.json"
    if cache.exists() and json.loads(cache.read_text())["key"] == key:
        stored = json.loads(cache.read_text())
        print(f"long run read back from {cache} ({stored['measured']})", flush=True)
        return stored["result"] | {"read_back": stored["measured"]}
    run = run_provenance()
    result = long_run(checkpoint, start, temperature, picoseconds, threshold)
    measured = f"{run['date']} at commit {run['commit'][:12]}"
    cache.write_text(json.dumps({"key": key, "measured": measured, "result": result}, indent=1))
    return result


def single_model_cost(checkpoint: Path, atoms: Atoms) -> dict:
    """Seconds per energy + forces call of the LLPR model with its uncertainty and of the bare model."""
    wrapped = SciMLCalculator.from_checkpoint(checkpoint, uncertainty=True)
    bare = SciMLCalculator(load_model(checkpoint).model)
    with_uncertainty, without = (calculator_seconds(c, atoms.copy(), 50) for c in (wrapped, bare))
    return {"ms_with_uncertainty": 1e3 * with_uncertainty, "ms_without": 1e3 * without,
            "overhead": with_uncertainty / without - 1}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--smiles", default=SMILES)
    add("--temperature", type=float, default=500.0, help="K: the loop's target and the passive MD's")
    add("--passive-frames", type=int, default=1500)
    add("--passive-every", type=int, default=20, help="MD steps between passive frames")
    add("--test-frames", type=int, default=200, help="frames per test temperature")
    add("--passive-epochs", type=int, default=20, help="epochs of the single passive model")
    add("--committee-epochs", type=int, default=40, help="epochs of the passive committee (4 members)")
    add("--md-ps", type=float, default=100.0, help="ps of the final ML Langevin run")
    add("--out", default=str(ROOT / "runs" / "bench_active"))
    add("--results", default=str(RESULTS))
    add("--smoke", action="store_true", help="tiny budgets: checks the path in minutes")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    learning = LearningSettings(ExplorationSettings(temperature=args.temperature), TrainingSettings(),
                                source=f"smiles:{args.smiles}")  # fmt: skip
    if args.smoke:
        args.passive_frames, args.passive_every, args.test_frames = 40, 5, 20
        args.passive_epochs = args.committee_epochs = 1
        args.md_ps = 0.05
        learning.exploration = ExplorationSettings(temperature=args.temperature, ramp_ps=0.05, hold_ps=0.05)
        learning.training = TrainingSettings(epochs=2, epochs_per_round=1, final_epochs=1)
        learning.rounds, learning.seed_frames, learning.confirm_hold_ps = 2, 8, 0.05
    start = molecule_from_smiles(args.smiles, 0)
    hot = args.temperature + 100

    timings = stage_timings(out, Path(args.results))
    sets = reference_sets(out, start, args.temperature, args.passive_frames, args.passive_every, args.test_frames,
                          2000 if not args.smoke else 20, timings)  # fmt: skip

    passive = {}
    baselines = {"single": TrainingSettings(uncertainty="last-layer", epochs=args.passive_epochs),
                 "committee": TrainingSettings(uncertainty="committee", epochs=args.committee_epochs)}  # fmt: skip
    for kind, settings in baselines.items():
        begin = time.perf_counter()
        checkpoint = out / f"passive_{kind}" / "model.ckpt"
        if not checkpoint.exists():
            train_round(out / "passive.extxyz", checkpoint.parent, settings, 0)
            record_timing(out, timings, f"passive_{kind}_training_s", time.perf_counter() - begin)
        row = {"training_s": timings.get(f"passive_{kind}_training_s"), "epochs": settings.epochs}
        for name in ("test", "test_hot"):
            row[name], report = evaluate(checkpoint, sets[name])
            if name == "test_hot":
                report.plot(out / f"calibration_{kind}.png", f"passive {kind}, trained at {args.temperature:.0f} K, "
                            f"tested at {hot:.0f} K")  # fmt: skip
                row["reliability"] = [r.tolist() for r in report.reliability()]
        passive[kind] = row
        print(f"passive {kind}: {row['test']['force_mae_mev_per_a']:.1f} meV/Å at {args.temperature:.0f} K", flush=True)
    cost = single_model_cost(out / "passive_single" / "model.ckpt", start)

    loop = ActiveLearning(out / "active", gfn2_xtb(), learning)
    spent = sum(loop.state.seconds.values())
    final = loop.run(start)
    if sum(loop.state.seconds.values()) > spent:  # it did work (the phases' seconds grew): add this run's part
        wall = sum(loop.state.seconds.values()) - spent
        record_timing(out, timings, "active_wall_s", timings.get("active_wall_s", 0.0) + wall)
    active_seconds = timings.get("active_wall_s", float("nan"))
    rounds = []
    state = loop.summary()
    labelled_by_round = loop.store.rounds()
    for record in state["rounds"]:
        round = record["round"]
        errors, _ = evaluate(out / "active" / f"round{round}" / "model.ckpt", sets["test"])
        calls = sum(count for r, count in labelled_by_round.items() if r < round)  # what this model trained on
        rounds.append({"round": round, "oracle_calls_trained_on": calls, "force_mae_mev_per_a":
                       errors["force_mae_mev_per_a"], "max_uncertainty": record.get("max_uncertainty")})  # fmt: skip
    final_errors = {name: evaluate(final, sets[name])[0] for name in ("test", "test_hot")}
    confirmations = state["confirmations"] or [{"model": str(final), "max_uncertainty": None}]
    for k, record in enumerate(confirmations, start=1):  # the final model and its retrainings, each confirmed
        round = len(state["rounds"]) + k  # the round number its confirmation labels carry
        errors, _ = evaluate(Path(record["model"]), sets["test"])
        rounds.append({"round": "final" + (f" + {k - 1} retraining" if k > 1 else ""),
                       "oracle_calls_trained_on": sum(c for r, c in labelled_by_round.items() if r < round),
                       "force_mae_mev_per_a": errors["force_mae_mev_per_a"],
                       "max_uncertainty": record.get("max_uncertainty")})  # fmt: skip
    target = passive["single"]["test"]["force_mae_mev_per_a"]
    reached = next((r for r in rounds if r["force_mae_mev_per_a"] <= target), None)
    calls_needed = reached["oracle_calls_trained_on"] if reached else math.nan
    md = {"ps": 0.0, "steps": 0, "max_uncertainty": math.nan, "ratio_to_threshold": math.nan, "bonds_intact": None,
          "bonds_changed_at_step": None, "ms_per_step": math.nan}  # fmt: skip
    for stage in ("without the long run", "complete"):
        if stage == "complete":
            md = cached_long_run(out, final, start, args.temperature, args.md_ps, learning.exploration.threshold)
        print(f"writing the results {stage}", flush=True)
        write(args, start, timings, passive, cost, rounds, final_errors, state, active_seconds, calls_needed, md)


def write(args, start, timings, passive, cost, rounds, final_errors, state, active_seconds, calls_needed, md) -> None:
    hot = args.temperature + 100
    data = {"smiles": args.smiles, "atoms": len(start), "temperature": args.temperature, "hot": hot,
            "reference": {k: v for k, v in timings.items() if k.startswith("reference")}, "passive": passive,
            "single_model_cost": cost,
            "active": {"rounds": rounds, "final": final_errors, "summary": state, "wall_s": active_seconds,
                       "oracle_calls": state["oracle_calls"], "calls_to_reach_passive": calls_needed},
            "md": md}  # fmt: skip
    mae_ratio = max(final_errors[n]["force_mae_mev_per_a"] / passive["single"][n]["force_mae_mev_per_a"]
                    for n in ("test", "test_hot"))  # fmt: skip
    result = {
        "oracle_calls_ratio_vs_passive": calls_needed / args.passive_frames,
        "force_mae_ratio_vs_passive": mae_ratio,
        "spearman_committee": passive["committee"]["test_hot"]["spearman_force"],
        "spearman_single": passive["single"]["test_hot"]["spearman_force"],
        "coverage_2sigma": passive["single"]["test_hot"]["coverage_2sigma_force"],
        f"md_{md['ps']:g}ps_max_uncertainty_ratio": md["ratio_to_threshold"],
    }
    title = f"On-the-fly learning of {args.smiles} with GFN2-xTB" + (" (smoke run)" if args.smoke else "")
    write_results("active", title, sections(args, data), data, result, args.results, print_result=bool(md["steps"]))
    for kind in ("single", "committee"):
        figure = Path(args.out).resolve() / f"calibration_{kind}.png"
        (Path(args.results) / f"active_calibration_{kind}.png").write_bytes(figure.read_bytes())


def sections(args, data: dict) -> list[str]:
    T, hot = f"{data['temperature']:.0f} K", f"{data['hot']:.0f} K"
    calibration_rows = []
    for kind, row in data["passive"].items():
        for name, label in (("test", T), ("test_hot", hot)):
            f = row[name]
            calibration_rows.append([f"{kind} ({row['epochs']} epochs)", label, f"{f['force_mae_mev_per_a']:.1f}",
                                     f"{1e3 * f['force_rmse']:.1f}", f"{1e3 * f['force_uncertainty_rms']:.1f}",
                                     spearman_text(f), f"{100 * f['coverage_2sigma_force']:.1f}",
                                     f"{100 * f['coverage_2sigma_energy']:.1f}"])  # fmt: skip
    active = data["active"]
    round_rows = [[r["round"], r["oracle_calls_trained_on"], f"{r['force_mae_mev_per_a']:.1f}",
                   f"{r['max_uncertainty']:.3f}" if r["max_uncertainty"] is not None else "-"]
                  for r in active["rounds"]]  # fmt: skip
    seconds, loop = active["summary"]["seconds"], active["summary"]["settings"]
    final = active["final"]
    comparison = [
        ["passive (single model)", args.passive_frames,
         f"{data['passive']['single']['test']['force_mae_mev_per_a']:.1f}",
         f"{data['passive']['single']['test_hot']['force_mae_mev_per_a']:.1f}"],
        ["active learning", active["oracle_calls"], f"{final['test']['force_mae_mev_per_a']:.1f}",
         f"{final['test_hot']['force_mae_mev_per_a']:.1f}"],
    ]  # fmt: skip
    md, cost = data["md"], data["single_model_cost"]
    return [
        f"Molecule `{data['smiles']}` ({data['atoms']} atoms). Reference: GFN2-xTB Langevin MD (0.5 fs, friction "
        f"0.01/fs); passive set {args.passive_frames} frames every {args.passive_every} steps at {T}; test sets "
        f"{args.test_frames} frames each from independent runs at {T} and {hot}.",
        "Calibration of the passive models (trained at " + T + ", " + hot + " held out):",
        markdown_table(
            [
                "model",
                "test",
                "F MAE meV/Å",
                "F RMSE meV/Å",
                "RMS σ_F meV/Å",
                "Spearman (95 % CI)",
                "F within 2σ %",
                "E within 2σ %",
            ],
            calibration_rows,
        ),  # fmt: skip
        f"Cost of the single-model (LLPR) estimate: {cost['ms_with_uncertainty']:.2f} ms per call against "
        f"{cost['ms_without']:.2f} ms without (+{100 * cost['overhead']:.0f} %).",
        f"Active learning ({active['summary']['settings']['rounds']} rounds at most, threshold "
        f"{active['summary']['settings']['exploration']['threshold']} eV/Å, converged: "
        f"{active['summary']['converged']}): test force MAE at {T} of each round's model",
        markdown_table(["round", "oracle calls trained on", "F MAE meV/Å", "largest σ_F in its MD eV/Å"], round_rows),
        f"The final rows are the final model ({loop['training']['final_epochs']} epochs on everything) and its "
        f"retrainings, each with its confirmation run ({loop['confirm_hold_ps']:g} ps at {T} after the ramp); "
        f"confirmed: {active['summary'].get('confirmed')}.",
        markdown_table(["training data", "oracle calls", f"F MAE {T} meV/Å", f"F MAE {hot} meV/Å"], comparison),
        f"Wall time of the loop {active['wall_s'] / 60:.1f} min: oracle {seconds['oracle']:.0f} s, training "
        f"{seconds['training']:.0f} s, MD {seconds['md']:.0f} s. Oracle calls to reach the passive MAE: "
        f"{active['calls_to_reach_passive']}.",
        long_run_text(md, T),
    ]


def spearman_text(figures: dict) -> str:
    """The per-frame Spearman with its bootstrap interval over the test frames, where the report has one."""
    text = f"{figures['spearman_force']:.2f}"
    if "spearman_force_interval" in figures:
        text += " ({:.2f}-{:.2f})".format(*figures["spearman_force_interval"])
    return text


def long_run_text(md: dict, temperature: str) -> str:
    """The long run's sentence: what :func:`long_run` measured (``steps_above_threshold`` and ``running_max``
    where the run recorded them), and when, where it was read back."""
    text = (f"Final model, {md['ps']:g} ps ML Langevin MD at {temperature}: largest per-atom force uncertainty "
            f"{md['max_uncertainty']:.3f} eV/Å ({md['ratio_to_threshold']:.2f} x the threshold)")  # fmt: skip
    if "steps_above_threshold" in md:
        text += f", steps above the threshold {md['steps_above_threshold']} of {md['steps']}"
    text += f", bonds intact: {md['bonds_intact']}, {md['ms_per_step']:.1f} ms/step"
    if "read_back" in md:
        text += f" (read back: measured {md['read_back']} with this checkpoint)"
    if md.get("running_max"):
        text += ". Running maximum (ps, eV/Å): " + ", ".join(f"{ps:g} {value:.3f}" for ps, value in md["running_max"])
    return text + "."


if __name__ == "__main__":
    main()
