"""Molecular dynamics: one settings type, one engine for R >= 1 replicas, and the ASE-driven path.

- :class:`MDSettings` (:mod:`sciml.md.settings`): what a run does; every MD path of sciml takes it.
- :func:`run_replicas` (:mod:`sciml.md.engine`): the engine, BAOAB Langevin or velocity Verlet for R >= 1
  replicas in one batched potential call per step (:mod:`sciml.md.integrators`), with trajectories, resume,
  a thermostat schedule and the potential's uncertainty watched.
- :func:`run_ase_md` (:mod:`sciml.md.ase_driver`): ASE's integrators (and ``npt``) for any ASE calculator.
"""

from sciml.md.ase_driver import run_ase_md
from sciml.md.drift import energy_drift
from sciml.md.engine import run_replicas, start_structures
from sciml.md.integrators import ReplicaState
from sciml.md.settings import MDSettings

__all__ = [
    "MDSettings",
    "ReplicaState",
    "energy_drift",
    "run_ase_md",
    "run_replicas",
    "start_structures",
]
