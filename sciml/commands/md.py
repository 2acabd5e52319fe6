"""``sciml md``: molecular dynamics of a structure with a trained potential (ASE engine).

    sciml md --checkpoint runs/quickstart/.../last.ckpt --structure data/ethanol_gfn2.extxyz \\
        --ensemble nve --timestep 0.5 --steps 2000 --temperature 300

Writes the trajectory (``--trajectory``, default ``md.traj`` in the checkpoint's run directory) and ASE's
MD log next to it (``.log``) every ``--log-every`` steps; shows a progress bar with steps/s, ns/day and the
temperature (and, for a checkpoint with an uncertainty estimate, the largest per-atom force uncertainty, which
``--uncertainty-threshold`` flags and ``--stop-when-uncertain`` stops at); prints speed and, for NVE, the
energy drift at the end. Ctrl-C stops cleanly (frames kept);
``--restart`` continues from the trajectory's last frame. See :mod:`sciml.calculators.md`.

``--replicas R`` advances R independent replicas together with one batched model call per step (velocity
Verlet for ``nve``, BAOAB Langevin for ``nvt-langevin``), writing ``replica_000.extxyz``, ... into the folder
``--trajectory`` (default ``replicas/`` in the checkpoint's run directory); ``--restart`` resumes them from
their last common frame. See :mod:`sciml.calculators.replica_md`.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from tqdm import tqdm

from sciml.calculators.md import ENSEMBLES, MDSettings, energy_drift, run_md
from sciml.commands.potential_options import add_potential_arguments, structure_and_calculator


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml md", description=__doc__.split("\n\n")[0])
    add_potential_arguments(parser, "any file ASE reads; --index picks the frame")
    add = parser.add_argument
    add("--ensemble", default="nve", choices=ENSEMBLES)
    add("--temperature", type=float, default=300.0, help="K: initial velocities, thermostat")
    add("--pressure", type=float, default=1.01325, help="bar (npt)")
    add("--friction", type=float, default=0.01, help="1/fs (nvt-langevin)")
    add("--timestep", type=float, default=0.5, help="fs")
    add("--steps", type=int, default=1000, help="steps to run (after a restart: further steps)")
    add("--trajectory", help="ASE .traj output (default: md.traj in the checkpoint's run directory)")
    add("--log", help="MD log (default: the trajectory with suffix .log)")
    add("--log-every", type=int, default=10, help="steps between trajectory frames, log lines, bar updates")
    add("--restart", action="store_true", help="continue from the trajectory's last frame, appending")
    add("--overwrite", action="store_true", help="replace an existing trajectory and log")
    add("--seed", type=int, default=0, help="initial velocities and Langevin noise")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--uncertainty-threshold", type=float, help="eV/Å: flag steps whose largest per-atom force uncertainty "
        "exceeds it (needs a checkpoint with an uncertainty estimate)")  # fmt: skip
    add("--stop-when-uncertain", action="store_true", help="stop at the first step above --uncertainty-threshold")
    add("--replicas", type=int, default=1, help="independent replicas advanced together, one model call per step "
        "(nve: velocity Verlet, nvt-langevin: BAOAB); --trajectory is then a folder of replica_*.extxyz")  # fmt: skip
    return parser


def main(args: list[str]) -> dict:
    options = parser().parse_args(args)
    if options.replicas > 1:
        return replicas_main(options)
    settings = MDSettings(options.ensemble, options.timestep, options.steps, options.temperature, options.seed,
                          options.log_every, options.friction, options.pressure,
                          uncertainty_threshold=options.uncertainty_threshold,
                          stop_when_uncertain=options.stop_when_uncertain)  # fmt: skip
    options.uncertainty = options.uncertainty or options.uncertainty_threshold is not None
    trajectory = Path(options.trajectory or Path(options.checkpoint).resolve().parent.parent / "md.traj")
    log = Path(options.log) if options.log else trajectory.with_suffix(".log")
    atoms, calculator = structure_and_calculator(options)
    bar = tqdm(total=options.steps, unit="step", disable=options.no_progress, dynamic_ncols=True)
    first = {}

    def progress(state: dict) -> None:
        first.setdefault("step", state["step"])
        bar.n = state["step"] - first["step"]
        ns_per_day = state["steps_per_s"] * options.timestep * 86400 / 1e6
        uncertainty = f", max σF {state['max_force_uncertainty']:.3f} eV/Å" if "max_force_uncertainty" in state else ""
        bar.set_postfix_str(
            f"{state['steps_per_s']:.1f} steps/s, {ns_per_day:.3f} ns/day, T {state['temperature']:.0f} K{uncertainty}"
        )

    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: frames written so far are kept
    try:
        result = run_md(atoms, calculator, settings, trajectory, log, options.overwrite, options.restart, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bar.close()
    last = result["first_step"] + result["steps_run"]
    print(f"{len(atoms)} atoms, {result['steps_run']} steps of {options.timestep} fs ({options.ensemble}, "
          f"{options.dtype}): {result['steps_per_second']:.1f} steps/s, {result['ns_per_day']:.3f} ns/day, "
          f"{calculator.rebuilds} neighbour-list builds -> {trajectory} (step {last})")  # fmt: skip
    if calculator.reports_uncertainty:
        threshold, flagged = settings.uncertainty_threshold, result["uncertain_steps"]
        above = f"; {len(flagged)} steps above {threshold} eV/Å" if threshold else ""
        print(f"largest per-atom force uncertainty {result['max_force_uncertainty']:.4f} eV/Å{above}")
    if result["stopped"] == "uncertain":
        print(f"stopped at step {last}: the force uncertainty exceeded {options.uncertainty_threshold} eV/Å")
    elif result["stopped"] != "finished":
        print(f"stopped early at step {last}; continue with --restart")
    if options.ensemble == "nve" and len(result["times_ps"]) > 2:
        slope, excursion = energy_drift(result["times_ps"], result["total_energy"], len(atoms))
        result["drift"], result["excursion"] = slope, excursion
        print(f"energy drift {slope:.3e} eV/atom/ps, largest excursion {excursion:.3e} eV/atom")
    return result


def replicas_main(options: argparse.Namespace) -> dict:
    """``--replicas R``: the batched torch driver (:mod:`sciml.calculators.replica_md`)."""
    import ase.io

    from sciml.calculators import load_model
    from sciml.calculators.replica_md import ReplicaSettings, run_replicas
    from sciml.calculators.replicas import BatchedPotential

    if options.ensemble == "npt":
        raise SystemExit("sciml md: --replicas runs nve or nvt-langevin, not npt")
    for flag in ("uncertainty_threshold", "compile", "static_shapes"):
        if getattr(options, flag):
            raise SystemExit(f"sciml md: --{flag.replace('_', '-')} is not available with --replicas")
    directory = Path(options.trajectory or Path(options.checkpoint).resolve().parent.parent / "replicas")
    if options.overwrite:
        for path in directory.glob("replica_*.extxyz"):
            path.unlink()
    atoms = ase.io.read(options.structure, index=options.index)
    potential = BatchedPotential(load_model(options.checkpoint, options.device), atoms.numbers, atoms.cell[:],
                                 atoms.pbc, options.skin, options.device, options.dtype)  # fmt: skip
    settings = ReplicaSettings("verlet" if options.ensemble == "nve" else "langevin", options.timestep, options.steps,
                               options.temperature, options.friction, options.log_every, options.seed)  # fmt: skip
    bar = tqdm(total=options.steps, unit="step", disable=options.no_progress, dynamic_ncols=True)
    first = {}

    def progress(state: dict) -> None:
        first.setdefault("step", state["step"])
        bar.n = state["step"] - first["step"]
        bar.set_postfix_str(f"{state['replica_steps_per_s']:.1f} replica-steps/s, "
                            f"mean T {state['temperature'].mean():.0f} K")  # fmt: skip

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_replicas(potential, atoms, options.replicas, settings, directory, options.restart, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bar.close()
    print(f"{options.replicas} replicas of {len(atoms)} atoms, {result['steps']} steps of {options.timestep} fs "
          f"({settings.integrator}, {options.dtype}): {result['replica_steps_per_s']:.1f} replica-steps/s, "
          f"{potential.rebuilds} neighbour-list builds -> {directory} (step {result['state'].step})")  # fmt: skip
    return result


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
