"""Energy conservation of an NVE run."""

from __future__ import annotations

import numpy as np


def energy_drift(times_ps: np.ndarray, total_energy: np.ndarray, n_atoms: int) -> tuple[float, float]:
    """(slope of total energy per atom in eV/atom/ps, largest excursion from the start in eV/atom) of one run:
    ``times_ps`` (T,) and ``total_energy`` (T,) eV."""
    per_atom = np.asarray(total_energy) / n_atoms
    return float(np.polyfit(times_ps, per_atom, 1)[0]), float(np.abs(per_atom - per_atom[0]).max())
