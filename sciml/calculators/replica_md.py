"""Molecular dynamics of R independent replicas of one system (from one start structure or several of its
conformers), advanced together in torch: one batched energy + forces call per step
(:class:`~sciml.calculators.replicas.BatchedPotential`) where ASE's integrators would make R.

Integrators (settings in fs, K and 1/fs; inside, ASE's units: Å, amu, eV):

- ``"langevin"``, NVT: BAOAB (Leimkuhler and Matthews, Appl. Math. Res. Express 2013, 34): half kick, half
  drift, the exact Ornstein-Uhlenbeck step v <- c v + sqrt((1 - c^2) kT / m) xi with c = exp(-gamma dt), half
  drift, new forces, half kick. Its configurational averages are exact for harmonic systems at any stable
  time step, and its errors elsewhere are O(dt^2).
- ``"verlet"``, NVE: velocity Verlet.

With ``fix_com`` (the default) each replica's centre-of-mass velocity is zero at the start and the thermostat's
noise is projected onto zero total momentum (forces of a translation-invariant potential add up to zero), so
the kinetic energy has 3N - 3 degrees of freedom and the temperature is 2 KE / ((3N - 3) k_B): the
correct canonical sampling of a free molecule, which ASE's ``Langevin(fixcm=True)`` does not give.

Trajectories: one extxyz file per replica (``replica_000.extxyz``, ...), a frame every ``interval`` steps
with positions, momenta, energy and forces and ``step``, ``time_fs`` and ``replica`` in its info, each frame
appended in one write and synced (:func:`~sciml.data.files.append_frame`). ``resume`` continues from the last
step that every replica's file holds (frames after it, from a run killed mid-record, are dropped): the noise
after a recorded step is drawn from a generator seeded by ``(seed, step)``, so a resumed run continues
exactly as the uninterrupted one would have.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ase.io
import numpy as np
import torch
from ase import Atoms, units
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.data.files import append_frame, read_complete_frames

INTEGRATORS = ("langevin", "verlet")
Potential = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class ReplicaSettings:
    """What to run: ``timestep`` fs, ``temperature`` K (initial velocities and thermostat), ``friction`` 1/fs,
    a record (trajectory frame, ``on_record`` call) every ``interval`` steps."""

    integrator: str = "langevin"
    timestep: float = 0.5
    steps: int = 1000
    temperature: float = 300.0
    friction: float = 0.01
    interval: int = 10
    seed: int = 0
    fix_com: bool = True

    def __post_init__(self) -> None:
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator '{self.integrator}'; choose one of {INTEGRATORS}")
        if self.timestep <= 0 or self.steps < 0 or self.interval < 1 or self.temperature < 0 or self.friction < 0:
            raise ValueError("timestep must be > 0 fs, steps >= 0, interval >= 1, temperature and friction >= 0")


@dataclass
class ReplicaState:
    """Positions (R, N, 3) Å and velocities (R, N, 3) Å per ASE time unit, float64, at ``step``."""

    positions: torch.Tensor
    velocities: torch.Tensor
    step: int = 0


def degrees_of_freedom(atoms: int, fix_com: bool) -> int:
    """3N, less 3 when the centre-of-mass motion is removed."""
    return 3 * atoms - (3 if fix_com else 0)


def kinetic_energy(velocities: torch.Tensor, masses: torch.Tensor) -> torch.Tensor:
    """(R,) eV from velocities (R, N, 3) and masses (N,) amu."""
    return 0.5 * (masses[None, :, None] * velocities**2).sum(dim=(1, 2))


def remove_com_velocity(velocities: torch.Tensor, masses: torch.Tensor) -> torch.Tensor:
    """Velocities less each replica's centre-of-mass velocity."""
    com = (masses[None, :, None] * velocities).sum(1, keepdim=True) / masses.sum()
    return velocities - com


