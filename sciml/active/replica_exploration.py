"""Exploration with R replicas advanced together: one batched model call per MD step for all of them.

On a CPU a molecule of 20 atoms leaves the model's arithmetic mostly idle: 8 replicas of aspirin in one call
give 5.7x the replica-steps per second of one ASE run (``docs/benchmarks/replicas.md``). So a round can send
R short runs where :func:`~sciml.active.exploration.explore` sends one long one, and see R independent
stretches of the target temperature in about the time of two.

Each replica follows :func:`~sciml.active.exploration.explore`'s rules (the same
:class:`~sciml.active.exploration.RunTracker`): the ramped thermostat, candidates above the threshold, the
upper level's patience, the intact structure. The integrator is the replica MD's BAOAB Langevin with the
centre-of-mass motion removed (:func:`~sciml.calculators.replica_md.integrate_step`), the thermostat's
temperature set at every step. A replica whose run ends leaves the batch; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from ase import Atoms, units
from torch import nn

from sciml.active.exploration import Exploration, ExplorationSettings, RunTracker
from sciml.calculators.replica_md import ReplicaState, integrate_step, maxwell_boltzmann, start_structures
from sciml.calculators.replicas import BatchedPotential


def explore_replicas(
    starts: Atoms | Sequence[Atoms],
    model: nn.Module,
    settings: ExplorationSettings,
    replicas: int,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    sample_every: int = 0,
) -> list[Exploration]:
    """Run ``replicas`` copies of the ramped Langevin MD of ``settings`` with ``model`` (eval mode, with an
    uncertainty estimate) in float32, replica r from ``starts[r % len(starts)]`` with its own velocities
    (drawn at the start temperature from ``seed``). ``on_step(step, uncertainty)`` gets the largest per-atom
    force uncertainty (eV/Å) over the replicas still running; ``sample_every`` as in
    :func:`~sciml.active.exploration.explore`. Returns one :class:`~sciml.active.exploration.Exploration` per
    replica, in order; its candidates carry ``run`` = the replica's index."""
    starts = start_structures(starts)
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    first = starts[0]
    origins = [starts[r % len(starts)] for r in range(replicas)]
    masses = torch.tensor(first.get_masses(), dtype=torch.float64)
    potential = BatchedPotential(model, first.numbers, first.cell[:], first.pbc)
    positions = torch.tensor(np.stack([start.positions for start in origins]), dtype=torch.float64)
    state = ReplicaState(positions, maxwell_boltzmann(replicas, masses, settings.start_temperature, seed))
    runs = [RunTracker(start, settings, sample_every, run=r) for r, start in enumerate(origins)]
    dt = settings.timestep * units.fs
    decay = float(np.exp(-settings.friction * settings.timestep))
    generator = torch.Generator().manual_seed(int(seed) * 1_000_003 + 1)
    running = list(range(replicas))  # the replicas still in the batch, in batch order
    _, forces = potential(state.positions)
    for step in range(1, settings.steps + 1):
        kT = units.kB * settings.thermostat_temperature(step)
        thermostat = (decay, torch.sqrt((1 - decay**2) * kT / masses)[None, :, None], generator)
        state, _, forces = integrate_step(state, forces, potential, dt, masses, thermostat)
        largest = potential.forces_uncertainty().max(dim=1).values.numpy()
        if on_step is not None:
            on_step(step, float(largest.max()))
        kept = []
        for index, replica in enumerate(running):
            atoms = Atoms(first.numbers, state.positions[index].numpy(), cell=first.cell, pbc=first.pbc)
            if not runs[replica].ended_after(step, atoms, float(largest[index])):
                kept.append(index)
        if not kept:
            break
        if len(kept) < len(running):  # the ended replicas leave the batch
            running = [running[index] for index in kept]
            state = ReplicaState(state.positions[kept], state.velocities[kept], state.step)
            forces = forces[kept]
            potential.keep(kept)
    return [run.exploration for run in runs]
