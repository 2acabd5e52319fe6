"""``MDSettings``: what a molecular-dynamics run does, the one settings type of every MD path in sciml.

``sciml md``, the replica engine (:func:`~sciml.md.engine.run_replicas`), exploration and calibration runs of
``sciml learn`` (:class:`~sciml.active.exploration.ExplorationSettings` makes one) and the sampling stage of
``sciml pipeline`` (:class:`~sciml.pipelines.kinetics.SamplingSettings` makes one) all run from it. Units: fs,
K, 1/fs, bar, eV/Å.
"""

from __future__ import annotations

from dataclasses import dataclass

ENSEMBLES = ("nve", "nvt-langevin", "npt")
ENGINE_ENSEMBLES = ("nve", "nvt-langevin")  # what the replica engine integrates; npt runs through ASE


@dataclass
class MDSettings:
    """One MD run.

    Args:
        ensemble: ``"nve"`` (velocity Verlet), ``"nvt-langevin"`` (BAOAB Langevin in the engine, ASE's Langevin
            on the ASE path) or ``"npt"`` (ASE's isotropic MTK barostat, ASE path only).
        timestep: fs. steps: steps to run. temperature: K, the initial velocities and the thermostat's target.
        seed: initial velocities and thermostat noise. interval: steps between records (trajectory frames,
            log lines, progress calls).
        friction: Langevin friction, 1/fs. pressure: bar (npt). tdamp, pdamp: npt thermostat and barostat times
            in fs (default 100 and 1000 time steps, ASE's advice).
        uncertainty_threshold: eV/Å; with a potential that reports a per-atom force uncertainty, the steps whose
            largest value exceeds it are flagged and, with ``stop_when_uncertain``, a replica stops there (its
            frame written).
        fix_com: zero centre-of-mass velocity and thermostat noise projected onto zero total momentum (3N - 3
            degrees of freedom: the exact canonical sampling of a free molecule).
        start_temperature, ramp_ps: a thermostat schedule: the set temperature rises linearly from
            ``start_temperature`` K (the initial velocities' temperature too) to ``temperature`` over the first
            ``ramp_ps``, then holds (None: no ramp).
    """

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
    uncertainty_threshold: float | None = None
    stop_when_uncertain: bool = False
    fix_com: bool = True
    start_temperature: float | None = None
    ramp_ps: float = 0.0

    def __post_init__(self) -> None:
        if self.ensemble not in ENSEMBLES:
            raise ValueError(f"unknown ensemble '{self.ensemble}'; choose one of {ENSEMBLES}")
        if self.timestep <= 0 or self.steps < 0 or self.interval < 1:
            raise ValueError("timestep must be > 0 fs, steps >= 0 and interval >= 1")
        if self.temperature < 0 or self.friction < 0 or self.ramp_ps < 0:
            raise ValueError("temperature, friction and ramp_ps must be >= 0")
        if self.uncertainty_threshold is not None and not self.uncertainty_threshold > 0:
            raise ValueError(f"uncertainty_threshold must be > 0 eV/Å, got {self.uncertainty_threshold}")
        if self.stop_when_uncertain and self.uncertainty_threshold is None:
            raise ValueError("stop_when_uncertain needs an uncertainty_threshold (eV/Å)")

    @property
    def thermostatted(self) -> bool:
        """Whether a thermostat acts (everything but ``nve``)."""
        return self.ensemble != "nve"

    @property
    def initial_temperature(self) -> float:
        """The temperature of the initial velocities in K (the ramp's start, if there is one)."""
        return self.temperature if self.start_temperature is None else self.start_temperature

    def thermostat_temperature(self, step: int) -> float:
        """The set temperature (K) at ``step`` (counted from the start of the schedule)."""
        ramp_steps = self.ramp_ps * 1000 / self.timestep
        if self.start_temperature is None or step >= ramp_steps:
            return self.temperature
        return self.start_temperature + (self.temperature - self.start_temperature) * step / ramp_steps