def _generator(seed: int, step: int, device: torch.device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(int(seed) * 1_000_003 + int(step))


def maxwell_boltzmann(
    replicas: int, masses: torch.Tensor, temperature: float, seed: int, fix_com: bool = True
) -> torch.Tensor:
    """(R, N, 3) velocities drawn at ``temperature`` K (zero centre-of-mass velocity with ``fix_com``)."""
    noise = torch.randn((replicas, len(masses), 3), generator=_generator(seed, -1, masses.device),
                        dtype=torch.float64, device=masses.device)  # fmt: skip
    velocities = noise * torch.sqrt(units.kB * temperature / masses)[None, :, None]
    return remove_com_velocity(velocities, masses) if fix_com else velocities


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
    settings: ReplicaSettings,
    directory: str | Path | None = None,
    resume: bool = False,
    on_record: Callable[[dict], None] | None = None,
) -> dict:
    """Run ``settings.steps`` steps of ``replicas`` copies of ``start`` (velocities drawn per replica) or, with
    ``resume``, continue the run in ``directory`` from its last common step for ``settings.steps`` more.

    Args:
        potential: ``positions (R, N, 3) -> (energy (R,) eV, forces (R, N, 3) eV/Å)``, e.g. a
            :class:`~sciml.calculators.replicas.BatchedPotential`.
        start: one structure, or several of the same atoms in the same order (conformers): replica r starts
            from ``start[r % len(start)]``.
        directory: where the per-replica trajectories go (module docstring); ``None`` writes none.
        on_record: called every ``interval`` steps with ``{"step", "time_fs", "temperature" (R,) K,
            "potential_energy" (R,) eV, "replica_steps_per_s"}``.

    Returns:
        ``state`` (the final :class:`ReplicaState`), ``temperature`` and ``potential_energy`` (records x R),
        ``total_energy`` (records x R, eV), ``steps``, ``replica_steps_per_s``.
    """
    starts = start_structures(start)
    start = starts[0]
    masses = torch.tensor(start.get_masses(), dtype=torch.float64)
    paths = _paths(directory, replicas)
    if resume:
        state = _resume(paths, masses)
    else:
        if paths and any(path.exists() and path.stat().st_size for path in paths):
            raise FileExistsError(f"'{directory}' already holds replica trajectories; resume them or choose another")
        positions = torch.tensor(np.stack([starts[r % len(starts)].positions for r in range(replicas)]),
                                 dtype=torch.float64)  # fmt: skip
        velocities = maxwell_boltzmann(replicas, masses, settings.temperature, settings.seed, settings.fix_com)
        state = ReplicaState(positions, velocities)
    dt = settings.timestep * units.fs
    kT = units.kB * settings.temperature
    decay = float(np.exp(-settings.friction / units.fs * dt))
    noise_scale = torch.sqrt((1 - decay**2) * kT / masses)[None, :, None]
    dof = degrees_of_freedom(len(masses), settings.fix_com)
    energy, forces = potential(state.positions)
    records: dict[str, list] = {"temperature": [], "potential_energy": [], "total_energy": []}
    generator = _generator(settings.seed, state.step, masses.device)
    begin, first = time.perf_counter(), state.step

    def record() -> None:
        kinetic = kinetic_energy(state.velocities, masses)
        temperature = (2 * kinetic / (dof * units.kB)).numpy()
        records["temperature"].append(temperature)
        records["potential_energy"].append(energy.numpy().copy())
        records["total_energy"].append((energy + kinetic).numpy())
        for r, path in enumerate(paths):
            append_frame(path, _frame(start, state, r, energy, forces, masses, settings.timestep))
        if on_record is not None:
            elapsed = max(time.perf_counter() - begin, 1e-9)
            speed = replicas * (state.step - first) / elapsed
            on_record({"step": state.step, "time_fs": state.step * settings.timestep, "temperature": temperature,
                       "potential_energy": energy.numpy(), "replica_steps_per_s": speed})  # fmt: skip

    if not resume:
        record()
    thermostat = (decay, noise_scale, generator) if settings.integrator == "langevin" else None
    for _ in range(settings.steps):
        state, energy, forces = integrate_step(state, forces, potential, dt, masses, thermostat, settings.fix_com)
        if state.step % settings.interval == 0:
            record()
            generator = _generator(settings.seed, state.step, masses.device)
            thermostat = (decay, noise_scale, generator) if thermostat else None
    elapsed = max(time.perf_counter() - begin, 1e-9)
    stacked = {key: np.array(values) for key, values in records.items()}
    return {"state": state, **stacked, "steps": state.step - first,
            "replica_steps_per_s": replicas * (state.step - first) / elapsed}  # fmt: skip


def integrate_step(
    state: ReplicaState,
    forces: torch.Tensor,
    potential: Potential,
    dt: float,
    masses: torch.Tensor,
    thermostat: tuple[float, torch.Tensor, torch.Generator] | None,
    fix_com: bool = True,
) -> tuple[ReplicaState, torch.Tensor, torch.Tensor]:
    """One step from ``state`` with its ``forces`` (R, N, 3) eV/Å: BAOAB Langevin with ``thermostat`` =
    ``(exp(-gamma dt), sqrt((1 - c^2) kT / m) (1, N, 1), noise generator)``, velocity Verlet without; ``dt`` in
    ASE time units. Returns the new state, its energy (R,) eV and forces."""
    inverse_mass = (1.0 / masses)[None, :, None]
    velocities = state.velocities + 0.5 * dt * forces * inverse_mass
    positions = state.positions + (0.5 * dt if thermostat else dt) * velocities
    if thermostat:
        decay, noise_scale, generator = thermostat
        noise = torch.randn(velocities.shape, generator=generator, dtype=torch.float64)
        velocities = decay * velocities + noise_scale * noise
        if fix_com:
            velocities = remove_com_velocity(velocities, masses)
        positions = positions + 0.5 * dt * velocities
    energy, forces = potential(positions)
    return ReplicaState(positions, velocities + 0.5 * dt * forces * inverse_mass, state.step + 1), energy, forces


def _paths(directory: str | Path | None, replicas: int) -> list[Path]:
    if directory is None:
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return [directory / f"replica_{r:03d}.extxyz" for r in range(replicas)]


def _frame(start: Atoms, state: ReplicaState, r: int, energy, forces, masses, timestep: float) -> Atoms:
    frame = Atoms(start.numbers, state.positions[r].numpy(), cell=start.cell, pbc=start.pbc)
    frame.set_momenta((masses[:, None] * state.velocities[r]).numpy())
    frame.calc = SinglePointCalculator(frame, energy=float(energy[r]), forces=forces[r].numpy())
    frame.info.update(step=state.step, time_fs=state.step * timestep, replica=r)
    return frame


def _resume(paths: list[Path], masses: torch.Tensor) -> ReplicaState:
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
