"""The MD engine: R >= 1 replicas of one system (from one start structure or several of its conformers)
advanced together, one batched energy + forces call per step, with the integrators of
:mod:`sciml.md.integrators`. Every MD run of sciml goes through it: ``sciml md`` (``nve`` and
``nvt-langevin``), exploration and calibration runs of ``sciml learn``, the sampling of ``sciml pipeline`` and a
reference method's own MD (:class:`~sciml.calculators.calculator_potential.CalculatorPotential`).

Trajectories: one extxyz file per replica (``replica_000.extxyz``, ...), a frame every ``interval`` steps
with positions, momenta, energy and forces and ``step``, ``time_fs`` and ``replica`` in its info (and
``forces_uncertainty_max`` when the run watches the uncertainty), each frame appended in one write and synced
(:func:`~sciml.data.files.append_frame`). ``resume`` continues from the last step that every replica's file
holds (frames after it, from a run killed mid-record, are dropped) and, the noise being seeded per record,
exactly as the uninterrupted run would have.

A replica can leave the batch while the others go on: when ``stop_when_uncertain`` finds it above the
threshold (its frame written), or when the caller's ``on_step`` says so (exploration's rules).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import ase.io
import numpy as np
import torch
from ase import Atoms, units
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.data.files import append_frame, read_complete_frames
from sciml.md.integrators import (
    LangevinNoise,
    Potential,
    ReplicaState,
    degrees_of_freedom,
    integrate_step,
    kinetic_energy,
    maxwell_boltzmann,
)
from sciml.md.monitor import UncertaintyMonitor
from sciml.md.settings import ENGINE_ENSEMBLES, MDSettings

StepHook = Callable[[ReplicaState, np.ndarray | None], Sequence[int] | None]


def start_structures(start: Atoms | Sequence[Atoms]) -> list[Atoms]:
    """``start`` as a list of start structures: one, or several conformers of one molecule (the same atoms in
    the same order; an error names the first that is not)."""
    starts = [start] if isinstance(start, Atoms) else list(start)
    if not starts:
        raise ValueError("at least one start structure is needed")
    for index, other in enumerate(starts[1:], 1):
        if list(other.numbers) != list(starts[0].numbers):
            raise ValueError(f"start structure {index} has other atoms than start 0: several starts must be "
                             "conformers of one molecule, the same atoms in the same order")  # fmt: skip
    return starts


def run_replicas(
    potential: Potential,
    start: Atoms | Sequence[Atoms],
    replicas: int,
    settings: MDSettings,
    directory: str | Path | None = None,
    resume: bool = False,
    on_record: Callable[[dict], None] | None = None,
    on_step: StepHook | None = None,
    watch_uncertainty: bool = False,
    log: str | Path | None = None,
) -> dict:
    """Run ``settings.steps`` steps of ``replicas`` copies of ``start`` (velocities drawn per replica at
    ``settings.initial_temperature``) or, with ``resume``, continue the run in ``directory`` from its last common
    step for ``settings.steps`` more.

    Args:
        potential: ``positions (R, N, 3) -> (energy (R,) eV, forces (R, N, 3) eV/Å)``, e.g. a
            :class:`~sciml.calculators.replicas.BatchedPotential`; with ``keep(rows)`` it is told when replicas
            leave, and with ``forces_uncertainty()`` ((R, N) eV/Å of the latest call) the run can watch it.
        start: one structure, or several of the same atoms in the same order (conformers): replica r starts
            from ``start[r % len(start)]``.
        directory: where the per-replica trajectories go (module docstring); ``None`` writes none.
        on_record: called every ``interval`` steps with ``{"step", "time_fs", "temperature" (R,) K,
            "potential_energy" (R,) eV, "replica_steps_per_s"}`` (and ``"max_force_uncertainty"`` eV/Å, the
            largest since the last record, when the uncertainty is watched), for the replicas still running.
        on_step: called after every step with the state and each row's largest per-atom force uncertainty (R,)
            eV/Å (None when not watched); returns the rows that go on (None: all).
        watch_uncertainty: read the potential's force uncertainty at every step (implied by
            ``settings.uncertainty_threshold``).
        log: a text file with a line per replica and record: step, time (ps), total, potential and kinetic
            energy (eV), temperature (K); appended to on ``resume``.

    Returns:
        ``state`` (the final :class:`~sciml.md.integrators.ReplicaState`), ``temperature``,
        ``potential_energy`` and ``total_energy`` (records x R; NaN after a replica left), ``times_ps``
        (records), ``steps``, ``replica_steps_per_s``, ``first_step``, ``stopped`` (per replica: ``"finished"``,
        ``"uncertain"`` or ``"ended"`` by ``on_step``), ``max_force_uncertainty`` (eV/Å per replica; NaN when
        not watched) and ``uncertain_steps`` (per replica, the steps above the threshold).
    """
    if settings.ensemble not in ENGINE_ENSEMBLES:
        raise ValueError(f"the replica engine runs {ENGINE_ENSEMBLES}, not '{settings.ensemble}' (ASE's npt: "
                         "sciml.md.ase_driver.run_ase_md)")  # fmt: skip
    watch_uncertainty = watch_uncertainty or settings.uncertainty_threshold is not None
    if watch_uncertainty and not callable(getattr(potential, "forces_uncertainty", None)):
        raise ValueError("watching the force uncertainty needs a potential with an uncertainty estimate")
    starts = start_structures(start)
    template = starts[0]
    masses = torch.tensor(template.get_masses(), dtype=torch.float64)
    paths = trajectory_paths(directory, replicas)
    if resume:
        state = resume_state(paths, masses)
    else:
        if paths and any(path.exists() and path.stat().st_size for path in paths):
            raise FileExistsError(f"'{directory}' already holds replica trajectories; resume them or choose another")
        positions = torch.tensor(np.stack([starts[r % len(starts)].positions for r in range(replicas)]),
                                 dtype=torch.float64)  # fmt: skip
        velocities = maxwell_boltzmann(range(replicas), masses, settings.initial_temperature, settings.seed,
                                       settings.fix_com)  # fmt: skip
        state = ReplicaState(positions, velocities)
    if log is not None and not resume and Path(log).exists() and Path(log).stat().st_size:
        raise FileExistsError(f"'{log}' already exists; resume the run or remove it")
    run = _Run(potential, template, masses, settings, paths, replicas, watch_uncertainty, on_record, log)
    return run.go(state, on_step, record_first=not resume)


class _Run:
    """The loop of :func:`run_replicas` and what it records."""

    def __init__(self, potential, template, masses, settings, paths, replicas, watch, on_record, log) -> None:
        self.potential, self.template, self.masses, self.settings = potential, template, masses, settings
        self.paths, self.watch, self.on_record, self.log = paths, watch, on_record, log
        self.dof = degrees_of_freedom(len(masses), settings.fix_com)
        self.records: dict[str, list] = {"temperature": [], "potential_energy": [], "total_energy": []}
        self.times: list[float] = []
        self.stopped = ["finished"] * replicas
        self.monitors = [UncertaintyMonitor(settings.uncertainty_threshold, settings.stop_when_uncertain)
                         for _ in range(replicas)]  # fmt: skip
        self.replicas = replicas

    def go(self, state: ReplicaState, on_step: StepHook | None, record_first: bool) -> dict:
        settings, first = self.settings, state.step
        noise = LangevinNoise(settings.friction, settings.timestep, self.masses, settings.seed)
        noise.reseed(state.replicas, state.step)
        energy, forces = self.potential(state.positions)
        largest = self._largest_uncertainty(state)
        self.begin, self.replica_steps = time.perf_counter(), 0
        if record_first:
            self._record(state, energy, forces, largest)
        self.state = state
        try:
            self._steps(energy, forces, noise, on_step)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: every frame recorded so far is on disk
            for replica in self.state.replicas:
                self.stopped[replica] = "interrupted"
        elapsed = max(time.perf_counter() - self.begin, 1e-9)
        stacked = {key: np.array(values) for key, values in self.records.items()}
        return {"state": self.state, **stacked, "times_ps": np.array(self.times), "steps": self.state.step - first,
                "first_step": first, "replica_steps_per_s": self.replica_steps / elapsed, "stopped": self.stopped,
                "max_force_uncertainty": np.array([monitor.peak for monitor in self.monitors]),
                "uncertain_steps": [monitor.flagged for monitor in self.monitors]}  # fmt: skip

    def _steps(self, energy, forces, noise: LangevinNoise, on_step: StepHook | None) -> None:
        """The steps of the run from ``self.state`` (kept up to date: an interrupted run returns it)."""
        state, settings, dt = self.state, self.settings, self.settings.timestep * units.fs
        for _ in range(settings.steps):
            temperature = settings.thermostat_temperature(state.step + 1)  # the schedule runs on with a resumed run
            thermostat = (lambda v, rows=state.replicas, t=temperature: noise.kick(v, rows, t)) \
                if settings.thermostatted else None  # fmt: skip
            state, energy, forces = integrate_step(state, forces, self.potential, dt, self.masses, thermostat,
                                                   settings.fix_com)  # fmt: skip
            self.replica_steps += len(state.replicas)
            self.state = state
            largest = self._largest_uncertainty(state)
            keep = list(range(len(state.replicas)))
            if largest is not None:
                keep = self._watch(state, largest, energy, forces)
            if on_step is not None:
                chosen = on_step(state, largest)
                if chosen is not None:
                    for row in set(keep) - set(chosen):
                        self.stopped[state.replicas[row]] = "ended"
                    keep = [row for row in keep if row in set(chosen)]
            if state.step % settings.interval == 0:
                self._record(state, energy, forces, largest)
                noise.reseed(state.replicas, state.step)
            if len(keep) < len(state.replicas):
                state, energy, forces = state.keep(keep), energy[keep], forces[keep]
                self.state = state
                if not keep:
                    break
                if callable(getattr(self.potential, "keep", None)):
                    self.potential.keep(keep)

    def _largest_uncertainty(self, state: ReplicaState) -> np.ndarray | None:
        """Each row's largest per-atom force uncertainty (R,) eV/Å, read once per step; None when not watched."""
        if not self.watch:
            return None
        sigma = self.potential.forces_uncertainty().detach().double().reshape(len(state.replicas), -1)
        return sigma.max(dim=1).values.cpu().numpy()

    def _watch(self, state: ReplicaState, largest: np.ndarray, energy, forces) -> list[int]:
        """Each replica's monitor; with ``stop_when_uncertain``, the rows above the threshold stop (their frame
        written). Returns the rows that go on."""
        keep = []
        for row, replica in enumerate(state.replicas):
            value = float(largest[row])
            if self.monitors[replica].observe(value, state.step) and self.settings.stop_when_uncertain:
                self.stopped[replica] = "uncertain"
                if state.step % self.settings.interval and self.paths:  # the frame it stopped at is kept
                    self._write(state, row, energy, forces, value)
            else:
                keep.append(row)
        return keep

    def _record(self, state: ReplicaState, energy, forces, largest: np.ndarray | None) -> None:
        kinetic = kinetic_energy(state.velocities, self.masses)
        temperature = (2 * kinetic / (self.dof * units.kB)).cpu().numpy()
        potential = energy.detach().cpu().numpy()
        row = {key: np.full(self.replicas, np.nan) for key in self.records}
        for index, replica in enumerate(state.replicas):
            row["temperature"][replica] = temperature[index]
            row["potential_energy"][replica] = potential[index]
            row["total_energy"][replica] = potential[index] + float(kinetic[index])
        for key, values in row.items():
            self.records[key].append(values)
        self.times.append(state.step * self.settings.timestep / 1000)
        if self.paths:
            for index in range(len(state.replicas)):
                self._write(state, index, energy, forces, None if largest is None else float(largest[index]))
        if self.log is not None:
            self._log(state, row)
        if self.on_record is not None:
            elapsed = max(time.perf_counter() - self.begin, 1e-9)
            update = {"step": state.step, "time_fs": state.step * self.settings.timestep, "temperature": temperature,
                      "potential_energy": potential, "replica_steps_per_s": self.replica_steps / elapsed}  # fmt: skip
            if largest is not None:
                recent = [self.monitors[r].since_record().get("max_force_uncertainty", np.nan) for r in state.replicas]
                if np.any(np.isfinite(recent)):
                    update["max_force_uncertainty"] = float(np.nanmax(recent))
            self.on_record(update)

    def _write(self, state: ReplicaState, row: int, energy, forces, uncertainty: float | None) -> None:
        replica = state.replicas[row]
        frame = Atoms(self.template.numbers, state.positions[row].cpu().numpy(), cell=self.template.cell,
                      pbc=self.template.pbc)  # fmt: skip
        frame.set_momenta((self.masses[:, None] * state.velocities[row]).cpu().numpy())
        frame.calc = SinglePointCalculator(frame, energy=float(energy[row]), forces=forces[row].cpu().numpy())
        frame.info.update(step=state.step, time_fs=state.step * self.settings.timestep, replica=replica)
        if uncertainty is not None:
            frame.info["forces_uncertainty_max"] = uncertainty
        append_frame(self.paths[replica], frame)

    def _log(self, state: ReplicaState, row: dict) -> None:
        path = Path(self.log)
        header = not path.exists() or not path.stat().st_size
        with open(path, "a") as handle:
            if header:
                handle.write("# step  time[ps]  replica  Etot[eV]  Epot[eV]  Ekin[eV]  T[K]\n")
            for replica in state.replicas:
                total, potential = row["total_energy"][replica], row["potential_energy"][replica]
                handle.write(f"{state.step:8d} {state.step * self.settings.timestep / 1000:10.4f} {replica:4d} "
                             f"{total:14.6f} {potential:14.6f} {total - potential:12.6f} "
                             f"{row['temperature'][replica]:9.2f}\n")  # fmt: skip


