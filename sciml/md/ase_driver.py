"""The ASE-driven path: molecular dynamics with ASE's integrators for any ASE calculator, for users who want
them and for ``npt`` (``sciml md --engine ase``, and ``--ensemble npt``). Everything else in sciml runs on
the replica engine (:mod:`sciml.md.engine`); both take :class:`~sciml.md.settings.MDSettings`.

Ensembles: ``nve`` (velocity Verlet), ``nvt-langevin`` (Langevin, friction in 1/fs, ``fixcm=False`` with a ``FixCom``
constraint: exact NVT sampling, 3N - 3 degrees of freedom) and ``npt``
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
from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms, units
from ase.constraints import FixCom
from ase.io import Trajectory
from ase.md import MDLogger
from ase.md.langevin import Langevin
from ase.md.nose_hoover_chain import IsotropicMTKNPT
from ase.md.velocitydistribution import Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet

from sciml.data.files import AtomicOutput
from sciml.md.monitor import UncertaintyMonitor, largest_force_uncertainty
from sciml.md.settings import MDSettings

try:  # ASE >= 3.29 (MaxwellBoltzmannDistribution is deprecated there)
    from ase.md.velocitydistribution import thermalize_momenta
except ImportError:  # ASE 3.23-3.28
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    def thermalize_momenta(atoms: Atoms, temperature_K: float, *, rng=None) -> None:
        MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_K, rng=rng)


def dynamics_for(atoms: Atoms, settings: MDSettings):
    """The ASE dynamics object of ``settings.ensemble`` on ``atoms`` (calculator attached)."""
    if settings.start_temperature is not None:
        raise ValueError("the ASE path has no thermostat schedule (start_temperature, ramp_ps): use the engine")
    dt = settings.timestep * units.fs
    if settings.ensemble == "nve":
        return VelocityVerlet(atoms, dt)
    if settings.ensemble == "nvt-langevin":
        # ASE's advice since 3.28: fixcm=True does not sample NVT exactly for small systems; fixcm=False with a
        # FixCom constraint does (and the temperature then counts 3N - 3 degrees of freedom)
        if not any(isinstance(constraint, FixCom) for constraint in atoms.constraints):
            atoms.set_constraint([*atoms.constraints, FixCom()])
        rng = np.random.default_rng(settings.seed + 1)
        friction = settings.friction / units.fs
        return Langevin(atoms, dt, temperature_K=settings.temperature, friction=friction, fixcm=False, rng=rng)
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
    thermalize_momenta(atoms, temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    if not atoms.pbc.any():
        ZeroRotation(atoms)


def restart_frame(trajectory: str | Path) -> tuple[Atoms, int]:
    """The last frame of ``trajectory`` (positions, momenta, cell) and its step number."""
    atoms = ase.io.read(trajectory, index=-1)
    if atoms.get_momenta() is None or not np.any(atoms.get_momenta()):
        raise ValueError(f"'{trajectory}': its last frame has no velocities to continue from")
    return atoms, int(atoms.info.get("md_step", 0))


def run_ase_md(
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
        on_record: called every ``interval`` steps with ``{"step", "time_ps", "temperature", "steps_per_s"}``
            (and ``"max_force_uncertainty"``, eV/Å, the largest per-atom value since the last call, when the
            calculator reports ``forces_uncertainty``).

    Returns:
        ``steps_per_second``, ``ns_per_day``, ``times_ps``, ``total_energy`` (eV) and ``temperatures`` (K) at
        every record, the
        first ``step``, ``stopped`` (``"finished"``, ``"interrupted"``, ``"uncertain"``),
        ``max_force_uncertainty`` (eV/Å, the run's largest per-atom value; NaN without an estimate) and
        ``uncertain_steps`` (the steps above ``settings.uncertainty_threshold``).
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
    times, energies, temperatures, started = [], [], [], time.perf_counter()
    monitor = UncertaintyMonitor(settings.uncertainty_threshold, settings.stop_when_uncertain)
    write_now: list[Callable[[], None]] = []  # the trajectory writer, once open

    def record() -> None:
        step = first_step + dynamics.nsteps
        times.append(step * dt_ps)
        energies.append(atoms.get_total_energy())
        temperatures.append(atoms.get_temperature())
        if on_record is not None:
            elapsed = max(time.perf_counter() - started, 1e-9)
            rate = dynamics.nsteps / elapsed
            state = {"step": step, "time_ps": step * dt_ps, "temperature": atoms.get_temperature(), "steps_per_s": rate}
            on_record(state | monitor.since_record())

    def check_uncertainty() -> None:
        step = first_step + dynamics.nsteps
        if monitor.check(atoms.calc, step) and settings.stop_when_uncertain:
            if dynamics.nsteps % settings.interval and write_now:
                write_now[0]()  # the frame it stopped at is kept
            raise UncertainStructure(step, monitor.last)

    def attach_observers() -> None:  # after the trajectory writer: a frame is written before anything can stop
        dynamics.attach(check_uncertainty, interval=1)
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
            try:
                dynamics.run(settings.steps)
            except UncertainStructure:
                stopped = "uncertain"
        else:
            if restart:
                shutil.copyfile(out, output.temporary)
            with Trajectory(output.temporary, "a" if restart else "w", atoms) as writer:

                def write() -> None:
                    if not (restart and dynamics.nsteps == 0):  # a restart's first frame is already there
                        atoms.info["md_step"] = first_step + dynamics.nsteps
                        uncertainty = largest_force_uncertainty(atoms.calc)
                        if uncertainty is not None:
                            atoms.info["forces_uncertainty_max"] = uncertainty
                        writer.write()

                dynamics.attach(write, interval=settings.interval)
                write_now.append(write)
                attach_observers()
                try:
                    dynamics.run(settings.steps)
                except KeyboardInterrupt:
                    stopped = "interrupted"
                except UncertainStructure:
                    stopped = "uncertain"
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
        "temperatures": np.array(temperatures),
        "first_step": first_step,
        "steps_run": dynamics.nsteps,
        "stopped": stopped,
        "max_force_uncertainty": monitor.peak,
        "uncertain_steps": monitor.flagged,
    }


class UncertainStructure(Exception):
    """Raised inside the dynamics to stop a run at a step whose force uncertainty exceeds the threshold."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"step {step}: largest per-atom force uncertainty {value:.4f} eV/Å above the threshold")
        self.step, self.value = step, value
