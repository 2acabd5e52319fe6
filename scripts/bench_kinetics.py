"""Kinetics with the trained potential against the reference method's own: ethanol's hydroxyl rotor, GFN2-xTB.

Why this molecule: under GFN2-xTB the OH group of ethanol turns between its trans and gauche wells about
once every 3.5 ps at 300 K (446 transitions in 64 x 24 ps), so several hundred transitions take 1.5 ns of
reference MD (half an hour of tblite on 2 cores); n-butane's C-C-C-C torsion (2.6 kcal/mol under GFN2-xTB)
turned 8 times in 80 ps at 400 K and would need nanoseconds. The slow coordinate is seen by the distance
encoder on the heavy atoms and the hydroxyl H (``--atoms heavy+polar-h``); the methyl rotor (hydrogens that are
left out) is not part of the question.
Distances do not tell gauche+ from gauche- (mirror images), so the model has two states, trans and gauche.

1. Reference: R replicas of BAOAB Langevin MD (``sciml.pipelines.sample_replicas``) with GFN2-xTB through
   tblite (``CalculatorPotential``, 2 worker processes): the same integrator, thermostat and files as the ML run.
2. ``sciml pipeline --dataset <frames> --rounds 0 ...`` (the one command, here trained on frames of the
   reference run's first replicas instead of learning on the fly): an E2Former (``small``, with LLPR), the same
   sampling with it (batched replicas) and the kinetics report; the potential's errors on the frames of the
   other reference replicas. Half of the training frames are spread over the rotor's dihedral
   (``--spread-fraction``; the rest evenly in time): at 300 K the frames near the gauche -> trans barrier, which
   set the rate, are about 1 % of the run and the trans well holds 6 %. Trained on frames taken evenly in time,
   the same potential put trans 72.6 meV above gauche (GFN2-xTB: 66.4), and in the shorter run before it
   turned the rotor twice as often as the reference (``docs/benchmarks/earlier.md``).
   Both methods' relaxed rotor profiles (barrier, trans - gauche energy) show the potential's error there.
3. The same kinetics analysis of both (distance encoder, lag, bootstrap over trajectories): slowest implied
   timescale of each; populations and MFPTs of both in the same states, those found on the reference's data
   (``molecular_kinetics(..., compare=...)``), with 95 % intervals.
4. Replica speed: replica-steps/s at R = 32 against one ASE Langevin step through ``SciMLCalculator``.

Results with provenance: ``benchmarks/results/kinetics.{json,md}`` and the two reports in ``--work``.

    python scripts/bench_kinetics.py [--replicas 64 --production-ps 24 --work runs/bench_kinetics]   # about 100 min
    python scripts/bench_kinetics.py --smoke --results /tmp/kinetics

Last line: RESULT its_ratio_vs_reference=<x> its_ci_overlap=<0|1> population_max_abs_error=<x>
replica_speedup_r32=<x> pipeline_minutes=<x>
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ase.io
import numpy as np
from _bench_utils import verlet_seconds
from _results import RESULTS, markdown_table, write_results
from _rotor import dihedrals, rotor_populations, rotor_profile, spread_over_rotor

from sciml.active import gfn2_xtb
from sciml.active.structures import molecule_from_smiles
from sciml.calculators import SciMLCalculator, load_model
from sciml.calculators.calculator_potential import CalculatorPotential
from sciml.calculators.replicas import BatchedPotential
from sciml.commands import pipeline
from sciml.md import MDSettings, run_replicas
from sciml.pipelines import SamplingSettings, sample_replicas
from sciml.pipelines.kinetics import Stopwatch
from sciml.training.kinetics import molecular_kinetics

SMILES = "CCO"


def replica_trajectories(folder: Path) -> list[list]:
    """Every frame of each ``replica_*.extxyz`` in ``folder``, one list per replica, in replica order."""
    return [ase.io.read(path, index=":") for path in sorted(folder.glob("replica_*.extxyz"))]


def training_frames(production: Path, replicas: int, count: int, spread: float, out: Path) -> tuple[Path, list]:
    """``count`` frames of the first ``replicas`` reference trajectories -> ``out``, a fraction ``spread`` of them
    spread over the rotor's dihedral (``_rotor.spread_over_rotor``), the rest evenly in time; the frames of the
    others are the test set."""
    frames = replica_trajectories(production)
    train = [frame for trajectory in frames[:replicas] for frame in trajectory]
    picked = [train[i] for i in spread_over_rotor(train, count, spread)]
    ase.io.write(out, picked, format="extxyz")
    test = [frame for trajectory in frames[replicas:] for frame in trajectory[:: max(1, len(trajectory) // 50)]]
    return out, test


def test_errors(model: Path, frames: list) -> dict:
    """Energy (meV/atom) and force (meV/Å) MAE of the potential on reference frames."""
    calculator = SciMLCalculator.from_checkpoint(model)
    energy, forces = [], []
    for frame in frames:
        reference_energy, reference_forces = frame.get_potential_energy(), frame.get_forces()
        copy = frame.copy()
        copy.calc = calculator
        energy.append(copy.get_potential_energy() - reference_energy)
        forces.append(np.abs(copy.get_forces() - reference_forces).mean())
    offset = np.mean(energy)  # the energy zero is arbitrary between methods only by a constant: keep it
    return {"energy_mae_mev_per_atom": 1e3 * np.mean(np.abs(energy)) / len(frames[0]),
            "energy_mae_after_offset_mev_per_atom": 1e3 * np.mean(np.abs(np.array(energy) - offset)) / len(frames[0]),
            "force_mae_mev_per_a": 1e3 * float(np.mean(forces)), "frames": len(frames)}  # fmt: skip


def state_dihedrals(report: Path, count: int) -> list[float]:
    """Mean |C-C-O-H| dihedral (degrees) of each state's representative structures (trans: ~180, gauche: ~60)."""
    values = []
    for j in range(count):
        values.append(float(np.mean(np.abs(dihedrals(ase.io.read(report / f"state_{j}.extxyz", index=":"))))))
    return values


