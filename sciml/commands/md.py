"""``sciml md``: molecular dynamics of a structure with a trained potential.

    sciml md --checkpoint runs/quickstart/.../last.ckpt --structure data/ethanol_gfn2.extxyz \\
        --ensemble nve --timestep 0.5 --steps 2000 --temperature 300

Runs on sciml's MD engine (:mod:`sciml.md.engine`: velocity Verlet for ``nve``, BAOAB Langevin for
``nvt-langevin``) for one replica or ``--replicas R`` advanced together in one batched model call per step,
writing ``replica_000.extxyz``, ... and ``md.log`` into the folder ``--output`` (default ``md/`` in the
checkpoint's run directory). ``--engine ase`` runs ASE's integrators instead (:mod:`sciml.md.ase_driver`:
one replica, an ASE ``.traj`` file as ``--output``, default ``md.traj``, and ASE's log beside it); ``npt``
always does. Every ``--interval`` steps a frame, a log line and a progress update (steps/s, ns/day, the
temperature and, for a checkpoint with an uncertainty estimate, the largest per-atom force uncertainty, which
``--uncertainty-threshold`` flags and ``--stop-when-uncertain`` stops at). Prints speed and, for NVE, the energy
drift at the end. Ctrl-C stops cleanly (frames kept); ``--restart`` continues from the last frame.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sciml.commands.options import add_renamed
from sciml.commands.potential_options import add_potential_arguments, structure_and_calculator
from sciml.md import MDSettings, energy_drift, run_ase_md, run_replicas
from sciml.md.settings import ENGINE_ENSEMBLES, ENSEMBLES

ENGINES = ("auto", "sciml", "ase")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sciml md", description=__doc__.split("\n\n")[0])
    add_potential_arguments(parser, "any file ASE reads; --index picks the frame")
    add = parser.add_argument
    add("--ensemble", default="nve", choices=ENSEMBLES)
    add("--engine", default="auto", choices=ENGINES,
        help="sciml: the replica engine (nve, nvt-langevin); ase: ASE's integrators (any ensemble); auto: sciml, "
             "and ase for npt")  # fmt: skip
    add("--temperature", type=float, default=300.0, help="K: initial velocities, thermostat")
    add("--pressure", type=float, default=1.01325, help="bar (npt)")
    add("--friction", type=float, default=0.01, help="1/fs (nvt-langevin)")
    add("--timestep", type=float, default=0.5, help="fs")
    add("--steps", type=int, default=1000, help="steps to run (after a restart: further steps)")
    add("--output", help="the engine: a folder of replica_*.extxyz and md.log (default md/ in the checkpoint's run "
        "directory); --engine ase: an ASE .traj file (default md.traj there)")  # fmt: skip
    add_renamed(parser, "--trajectory", "--output", "output")
    add("--log", help="--engine ase: the MD log (default: the trajectory with suffix .log)")
    add("--interval", type=int, default=10, help="steps between trajectory frames, log lines, bar updates")
    add_renamed(parser, "--log-every", "--interval", "interval", type=int)
    add("--restart", action="store_true", help="continue from the last frame, appending")
    add("--overwrite", action="store_true", help="replace an existing trajectory and log")
    add("--seed", type=int, default=0, help="initial velocities and Langevin noise")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--uncertainty-threshold", type=float, help="eV/Å: flag steps whose largest per-atom force uncertainty "
        "exceeds it (needs a checkpoint with an uncertainty estimate)")  # fmt: skip
    add("--stop-when-uncertain", action="store_true", help="stop at the first step above --uncertainty-threshold")
    add("--replicas", type=int, default=1, help="independent replicas advanced together, one model call per step")
    return parser


def main(args: list[str]) -> dict:
    options = parser().parse_args(args)
    engine = chosen_engine(options)
    settings = MDSettings(options.ensemble, options.timestep, options.steps, options.temperature, options.seed,
                          options.interval, options.friction, options.pressure,
                          uncertainty_threshold=options.uncertainty_threshold,
                          stop_when_uncertain=options.stop_when_uncertain)  # fmt: skip
    options.require_uncertainty = options.require_uncertainty or options.uncertainty_threshold is not None
    run = engine_main if engine == "sciml" else ase_main
    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: frames written so far are kept
    try:
        result = run(options, settings)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if options.ensemble == "nve" and len(result["times_ps"]) > 2:
        slope, excursion = energy_drift(result["times_ps"], result["total_energy"], result["atoms"])
        result["drift"], result["excursion"] = slope, excursion
        print(f"energy drift {slope:.3e} eV/atom/ps, largest excursion {excursion:.3e} eV/atom")
    return result


def chosen_engine(options: argparse.Namespace) -> str:
    """``"sciml"`` or ``"ase"`` for the options (``auto``: the engine, ASE for npt, saying so)."""
    if options.engine == "auto":
        if options.ensemble in ENGINE_ENSEMBLES:
            return "sciml"
        print(f"sciml md: {options.ensemble} runs on ASE's integrators (the engine runs {', '.join(ENGINE_ENSEMBLES)})")
        options.engine = "ase"
    if options.engine == "sciml" and options.ensemble not in ENGINE_ENSEMBLES:
        raise SystemExit(f"sciml md: the engine runs {' or '.join(ENGINE_ENSEMBLES)}; --engine ase runs "
                         f"{options.ensemble}")  # fmt: skip
    if options.engine == "ase" and options.replicas > 1:
        raise SystemExit("sciml md: --replicas runs on the engine (nve or nvt-langevin), not --engine ase")
    if options.engine == "sciml" and (options.static_shapes or options.log):
        flag = "--static-shapes" if options.static_shapes else "--log"
        raise SystemExit(f"sciml md: {flag} is an option of --engine ase (the engine writes md.log into --output)")
    return options.engine


def engine_main(options: argparse.Namespace, settings: MDSettings) -> dict:
    """The replica engine (:func:`~sciml.md.engine.run_replicas`)."""
    import ase.io

    from sciml.calculators import load_model
    from sciml.calculators.replicas import BatchedPotential

    directory = Path(options.output or Path(options.checkpoint).resolve().parent.parent / "md")
    log = directory / "md.log"
    if options.overwrite:
        for path in [*directory.glob("replica_*.extxyz"), log]:
            path.unlink(missing_ok=True)
    atoms = ase.io.read(options.structure, index=options.index)
    model = load_model(options.checkpoint, options.device)
    potential = BatchedPotential(model, atoms.numbers, atoms.cell[:], atoms.pbc, options.skin, options.device,
                                 options.dtype, compile=options.compile, expected_calls=options.steps)  # fmt: skip
    watch = potential.reports_uncertainty
    if options.require_uncertainty and not watch:
        raise ValueError(f"checkpoint '{options.checkpoint}' carries no uncertainty estimate (train a committee or "
                         "a last-layer uncertainty for one), but the uncertainty was asked for")  # fmt: skip
    bar = ProgressBar(options)

    def progress(state: dict) -> None:
        steps_per_s = state["replica_steps_per_s"] / max(len(state["temperature"]), 1)
        bar.show(state, steps_per_s, float(np.mean(state["temperature"])))

    try:
        result = run_replicas(potential, atoms, options.replicas, settings, directory, options.restart, progress,
                              watch_uncertainty=watch, log=log)  # fmt: skip
    finally:
        bar.close()
    steps_per_s = result["replica_steps_per_s"] / options.replicas
    replicas = f"{options.replicas} replicas of " if options.replicas > 1 else ""
    print(f"{replicas}{len(atoms)} atoms, {result['steps']} steps of {options.timestep} fs ({settings.ensemble}, "
          f"{options.dtype}, sciml engine): {steps_per_s:.1f} steps/s, "
          f"{steps_per_s * options.timestep * 86400 / 1e6:.3f} ns/day, {result['replica_steps_per_s']:.1f} "
          f"replica-steps/s, {potential.rebuilds} neighbour-list builds -> {directory} "
          f"(step {result['state'].step})")  # fmt: skip
    print(potential.inference.describe())
    if watch:
        threshold, flagged = settings.uncertainty_threshold, sum(len(steps) for steps in result["uncertain_steps"])
        above = f"; {flagged} steps above {threshold} eV/Å" if threshold else ""
        print(f"largest per-atom force uncertainty {np.nanmax(result['max_force_uncertainty']):.4f} eV/Å{above}")
    for replica, stopped in enumerate(result["stopped"]):
        if stopped == "uncertain":
            print(f"replica {replica} stopped at step {result['uncertain_steps'][replica][0]}: the force "
                  f"uncertainty exceeded {options.uncertainty_threshold} eV/Å")  # fmt: skip
    result["atoms"] = len(atoms)
    result["total_energy"] = result["total_energy"][:, 0]  # the first replica's (the drift is per run)
    return result


def ase_main(options: argparse.Namespace, settings: MDSettings) -> dict:
    """ASE's integrators (:func:`~sciml.md.ase_driver.run_ase_md`)."""
    trajectory = Path(options.output or Path(options.checkpoint).resolve().parent.parent / "md.traj")
    log = Path(options.log) if options.log else trajectory.with_suffix(".log")
    atoms, calculator = structure_and_calculator(options)
    bar = ProgressBar(options)

    def progress(state: dict) -> None:
        bar.show(state, state["steps_per_s"], state["temperature"])

    try:
        result = run_ase_md(atoms, calculator, settings, trajectory, log, options.overwrite, options.restart, progress)
    finally:
        bar.close()
    last = result["first_step"] + result["steps_run"]
    print(f"{len(atoms)} atoms, {result['steps_run']} steps of {options.timestep} fs ({options.ensemble}, "
          f"{options.dtype}, ASE): {result['steps_per_second']:.1f} steps/s, {result['ns_per_day']:.3f} ns/day, "
          f"{calculator.rebuilds} neighbour-list builds -> {trajectory} (step {last})")  # fmt: skip
    print(calculator.inference.describe())
    if calculator.reports_uncertainty:
        threshold, flagged = settings.uncertainty_threshold, result["uncertain_steps"]
        above = f"; {len(flagged)} steps above {threshold} eV/Å" if threshold else ""
        print(f"largest per-atom force uncertainty {result['max_force_uncertainty']:.4f} eV/Å{above}")
    if result["stopped"] == "uncertain":
        print(f"stopped at step {last}: the force uncertainty exceeded {options.uncertainty_threshold} eV/Å")
    elif result["stopped"] != "finished":
        print(f"stopped early at step {last}; continue with --restart")
    result["atoms"] = len(atoms)
    return result


class ProgressBar:
    """The run's progress bar: steps done, steps/s, ns/day, the temperature and, when watched, the largest
    per-atom force uncertainty since the last record."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.timestep, self.first = options.timestep, None
        self.bar = tqdm(total=options.steps, unit="step", disable=options.no_progress, dynamic_ncols=True)

    def show(self, state: dict, steps_per_s: float, temperature: float) -> None:
        """One record: ``state`` as the MD reports it, the steps per second of one run and its temperature (K)."""
        self.first = state["step"] if self.first is None else self.first
        self.bar.n = state["step"] - self.first
        ns_per_day = steps_per_s * self.timestep * 86400 / 1e6
        uncertainty = f", max σF {state['max_force_uncertainty']:.3f} eV/Å" if "max_force_uncertainty" in state else ""
        self.bar.set_postfix_str(f"{steps_per_s:.1f} steps/s, {ns_per_day:.3f} ns/day, T {temperature:.0f} K"
                                 f"{uncertainty}")  # fmt: skip

    def close(self) -> None:
        self.bar.close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
