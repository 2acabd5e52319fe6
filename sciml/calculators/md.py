"""Molecular dynamics with ASE (NVE velocity Verlet or Langevin) and the NVE energy-drift measure, for any
ASE calculator (``scripts/run_md.py`` runs it with a sciml checkpoint)."""

from __future__ import annotations

import time

import numpy as np
from ase import units
from ase.io import Trajectory
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet

from sciml.data.files import AtomicOutput


def run_md(
    atoms,
    calculator,
    ensemble: str,
    timestep_fs: float,
    steps: int,
    temperature: float,
    seed: int = 0,
    out: str | None = None,
    interval: int = 10,
    overwrite: bool = False,
) -> dict:
    """Run MD on ``atoms`` (modified in place). Returns steps_per_second, times_ps, total energies (eV).

    ``out``: an ASE trajectory of every ``interval``-th step, written atomically (it appears when the run
    ends; an interrupted run leaves none); an existing file is refused unless ``overwrite``."""
    output = AtomicOutput(out, overwrite, "--overwrite") if out else None
    atoms.calc = calculator
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    if not atoms.pbc.any():
        ZeroRotation(atoms)
    if ensemble == "nve":
        dynamics = VelocityVerlet(atoms, timestep_fs * units.fs)
    elif ensemble == "langevin":
        dynamics = Langevin(
            atoms,
            timestep_fs * units.fs,
            temperature_K=temperature,
            friction=0.01 / units.fs,
            rng=np.random.default_rng(seed + 1),
        )
    else:
        raise ValueError(f"unknown ensemble '{ensemble}'; choose nve or langevin")
    times, energies = [], []

    def record() -> None:
        times.append(dynamics.get_time() / (1000 * units.fs))
        energies.append(atoms.get_total_energy())

    dynamics.attach(record, interval=interval)
    start = time.perf_counter()
    if output is None:
        dynamics.run(steps)
    else:
        with output, Trajectory(output.temporary, "w", atoms) as writer:  # closed, then committed or discarded
            dynamics.attach(writer.write, interval=interval)
            dynamics.run(steps)
    elapsed = time.perf_counter() - start
    return {"steps_per_second": steps / elapsed, "times_ps": np.array(times), "total_energy": np.array(energies)}


def energy_drift(times_ps: np.ndarray, total_energy: np.ndarray, n_atoms: int) -> tuple[float, float]:
    """(slope of total energy per atom in eV/atom/ps, largest excursion from the start in eV/atom)."""
    per_atom = total_energy / n_atoms
    return float(np.polyfit(times_ps, per_atom, 1)[0]), float(np.abs(per_atom - per_atom[0]).max())
