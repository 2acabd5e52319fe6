"""Statistics of the training split that the model stores: per-element energy reference, force RMS."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def energy_reference(numbers: Sequence[np.ndarray], energies: Sequence[float], species: Sequence[int]) -> np.ndarray:
    """Per-element energies e_z (eV) from the least-squares fit E ≈ sum_atoms e_z.

    With one composition only, the fit is rank deficient and ``lstsq`` gives the minimum-norm solution
    (it still reproduces the mean energy of that composition exactly).

    Returns:
        (len(species),) array aligned with ``species``.
    """
    column = {z: k for k, z in enumerate(species)}
    counts = np.zeros((len(energies), len(species)))
    for row, z in enumerate(numbers):
        np.add.at(counts[row], [column[int(v)] for v in z], 1.0)
    solution, *_ = np.linalg.lstsq(counts, np.asarray(energies, dtype=float), rcond=None)
    return solution


def force_rms(forces: Sequence[np.ndarray]) -> float:
    """Root mean square of all force components (eV/Å); 1.0 when there are none."""
    if not forces:
        return 1.0
    values = np.concatenate([f.reshape(-1) for f in forces])
    rms = float(np.sqrt(np.mean(values**2)))
    return rms if rms > 0 else 1.0