def replica_rate(model: Path, start, replicas: int, steps: int) -> float:
    """Replica-steps per second of the trained potential's Langevin replicas (after 3 warm-up steps)."""
    potential = BatchedPotential(load_model(model), start.numbers)
    run_replicas(potential, start, replicas, MDSettings("nvt-langevin", steps=3, interval=10_000))
    timed = run_replicas(potential, start, replicas, MDSettings("nvt-langevin", steps=steps, interval=10_000))
    return timed["replica_steps_per_s"]


def slowest(numbers: dict) -> dict:
    """The slowest implied timescale at the model's lag with its interval (ps)."""
    timescales = numbers["timescales"]
    index = timescales["lags"].index(numbers["lag"])
    return {key: timescales[key][index][0] for key in ("estimate", "lower", "upper")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--production-ps", type=float, default=24.0, help="ps per replica after equilibration")
    parser.add_argument("--equilibration-ps", type=float, default=3.0)
    parser.add_argument("--temperature", type=float, default=300.0)
    parser.add_argument("--training-replicas", type=int, default=48, help="reference replicas the frames come from")
    parser.add_argument("--training-frames", type=int, default=1500)
    parser.add_argument(
        "--spread-fraction",
        type=float,
        default=0.5,
        help="share of the training frames spread over the rotor's dihedral (the rest even in time)",
    )
    parser.add_argument("--epochs", type=int, default=60, help="epochs of the potential")
    parser.add_argument("--lag", type=int, default=20, help="frames of 10 fs")
    parser.add_argument("--koopman-epochs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="tblite processes of the reference run")
    parser.add_argument("--work", default="/tmp/bench_kinetics", help="runs and reports (reused when present)")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--smoke", action="store_true", help="4 replicas, 0.8 ps, 2 epochs: checks the path")
    args = parser.parse_args()
    if args.smoke:
        args.replicas, args.production_ps, args.equilibration_ps, args.training_replicas = 4, 0.8, 0.05, 3
        args.training_frames, args.epochs, args.lag, args.koopman_epochs = 40, 2, 2, 2
    work = Path(args.work)
    start = molecule_from_smiles(SMILES, 0)
    sampling = SamplingSettings(args.replicas, args.production_ps, args.equilibration_ps, args.temperature)
    kinetics = {"lag": args.lag, "n_states": 2, "atoms": "heavy+polar-h", "k": 4, "epochs": args.koopman_epochs,
                "samples": 20 if args.smoke else 200, "microstates": 10 if args.smoke else 50}  # fmt: skip

    watch = Stopwatch(work / "reference" / "seconds.json")  # summed over resumed runs
    with CalculatorPotential(gfn2_xtb().factory, start, workers=args.workers) as reference_potential:
        reference_production = watch.time("sample", sample_replicas, reference_potential, start, sampling,
                                          work / "reference")  # fmt: skip
    reference_seconds = watch.record["seconds"]["sample"]
    print(f"reference: {reference_seconds / 60:.1f} min of GFN2-xTB MD", flush=True)

    frames_path, test = training_frames(reference_production, args.training_replicas, args.training_frames,
                                        args.spread_fraction, work / "training_frames.extxyz")  # fmt: skip
    command = ["--dataset", str(frames_path), "--rounds", "0", "--preset", "small", "--epochs", str(args.epochs),
               "--final-epochs", str(args.epochs), "--temperature", str(args.temperature), "--replicas",
               str(args.replicas), "--production-ps", str(args.production_ps), "--equilibration-ps",
               str(args.equilibration_ps), "--atoms", "heavy+polar-h", "--lag", str(args.lag), "--koopman-epochs",
               str(args.koopman_epochs), "--samples", str(kinetics["samples"]), "--microstates",
               str(kinetics["microstates"]), "--output", str(work / "ml"), "--seed", "1",
               "--no-progress"]  # fmt: skip
    print("sciml pipeline " + " ".join(command), flush=True)
    ml = pipeline.main(command)
    errors = test_errors(Path(ml["model"]), test)
    model_kinetics = ml["report"]
    # the states are defined once, on the reference's data; the potential's trajectories are measured in them
    begin = time.perf_counter()
    reference = molecular_kinetics(reference_production, work / "reference" / "kinetics", compare=ml["production"],
                                   **kinetics)  # fmt: skip
    reference_kinetics_seconds = time.perf_counter() - begin
    in_reference_states = reference["states"]["compared"]

    ase_seconds = verlet_seconds(SciMLCalculator.from_checkpoint(ml["model"]), start, 10 if args.smoke else 200)
    rate_r32 = replica_rate(Path(ml["model"]), start, 32, 5 if args.smoke else 100)
    speedup = rate_r32 * ase_seconds

    reference_dihedrals = state_dihedrals(work / "reference" / "kinetics", 2)
    model_dihedrals = state_dihedrals(work / "ml" / "kinetics", 2)
    rows, populations = [], []
    for j in range(2):
        ref_pop = [reference["states"]["populations"][key][j] for key in ("estimate", "lower", "upper")]
        ml_pop = [in_reference_states["populations"][key][j] for key in ("estimate", "lower", "upper")]
        populations.append(abs(ref_pop[0] - ml_pop[0]))
        rows.append([f"state {j} (|C-C-O-H| {reference_dihedrals[j]:.0f}°)", "population", _interval(ref_pop, 3),
                     _interval(ml_pop, 3)])  # fmt: skip
    for a, b in ((0, 1), (1, 0)):
        ref_mfpt = [reference["states"]["mfpt"][key][a][b] for key in ("estimate", "lower", "upper")]
        ml_mfpt = [in_reference_states["mfpt"][key][a][b] for key in ("estimate", "lower", "upper")]
        rows.append([f"MFPT {a} -> {b}", "ps", _interval(ref_mfpt, 3), _interval(ml_mfpt, 3)])
    ref_its, ml_its = slowest(reference), slowest(model_kinetics)
    rows.insert(0, [f"slowest implied timescale, lag {args.lag * 10} fs", "ps", _interval(list(ref_its.values()), 3),
                    _interval(list(ml_its.values()), 3)])  # fmt: skip
    ref_rotor = rotor_populations(replica_trajectories(reference_production))
    ml_rotor = rotor_populations(replica_trajectories(Path(ml["production"])))
    ref_profile = rotor_profile(start, gfn2_xtb().factory())
    ml_profile = rotor_profile(start, SciMLCalculator.from_checkpoint(ml["model"]))
    rows.append(["trans fraction by the dihedral (|C-C-O-H| > 120°)", "", f"{ref_rotor['trans_fraction']:.3f}",
                 f"{ml_rotor['trans_fraction']:.3f}"])  # fmt: skip
    rows.append(["trans <-> gauche transitions counted", "", ref_rotor["transitions"], ml_rotor["transitions"]])
    for key, label in (
        ("barrier_gauche_to_trans_mev", "gauche -> trans barrier (relaxed scan)"),
        ("trans_minus_gauche_mev", "trans - gauche energy (relaxed scan)"),
    ):
        rows.append([label, "meV", f"{ref_profile[key]:.1f}", f"{ml_profile[key]:.1f}"])
    rows.append(["populations of PCCA+ on each method's own data", "", _own_split(reference, reference_dihedrals),
                 _own_split(model_kinetics, model_dihedrals)])  # fmt: skip
    overlap = int(ml_its["lower"] <= ref_its["upper"] and ref_its["lower"] <= ml_its["upper"])
    ratio = ml_its["estimate"] / ref_its["estimate"]
    inside = int(ref_its["lower"] <= ml_its["estimate"] <= ref_its["upper"])
    pipeline_minutes = sum(ml["seconds"].values()) / 60
    stages = [["reference GFN2-xTB MD", f"{reference_seconds / 60:.1f}"],
              ["reference kinetics analysis", f"{reference_kinetics_seconds / 60:.1f}"],
              *[[f"pipeline: {stage}", f"{seconds / 60:.1f}"] for stage, seconds in ml["seconds"].items()]]  # fmt: skip
    total_ps = args.replicas * args.production_ps
    sections = [
        f"Ethanol ({SMILES}), {args.replicas} replicas x ({args.equilibration_ps} + {args.production_ps}) ps of BAOAB "
        f"Langevin MD at {args.temperature:g} K (1 fs, friction 1/ps), a frame every 10 fs, the equilibration "
        f"dropped: {total_ps:g} ps per method. Kinetics of both: distance encoder on the heavy atoms and the "
        f"hydroxyl H, k = 4, lag {args.lag} frames, 2 PCCA+ states, 95 % bootstrap over trajectories. The states "
        "are defined once, on the reference's data (its Koopman model, microstates and PCCA+ sets); the potential's "
        "populations and MFPTs are those of its own trajectories in these states (`sciml kinetics --compare`). "
        "Timescales are each method's own.",
        markdown_table(["quantity", "unit", "GFN2-xTB (reference)", "E2Former potential"], rows),
        f"The potential (`small`, {args.epochs} epochs on {args.training_frames} frames of the first "
        f"{args.training_replicas} reference replicas) on {errors['frames']} frames of the other replicas: "
        f"force MAE {errors['force_mae_mev_per_a']:.1f} meV/Å, energy MAE {errors['energy_mae_mev_per_atom']:.2f} "
        f"meV/atom. The model's timescale is {'inside' if inside else 'outside'} the reference's interval.",
        "Wall time (minutes, 2 cores):",
        markdown_table(["stage", "minutes"], stages),
        f"Replica MD of the potential: {ml.get('replica_steps_per_s', float('nan')):.0f} replica-steps/s at R = "
        f"{args.replicas} over the run, {rate_r32:.0f} at R = 32 (100 steps); one ASE velocity-Verlet step through "
        f"SciMLCalculator: {1e3 * ase_seconds:.1f} ms, so R = 32 is {speedup:.1f}x the ASE step rate.",
    ]
    data = {"reference": {"kinetics": reference, "seconds": reference_seconds, "rotor": ref_rotor,
                          "rotor_profile": ref_profile,
                          "kinetics_seconds": reference_kinetics_seconds},
            "model": {"kinetics": model_kinetics, "seconds": ml["seconds"], "rotor": ml_rotor, "errors": errors,
                      "replica_steps_per_s": ml.get("replica_steps_per_s"), "replica_steps_per_s_r32": rate_r32,
                      "ase_step_seconds": ase_seconds, "rotor_profile": ml_profile},
            "in_reference_states": in_reference_states,
            "state_dihedrals": {"reference": reference_dihedrals, "model": model_dihedrals},
            "settings": vars(args)}  # fmt: skip
    result = {"its_ratio_vs_reference": ratio, "its_ci_overlap": overlap, "its_inside_reference_ci": inside,
              "population_max_abs_error": max(populations), "replica_speedup_r32": speedup,
              "pipeline_minutes": pipeline_minutes}  # fmt: skip
    title = "Kinetics of the potential against GFN2-xTB: ethanol's hydroxyl rotor"
    title += " (smoke run)" if args.smoke else ""
    write_results("kinetics", title, sections, data, result, args.results)


def _own_split(numbers: dict, dihedrals: list[float]) -> str:
    """The populations of a report's own PCCA+ states, each with its states' mean rotor dihedral."""
    populations = numbers["states"]["populations"]["estimate"]
    return ", ".join(f"{p:.3f} ({d:.0f}°)" for p, d in zip(populations, dihedrals, strict=True))


def _interval(values: list[float], digits: int) -> str:
    estimate, lower, upper = values
    return f"{estimate:.{digits}g} [{lower:.{digits}g}, {upper:.{digits}g}]"


if __name__ == "__main__":
    main()