def trajectory_paths(directory: str | Path | None, replicas: int) -> list[Path]:
    """``<directory>/replica_000.extxyz``, ... (the folder made); none without a directory."""
    if directory is None:
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return [directory / f"replica_{r:03d}.extxyz" for r in range(replicas)]


def resume_state(paths: list[Path], masses: torch.Tensor) -> ReplicaState:
    """The state at the last step every replica's trajectory holds; later frames are dropped."""
    if not paths:
        raise ValueError("resume needs the directory of the run's trajectories")
    frames = [read_complete_frames(path) for path in paths]
    if not all(frames):
        missing = [str(path) for path, kept in zip(paths, frames, strict=True) if not kept]
        raise FileNotFoundError(f"cannot resume: no complete frame in {missing}")
    step = min(int(kept[-1].info["step"]) for kept in frames)
    positions, velocities = [], []
    for path, kept in zip(paths, frames, strict=True):
        upto = [frame for frame in kept if int(frame.info["step"]) <= step]
        if len(upto) < len(kept):  # a replica written past the common step: keep it in step with the others
            path.unlink()
            ase.io.write(path, upto, format="extxyz")
        last = upto[-1]
        positions.append(torch.tensor(last.positions, dtype=torch.float64))
        velocities.append(torch.tensor(last.get_momenta(), dtype=torch.float64) / masses[:, None])
    return ReplicaState(torch.stack(positions), torch.stack(velocities), step)
