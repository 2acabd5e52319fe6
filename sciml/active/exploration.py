"""Exploration runs of active learning: ML Langevin MD with a temperature ramp, watching the uncertainty.

A round sends R runs (replicas) together through the MD engine (:func:`~sciml.md.engine.run_replicas`: BAOAB,
centre-of-mass motion removed, one batched model call per step for all of them; on a CPU a 20-atom molecule
leaves the model's arithmetic mostly idle, so R replicas cost little more than one); one run is R = 1 of the
same engine, with the same integrator.

The thermostat's temperature rises linearly from ``start_temperature`` to ``temperature`` over the first
``ramp_ps`` and stays there for ``hold_ps``. At every step the calculator's largest per-atom force
uncertainty (eV/Å) is read; the frames above ``threshold`` are candidates for the oracle. The run ends early
when the uncertainty has stayed above ``stop_factor * threshold`` (DP-GEN's upper trust level) for
``patience_fs``: the trajectory has left what the model knows for good, and continuing would only collect more
of the same. It also ends, that frame discarded, when the structure is no longer a molecule: two atoms
closer than ``min_distance`` or a covalent bond of the start (ASE's natural radii) stretched beyond
``max_stretch`` times its length (:class:`RunTracker`, one per replica; an ended replica leaves the batch and the
others go on). (Ending at the first frame above the upper level instead stops a young
model's runs at their first step, one label per round.) With ``uncertainty_bias`` tau > 0 the runs move on the
surface E - tau sigma_E (:class:`~sciml.uncertainty.biased.UncertaintyBiased`: drawn towards what the model does
not know, barriers and minor wells among it); the learning loop biases its rounds only, never the final model's
confirmation or calibration runs.
:func:`select_frames` then picks at most ``cap`` of the candidates, most uncertain first, at least
``spacing_fs`` apart in time, so that one excursion does not fill a round with near-copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from ase import Atoms
from ase.neighborlist import NeighborList, natural_cutoffs
from torch import nn

from sciml.calculators.replicas import BatchedPotential
from sciml.md import MDSettings, run_replicas, start_structures
from sciml.md.integrators import ReplicaState
from sciml.uncertainty.biased import UncertaintyBiased


@dataclass
class ExplorationSettings:
    """Temperatures in K, times in fs and ps, uncertainties in eV/Å, friction in 1/fs."""

    temperature: float = 500.0
    start_temperature: float = 100.0
    ramp_ps: float = 2.0
    hold_ps: float = 3.0
    timestep: float = 0.5
    friction: float = 0.01
    threshold: float = 0.15
    stop_factor: float = 3.0
    patience_fs: float = 50.0
    min_distance: float = 0.6
    max_stretch: float = 1.6
    cap: int = 50
    spacing_fs: float = 50.0
    replicas: int = 1
    uncertainty_bias: float = 0.0  # tau, standard deviations of the energy (module docstring)

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {self.replicas}")
        if not self.uncertainty_bias >= 0:
            raise ValueError(f"uncertainty_bias must be >= 0 (standard deviations), got {self.uncertainty_bias}")
        if not self.threshold > 0 or not self.stop_factor >= 1:
            raise ValueError(
                f"threshold must be > 0 eV/Å and stop_factor >= 1, got {self.threshold} and {self.stop_factor}"
            )
        if (
            self.ramp_ps < 0
            or self.hold_ps <= 0
            or self.timestep <= 0
            or self.cap < 1
            or self.spacing_fs < 0
            or self.patience_fs < 0
        ):
            raise ValueError("ramp_ps must be >= 0, hold_ps and timestep > 0, cap >= 1 and spacing_fs >= 0")

    @property
    def steps(self) -> int:
        return round((self.ramp_ps + self.hold_ps) * 1000 / self.timestep)

    def dynamics(self, seed: int = 0) -> MDSettings:
        """The MD of one batch of runs: Langevin with the ramp and hold of these settings (no records)."""
        return MDSettings("nvt-langevin", self.timestep, self.steps, self.temperature, seed, max(1, self.steps),
                          self.friction, start_temperature=self.start_temperature, ramp_ps=self.ramp_ps)  # fmt: skip

    def thermostat_temperature(self, step: int) -> float:
        """The set temperature (K) at ``step``."""
        return self.dynamics().thermostat_temperature(step)


@dataclass
class Candidate:
    """A frame of an exploration run whose largest per-atom force uncertainty exceeded the threshold."""

    step: int
    time_fs: float
    temperature: float  # the thermostat's, K
    uncertainty: float  # eV/Å
    atoms: Atoms
    run: int = 0  # the replica's index in a batch of runs (:func:`explore`)


@dataclass
class Exploration:
    """What an exploration run found: ``stopped`` when it ended early (above the upper level for the patience,
    or ``broken``: the structure fell apart)."""

    steps: int
    max_uncertainty: float
    candidates: list[Candidate] = field(default_factory=list)
    stopped: bool = False
    broken: bool = False  # ended because the structure broke apart (that frame is not a candidate)
    samples: list[Atoms] = field(default_factory=list)  # every ``sample_every`` steps at the target, when asked

    @property
    def below_threshold(self) -> bool:
        """The whole run (its planned length) stayed at or below the threshold."""
        return not self.candidates and not self.stopped


def explore(
    starts: Atoms | Sequence[Atoms],
    potential,
    settings: ExplorationSettings,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    sample_every: int = 0,
    replicas: int | None = None,
) -> list[Exploration]:
    """Run ``replicas`` (default ``settings.replicas``) copies of the ramped Langevin MD of ``settings`` together,
    replica r from ``starts[r % len(starts)]`` with its own velocities (drawn at the start temperature from
    ``seed``).

    Args:
        potential: a trained model with an uncertainty estimate (eval mode; run in float32 through a
            :class:`~sciml.calculators.replicas.BatchedPotential`, biased by ``settings.uncertainty_bias``), or any
            potential of the engine with
            ``forces_uncertainty()`` (e.g. a :class:`~sciml.calculators.calculator_potential.CalculatorPotential`
            around an ASE calculator that reports ``forces_uncertainty``).
        on_step: ``on_step(step, uncertainty)`` after every step, with the largest per-atom force uncertainty
            (eV/Å) over the replicas still running (a progress display).
        sample_every: > 0: every that many steps after the ramp, each replica's frame is kept in its ``samples``
            (``info["uncertainty"]``: its largest per-atom force uncertainty, ``info["time_fs"]``), uniform in
            time at the target temperature.

    Returns:
        One :class:`Exploration` per replica, in order; its candidates carry ``run`` = the replica's index.
    """
    starts = start_structures(starts)
    replicas = settings.replicas if replicas is None else replicas
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    first = starts[0]
    if isinstance(potential, nn.Module):
        # eager: a round's model explores once, for fewer steps than its ahead-of-time program repays (building it
        # takes ~90 s on 2 cores and saves ~16 ms a step on aspirin: ~5,600 steps to break even)
        if settings.uncertainty_bias:
            potential = UncertaintyBiased(potential, settings.uncertainty_bias)
        potential = BatchedPotential(potential, first.numbers, first.cell[:], first.pbc, compile="eager")
    origins = [starts[r % len(starts)] for r in range(replicas)]
    runs = [RunTracker(start, settings, sample_every, run=r) for r, start in enumerate(origins)]

    def rules(state: ReplicaState, largest: np.ndarray) -> list[int]:
        if on_step is not None:
            on_step(state.step, float(largest.max()))
        kept = []
        for row, replica in enumerate(state.replicas):
            atoms = Atoms(first.numbers, state.positions[row].cpu().numpy(), cell=first.cell, pbc=first.pbc)
            if not runs[replica].ended_after(state.step, atoms, float(largest[row])):
                kept.append(row)
        return kept

    run_replicas(potential, starts, replicas, settings.dynamics(seed), on_step=rules, watch_uncertainty=True)
    return [run.exploration for run in runs]


class RunTracker:
    """The rules of one exploration run, applied step by step (each replica of :func:`explore` has one): the
    peak uncertainty, the
    candidates above the threshold, the samples, the upper level's patience and the intact structure.
    ``start``: the run's start structure (its covalent bonds); ``run``: the replica's index in its batch."""

    def __init__(self, start: Atoms, settings: ExplorationSettings, sample_every: int = 0, run: int = 0) -> None:
        self.settings, self.sample_every, self.run = settings, sample_every, run
        self.bonds = covalent_bonds(start)
        self.lengths = start.get_distances(self.bonds[:, 0], self.bonds[:, 1]) if len(self.bonds) else np.zeros(0)
        self.ramp_steps = settings.ramp_ps * 1000 / settings.timestep
        self.schedule = settings.dynamics()  # the thermostat's set temperature at each step
        self.exploration = Exploration(0, 0.0)
        self.above_since: int | None = None

    def ended_after(self, step: int, atoms: Atoms, value: float) -> bool:
        """Record ``step`` (``atoms`` after it, its largest per-atom force uncertainty ``value`` eV/Å); True when
        the run ends there: the structure broke (that frame is not a candidate) or the uncertainty stayed above
        the upper level for the patience."""
        settings, found = self.settings, self.exploration
        found.steps = step
        if not intact(atoms, self.bonds, self.lengths, settings):
            found.stopped = found.broken = True
            return True
        found.max_uncertainty = max(found.max_uncertainty, value) if np.isfinite(value) else np.inf
        if self.sample_every and step > self.ramp_steps and step % self.sample_every == 0:
            found.samples.append(bare_copy(atoms, uncertainty=value, time_fs=step * settings.timestep))
        if value > settings.threshold or not np.isfinite(value):
            temperature = self.schedule.thermostat_temperature(step)
            found.candidates.append(Candidate(step, step * settings.timestep, temperature, value, bare_copy(atoms),
                                              self.run))  # fmt: skip
        if value <= settings.stop_factor * settings.threshold:
            self.above_since = None
        elif self.above_since is None:
            self.above_since = step
        if self.above_since is not None and (step - self.above_since) * settings.timestep >= settings.patience_fs:
            found.stopped = True
            return True
        return False


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` counts that differ by at most one, the first ones taking the remainder."""
    return [total // parts + (index < total % parts) for index in range(parts)]


def bare_copy(atoms: Atoms, **info) -> Atoms:
    """``atoms`` without calculator and constraints (a frame for the oracle), ``info`` added."""
    frame = atoms.copy()
    frame.calc = None
    frame.set_constraint()
    frame.info.update(info)
    return frame


def covalent_bonds(atoms: Atoms) -> np.ndarray:
    """(B, 2) atom pairs closer than the sum of ASE's natural (covalent) radii x 1.2, each once."""
    cutoffs = natural_cutoffs(atoms, mult=1.2)
    neighbours = NeighborList(cutoffs, self_interaction=False, bothways=False, skin=0.0)
    neighbours.update(atoms)
    pairs = [(i, int(j)) for i in range(len(atoms)) for j in neighbours.get_neighbors(i)[0]]
    return np.array(pairs, dtype=int).reshape(-1, 2)


def intact(atoms: Atoms, bonds: np.ndarray, lengths: np.ndarray, settings: ExplorationSettings) -> bool:
    """No two atoms closer than ``min_distance`` and no bond of the start beyond ``max_stretch`` its length."""
    if not np.all(np.isfinite(atoms.positions)):
        return False
    if len(atoms) > 1:
        distances = atoms.get_all_distances(mic=atoms.pbc.any())
        if distances[np.triu_indices(len(atoms), 1)].min() < settings.min_distance:
            return False
    if len(bonds) and not atoms.pbc.any():
        stretched = atoms.get_distances(bonds[:, 0], bonds[:, 1]) > settings.max_stretch * lengths
        if np.any(stretched):
            return False
    return True


def select_frames(candidates: list[Candidate], cap: int, spacing_fs: float) -> list[Candidate]:
    """At most ``cap`` candidates, most uncertain first, each at least ``spacing_fs`` from those already picked in
    the same run; returned in time order (by run, then step)."""
    picked: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: -c.uncertainty if np.isfinite(c.uncertainty) else -np.inf):
        if len(picked) == cap:
            break
        if all(other.run != candidate.run or abs(candidate.time_fs - other.time_fs) >= spacing_fs for other in picked):
            picked.append(candidate)
    return sorted(picked, key=lambda c: (c.run, c.step))
