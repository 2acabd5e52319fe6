"""One exploration run of active learning: ML Langevin MD with a temperature ramp, watching the uncertainty.

The thermostat's temperature rises linearly from ``start_temperature`` to ``temperature`` over the first
``ramp_ps`` and stays there for ``hold_ps``. At every step the calculator's largest per-atom force
uncertainty (eV/Å) is read; the frames above ``threshold`` are candidates for the oracle. The run ends early
when the uncertainty has stayed above ``stop_factor * threshold`` (DP-GEN's upper trust level) for
``patience_fs``: the trajectory has left what the model knows for good, and continuing would only collect more
of the same. It also ends, that frame discarded, when the structure is no longer a molecule: two atoms
closer than ``min_distance`` or a covalent bond of the start (ASE's natural radii) stretched beyond
``max_stretch`` times its length. (Ending at the first frame above the upper level instead stops a young
model's runs at their first step, one label per round.)
:func:`select_frames` then picks at most ``cap`` of the candidates, most uncertain first, at least
``spacing_fs`` apart in time, so that one excursion does not fill a round with near-copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ase import Atoms, units
from ase.constraints import FixCom
from ase.md.langevin import Langevin
from ase.neighborlist import NeighborList, natural_cutoffs

from sciml.calculators.md import initial_velocities, largest_force_uncertainty


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

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {self.replicas}")
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

    def thermostat_temperature(self, step: int) -> float:
        """The set temperature (K) at ``step``."""
        ramp_steps = self.ramp_ps * 1000 / self.timestep
        if step >= ramp_steps:
            return self.temperature
        return self.start_temperature + (self.temperature - self.start_temperature) * step / ramp_steps


@dataclass
class Candidate:
    """A frame of an exploration run whose largest per-atom force uncertainty exceeded the threshold."""

    step: int
    time_fs: float
    temperature: float  # the thermostat's, K
    uncertainty: float  # eV/Å
    atoms: Atoms
    run: int = 0  # the replica's index in a batch of runs (:func:`~sciml.active.replica_exploration.explore_replicas`)


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
    atoms: Atoms,
    calculator,
    settings: ExplorationSettings,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    sample_every: int = 0,
) -> Exploration:
    """Run the ramped Langevin MD of ``settings`` from ``atoms`` (copied; velocities drawn at the start
    temperature) with ``calculator``, which must report ``forces_uncertainty``. ``on_step(step, uncertainty)``
    is called after every step (a progress display). ``sample_every`` > 0: every that many steps after the
    ramp, the frame is kept in ``samples`` (``info["uncertainty"]``: its largest per-atom force uncertainty,
    ``info["time_fs"]``), uniform in time at the target temperature."""
    atoms = atoms.copy()
    atoms.calc = calculator
    initial_velocities(atoms, settings.start_temperature, seed)
    atoms.set_constraint(FixCom())  # with fixcm=False: ASE's correct NVT sampling of a free molecule
    dynamics = Langevin(
        atoms, settings.timestep * units.fs, temperature_K=settings.start_temperature,
        friction=settings.friction / units.fs, fixcm=False, rng=np.random.default_rng(seed + 1),
    )  # fmt: skip
    run = RunTracker(atoms, settings, sample_every)
    atoms.get_forces()
    for step in range(1, settings.steps + 1):
        dynamics.set_temperature(temperature_K=settings.thermostat_temperature(step))
        dynamics.run(1)
        value = largest_force_uncertainty(calculator)
        if value is None:
            raise ValueError("exploration needs a calculator that reports forces_uncertainty")
        if on_step is not None:
            on_step(step, value)
        if run.ended_after(step, atoms, value):
            break
    return run.exploration


class RunTracker:
    """The rules of one exploration run, applied step by step (:func:`explore`; the replicas of
    :func:`~sciml.active.replica_exploration.explore_replicas` each have one): the peak uncertainty, the
    candidates above the threshold, the samples, the upper level's patience and the intact structure.
    ``start``: the run's start structure (its covalent bonds); ``run``: the replica's index in its batch."""

    def __init__(self, start: Atoms, settings: ExplorationSettings, sample_every: int = 0, run: int = 0) -> None:
        self.settings, self.sample_every, self.run = settings, sample_every, run
        self.bonds = covalent_bonds(start)
        self.lengths = start.get_distances(self.bonds[:, 0], self.bonds[:, 1]) if len(self.bonds) else np.zeros(0)
        self.ramp_steps = settings.ramp_ps * 1000 / settings.timestep
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
            found.candidates.append(Candidate(step, step * settings.timestep, settings.thermostat_temperature(step),
                                              value, bare_copy(atoms), self.run))  # fmt: skip
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
