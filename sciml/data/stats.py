"""Statistics of the training split that the model stores: per-element energy reference, force RMS.

Reference energies (``AtomsDataModule(energy_reference=...)``): ``"least_squares"`` fits them to the training
split; a mapping ``{element: eV}`` gives them; ``"isolated_atoms"`` takes them from single-atom frames whose
``config_type`` is ``"IsolatedAtom"`` (MACE's convention; such frames are never in a split).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from ase.data import atomic_numbers, chemical_symbols

from sciml.data.errors import DataError

ISOLATED_ATOM = "IsolatedAtom"
REFERENCE_MODES = ("least_squares", "isolated_atoms")


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
    return energy_reference_from_counts(counts, energies)


def energy_reference_from_counts(counts: np.ndarray, energies: Sequence[float]) -> np.ndarray:
    """The same fit from element counts: ``counts (F, S)`` atoms of each species per frame, ``energies (F,)``
    in eV -> ``(S,)`` minimum-norm least-squares energies per element."""
    solution, *_ = np.linalg.lstsq(counts, np.asarray(energies, dtype=float), rcond=None)
    return solution


def force_rms(forces: Sequence[np.ndarray]) -> float:
    """Root mean square of all force components (eV/Å); 1.0 when there are none."""
    if not forces:
        return 1.0
    values = np.concatenate([f.reshape(-1) for f in forces])
    rms = float(np.sqrt(np.mean(values**2)))
    return rms if rms > 0 else 1.0


def check_reference(reference: str | Mapping) -> str | dict[int, float]:
    """A reference mode, or a mapping with element symbols or atomic numbers as keys -> {Z: eV}."""
    if isinstance(reference, str):
        if reference not in REFERENCE_MODES:
            raise DataError(
                f"energy_reference must be one of {REFERENCE_MODES} or a mapping {{element: eV}}, got '{reference}'"
            )
        return reference
    values = {}
    for key, value in dict(reference).items():
        number = key if isinstance(key, int) else atomic_numbers.get(str(key))
        if number is None:
            raise DataError(f"energy_reference: unknown element '{key}'")
        values[int(number)] = float(value)
    return values


def mapped_reference(values: Mapping[int, float], species: Sequence[int], what: str) -> list[float]:
    """Per-element energies aligned with ``species``; ``what`` names the source in the error."""
    missing = [chemical_symbols[z] for z in species if z not in values]
    if missing:
        raise DataError(f"energy_reference: {what}: no energy for {missing}")
    return [values[z] for z in species]


def isolated_atom_energies(records: Sequence[tuple[str, int, dict]]) -> dict[int, float]:
    """{Z: energy} from ``(source, frame, record)`` triples of single-atom ``IsolatedAtom`` frames."""
    energies = {}
    for source, frame, record in records:
        if len(record["numbers"]) != 1 or "energy" not in record:
            raise DataError(
                f"file '{source}', frame {frame}: a config_type '{ISOLATED_ATOM}' frame must hold one atom "
                f"and its energy (it has {len(record['numbers'])} atoms)"
            )
        energies[int(record["numbers"][0])] = float(record["energy"])
    return energies
