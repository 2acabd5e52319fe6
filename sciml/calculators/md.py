"""Molecular dynamics with ASE for any ASE calculator (``sciml md`` runs it with a sciml checkpoint).

Ensembles: ``nve`` (velocity Verlet), ``nvt-langevin`` (Langevin, friction in 1/fs) and ``npt``
(isotropic MTK barostat with Nose-Hoover chains, ASE's ``IsotropicMTKNPT``; periodic cells and a calculator
with stress). Units: fs, K, bar, Å, eV.

The trajectory (every ``interval``-th step, with the step number in ``atoms.info["md_step"]``) is written
to a hidden temporary file and renamed when the run stops: at its end, on Ctrl-C / SIGTERM, or on an
error, so every frame written is kept and no half-written file appears under the final name. An existing
trajectory is refused unless ``overwrite``, or continued with ``restart`` (positions, velocities and cell of
its last frame; thermostat and barostat variables start afresh, as in ASE).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms, units
from ase.io import Trajectory
from ase.md import MDLogger
from ase.md.langevin import Langevin
from ase.md.nose_hoover_chain import IsotropicMTKNPT
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet

from sciml.data.files import AtomicOutput

ENSEMBLES = ("nve", "nvt-langevin", "npt")


@dataclass
class MDSettings:
    """What to run. ``friction``: Langevin, 1/fs. ``pressure``: NPT, bar. ``tdamp``/``pdamp``: NPT thermostat
    and barostat time constants in fs (default 100 and 1000 time steps, ASE's advice)."""

    ensemble: str = "nve"
    timestep: float = 0.5
    steps: int = 1000
    temperature: float = 300.0
    seed: int = 0
    interval: int = 10
    friction: float = 0.01
    pressure: float = 1.01325
    tdamp: float | None = None
    pdamp: float | None = None

    def __post_init__(self) -> None:
        if self.ensemble not in ENSEMBLES:
            raise ValueError(f"unknown ensemble '{self.ensemble}'; choose one of {ENSEMBLES}")
        if self.timestep <= 0 or self.steps < 0 or self.interval < 1:
            raise ValueError("timestep must be > 0 fs, steps >= 0 and interval >= 1")


def dynamics_for(atoms: Atoms, settings: MDSettings):
    """The ASE dynamics object of ``settings.ensemble`` on ``atoms`` (calculator attached)."""
    dt = settings.timestep * units.fs
    if settings.ensemble == "nve":
        return VelocityVerlet(atoms, dt)
    if settings.ensemble == "nvt-langevin":
        rng = np.random.default_rng(settings.seed + 1)
        return Langevin(atoms, dt, temperature_K=settings.temperature, friction=settings.friction / units.fs, rng=rng)
    if not atoms.pbc.all():
        raise ValueError("npt needs a cell periodic in all three directions")
    return IsotropicMTKNPT(
        atoms,
        dt,
        temperature_K=settings.temperature,
        pressure_au=settings.pressure * units.bar,
        tdamp=(settings.tdamp or 100 * settings.timestep) * units.fs,
        pdamp=(settings.pdamp or 1000 * settings.timestep) * units.fs,
    )


def initial_velocities(atoms: Atoms, temperature: float, seed: int) -> None:
    """Maxwell-Boltzmann velocities at ``temperature`` K, no net momentum (nor rotation for molecules)."""
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    if not atoms.pbc.any():
        ZeroRotation(atoms)


def restart_frame(trajectory: str | Path) -> tuple[Atoms, int]:
    """The last frame of ``trajectory`` (positions, momenta, cell) and its step number."""
    atoms = ase.io.read(trajectory, index=-1)
    if atoms.get_momenta() is None or not np.any(atoms.get_momenta()):
        raise ValueError(f"'{trajectory}': its last frame has no velocities to continue from")
    return atoms, int(atoms.info.get("md_step", 0))


def run_md(
    atoms: Atoms,
    calculator,
    settings: MDSettings,
    out: str | Path | None = None,
    log: str | Path | None = None,
    overwrite: bool = False,
    restart: bool = False,
    on_record: Callable[[dict], None] | None = None,
) -> dict:
    """Run ``settings.steps`` steps on ``atoms`` (modified in place; velocities drawn unless ``restart``).

    Args:
        out: ASE trajectory of every ``interval``-th step (module docstring); ``restart``: continue from its
            last frame (``atoms`` is replaced by that frame) and append.
        log: ASE ``MDLogger`` file (time in ps, energies in eV, temperature in K; stress in GPa for NPT).
        on_record: called every ``interval`` steps with ``{"step", "time_ps", "temperature", "steps_per_s"}``.

    Returns:
        ``steps_per_second``, ``ns_per_day``, ``times_ps`` and ``total_energy`` (eV) at every record, the
        first ``step``, ``stopped`` (``"finished"``, ``"interrupted"``).
    """
    first_step = 0
    if restart:
        if out is None or not Path(out).exists():
            raise FileNotFoundError(f"restart needs an existing trajectory, got '{out}'")
        frame, first_step = restart_frame(out)
        atoms.set_positions(frame.positions)
        atoms.set_cell(frame.cell)
        atoms.set_momenta(frame.get_momenta())
    output = AtomicOutput(out, overwrite or restart, "--overwrite (or --restart)") if out else None
    if log is not None and Path(log).exists() and not (overwrite or restart):
        raise FileExistsError(f"'{log}' already exists; pass --overwrite (or --restart) to replace or extend it")
    atoms.calc = calculator
    if not restart:
        initial_velocities(atoms, settings.temperature, settings.seed)
    dynamics = dynamics_for(atoms, settings)
    dt_ps = settings.timestep / 1000
    times, energies, started = [], [], time.perf_counter()

    def record() -> None:
        step = first_step + dynamics.nsteps
        times.append(step * dt_ps)
        energies.append(atoms.get_total_energy())
        if on_record is not None:
            elapsed = max(time.perf_counter() - started, 1e-9)
            rate = dynamics.nsteps / elapsed
            on_record(
                {"step": step, "time_ps": step * dt_ps, "temperature": atoms.get_temperature(), "steps_per_s": rate}
            )

    def attach_observers() -> None:  # after the trajectory writer: a frame is written before anything can stop
        dynamics.attach(record, interval=settings.interval)
        if log is not None:
            mode = "a" if restart and Path(log).exists() else "w"
            logger = MDLogger(dynamics, atoms, str(log), header=mode == "w", stress=settings.ensemble == "npt",
                              peratom=True, mode=mode)  # fmt: skip
            dynamics.attach(logger, interval=settings.interval)

    stopped = "finished"
    try:
        if output is None:
            attach_observers()
            dynamics.run(settings.steps)
        else:
            if restart:
                shutil.copyfile(out, output.temporary)
            with Trajectory(output.temporary, "a" if restart else "w", atoms) as writer:

                def write() -> None:
                    if not (restart and dynamics.nsteps == 0):  # a restart's first frame is already there
                        atoms.info["md_step"] = first_step + dynamics.nsteps
                        writer.write()

                dynamics.attach(write, interval=settings.interval)
                attach_observers()
                try:
                    dynamics.run(settings.steps)
                except KeyboardInterrupt:
                    stopped = "interrupted"
            output.commit()  # every frame written is kept, also when the run stopped early
    except BaseException:
        if output is not None and output.temporary.exists():
            output.commit()
        raise
    finally:
        dynamics.observers.clear()  # closes the logger's file
    elapsed = time.perf_counter() - started
    rate = dynamics.nsteps / elapsed if elapsed > 0 else float("nan")
    return {
        "steps_per_second": rate,
        "ns_per_day": rate * settings.timestep * 86400 / 1e6,
        "times_ps": np.array(times),
        "total_energy": np.array(energies),
        "first_step": first_step,
        "steps_run": dynamics.nsteps,
        "stopped": stopped,
    }


def energy_drift(times_ps: np.ndarray, total_energy: np.ndarray, n_atoms: int) -> tuple[float, float]:
    """(slope of total energy per atom in eV/atom/ps, largest excursion from the start in eV/atom)."""
    per_atom = total_energy / n_atoms
    return float(np.polyfit(times_ps, per_atom, 1)[0]), float(np.abs(per_atom - per_atom[0]).max())
