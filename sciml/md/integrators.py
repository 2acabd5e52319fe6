"""The integrators of the replica engine, for R >= 1 replicas of one system in torch (float64; ASE's units
inside: Å, amu, eV, ASE time).

- NVT, BAOAB Langevin (Leimkuhler and Matthews, Appl. Math. Res. Express 2013, 34): half kick, half drift, the
  exact Ornstein-Uhlenbeck step v <- c v + sqrt((1 - c^2) kT / m) xi with c = exp(-gamma dt), half drift, new
  forces, half kick. Configurational averages exact for harmonic systems at any stable time step, errors
  O(dt^2) elsewhere.
- NVE, velocity Verlet.

Each replica draws its own noise from its own generator, seeded by ``(seed, replica, step)`` at every record:
replica r's trajectory does not depend on how many replicas run beside it, and a run resumed from a record
continues exactly as the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from ase import units

Potential = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class ReplicaState:
    """Positions (R, N, 3) Å and velocities (R, N, 3) Å per ASE time unit, float64, at ``step``; ``replicas``:
    the index of each row among the run's replicas (rows leave when their replica ends)."""

    positions: torch.Tensor
    velocities: torch.Tensor
    step: int = 0
    replicas: list[int] | None = None

    def __post_init__(self) -> None:
        if self.replicas is None:
            self.replicas = list(range(len(self.positions)))

    def keep(self, rows: Sequence[int]) -> ReplicaState:
        """The state of these rows only."""
        rows = list(rows)
        return ReplicaState(self.positions[rows], self.velocities[rows], self.step, [self.replicas[r] for r in rows])


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


def replica_generator(seed: int, replica: int, step: int) -> torch.Generator:
    """The noise generator of ``replica`` from ``step`` on (``step`` -1: its initial velocities)."""
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(replica)) * 1_000_033 + int(step) + 1)


def maxwell_boltzmann(
    replicas: Sequence[int], masses: torch.Tensor, temperature: float, seed: int, fix_com: bool = True
) -> torch.Tensor:
    """(R, N, 3) velocities drawn at ``temperature`` K for the replicas of these indices, each from its own
    generator (zero centre-of-mass velocity with ``fix_com``)."""
    noise = torch.stack([torch.randn((len(masses), 3), generator=replica_generator(seed, r, -1), dtype=torch.float64)
                         for r in replicas]).to(masses.device)  # fmt: skip
    velocities = noise * torch.sqrt(units.kB * temperature / masses)[None, :, None]
    return remove_com_velocity(velocities, masses) if fix_com else velocities


class LangevinNoise:
    """The thermostat of BAOAB: friction ``friction`` 1/fs, one generator per replica (module docstring)."""

    def __init__(self, friction: float, timestep: float, masses: torch.Tensor, seed: int) -> None:
        self.decay = float(np.exp(-friction * timestep))
        self.masses, self.seed = masses, seed
        self.generators: dict[int, torch.Generator] = {}

    def reseed(self, replicas: Sequence[int], step: int) -> None:
        """Fresh generators for these replicas from ``step`` on (at every record, so a resumed run continues)."""
        self.generators = {r: replica_generator(self.seed, r, step) for r in replicas}

    def kick(self, velocities: torch.Tensor, replicas: Sequence[int], temperature: float) -> torch.Tensor:
        """v <- c v + sqrt((1 - c^2) kT / m) xi at ``temperature`` K, xi from each replica's generator."""
        shape = velocities.shape[1:]
        noise = torch.stack([torch.randn(shape, generator=self.generators[r], dtype=torch.float64) for r in replicas])
        scale = torch.sqrt((1 - self.decay**2) * units.kB * temperature / self.masses)[None, :, None]
        return self.decay * velocities + scale * noise.to(velocities.device)


def integrate_step(
    state: ReplicaState,
    forces: torch.Tensor,
    potential: Potential,
    dt: float,
    masses: torch.Tensor,
    thermostat: Callable[[torch.Tensor], torch.Tensor] | None,
    fix_com: bool = True,
) -> tuple[ReplicaState, torch.Tensor, torch.Tensor]:
    """One step from ``state`` with its ``forces`` (R, N, 3) eV/Å: BAOAB Langevin when ``thermostat`` (the O
    step, velocities -> velocities) is given, velocity Verlet without; ``dt`` in ASE time units. Returns the new
    state, its energy (R,) eV and forces."""
    inverse_mass = (1.0 / masses)[None, :, None]
    velocities = state.velocities + 0.5 * dt * forces * inverse_mass
    positions = state.positions + (0.5 * dt if thermostat else dt) * velocities
    if thermostat:
        velocities = thermostat(velocities)
        if fix_com:
            velocities = remove_com_velocity(velocities, masses)
        positions = positions + 0.5 * dt * velocities
    energy, forces = potential(positions)
    velocities = velocities + 0.5 * dt * forces * inverse_mass
    return ReplicaState(positions, velocities, state.step + 1, state.replicas), energy, forces
