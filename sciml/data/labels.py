"""Validate one ASE frame and pull out its labels as numpy arrays.

Units: positions and cell in Å, energy in eV, forces in eV/Å, stress in eV/Å^3 (ASE sign convention,
returned as a 3x3 matrix whether the source stores Voigt-6 or 3x3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ase
import numpy as np
from ase.data import atomic_numbers, chemical_symbols
from ase.stress import voigt_6_to_full_3x3_stress

from sciml.data.errors import DataError, where

LABELS = ("energy", "forces", "stress")


@dataclass(frozen=True)
class LabelKeys:
    """Where labels live. ``None`` reads the ASE calculator results, then the same-named info/arrays key.

    Attributes:
        energy: key in ``atoms.info`` holding the energy (eV).
        forces: key in ``atoms.arrays`` holding the forces (eV/Å).
        stress: key in ``atoms.info`` holding the stress (eV/Å^3, Voigt 6 or 3x3).
    """

    energy: str | None = None
    forces: str | None = None
    stress: str | None = None


def read_frame(
    atoms: ase.Atoms,
    source: str,
    frame: int,
    species: Sequence[int] | None = None,
    keys: LabelKeys = LabelKeys(),
    required: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """Check a frame and return its arrays.

    Returns:
        ``positions (N,3)``, ``numbers (N,)``, ``cell (3,3)``, ``pbc (3,)``, ``config_type`` (str, when
        ``atoms.info`` has it) and whichever of ``energy ()``, ``forces (N,3)``, ``stress (3,3)`` exist. Labels
        in ``required`` must exist.

    Raises:
        DataError: naming the file, frame and field of the first problem found.
    """
    n = len(atoms)
    if n == 0:
        raise DataError(f"{where(source, frame)}: the frame has zero atoms")
    numbers = atoms.get_atomic_numbers()
    if species is not None:
        unknown = sorted(set(numbers.tolist()) - set(species))
        if unknown:
            symbols = [chemical_symbols[z] for z in unknown]
            raise DataError(
                f"{where(source, frame, 'numbers')}: element(s) {symbols} not in the configured species "
                f"{[chemical_symbols[z] for z in species]}"
            )
    record = {
        "positions": _finite(atoms.get_positions(), source, frame, "positions"),
        "numbers": numbers.astype(np.int64),
        "cell": _finite(np.asarray(atoms.get_cell()[:], dtype=np.float64), source, frame, "cell"),
        "pbc": np.asarray(atoms.get_pbc(), dtype=bool),
    }
    if "config_type" in atoms.info:  # MACE's convention (e.g. "IsolatedAtom"); error tables group by it
        record["config_type"] = str(atoms.info["config_type"])
    for label in LABELS:
        value = _lookup(atoms, label, getattr(keys, label))
        if value is None:
            if label in required:
                raise DataError(f"{where(source, frame, label)}: label is missing but training needs it")
            continue
        record[label] = _shape_label(label, value, n, source, frame)
    return record


def _lookup(atoms: ase.Atoms, label: str, key: str | None) -> np.ndarray | None:
    if key is None:
        results = atoms.calc.results if atoms.calc is not None else {}
        if label in results:
            return np.asarray(results[label], dtype=np.float64)
        key = label
    store = atoms.arrays if label == "forces" else atoms.info
    return np.asarray(store[key], dtype=np.float64) if key in store else None


def _shape_label(label: str, value: np.ndarray, n: int, source: str, frame: int) -> np.ndarray:
    if label == "energy":
        if value.size != 1:
            raise DataError(f"{where(source, frame, label)}: expected one number, got shape {value.shape}")
        value = value.reshape(())
    elif label == "forces" and value.shape != (n, 3):
        raise DataError(f"{where(source, frame, label)}: expected shape ({n}, 3), got {value.shape}")
    elif label == "stress":
        if value.shape == (6,):
            value = voigt_6_to_full_3x3_stress(value)
        elif value.shape != (3, 3):
            raise DataError(f"{where(source, frame, label)}: expected Voigt (6,) or (3, 3), got {value.shape}")
    return _finite(value, source, frame, label)


def _finite(value: np.ndarray, source: str, frame: int, field: str) -> np.ndarray:
    if not np.all(np.isfinite(value)):
        raise DataError(f"{where(source, frame, field)}: contains NaN or inf")
    return value


def atomic_numbers_of(elements: Sequence[str | int]) -> list[int]:
    """Element symbols or atomic numbers -> atomic numbers (``data.species``)."""
    numbers = []
    for value in elements:
        if not isinstance(value, int) and value not in atomic_numbers:
            raise DataError(f"unknown element symbol '{value}' in data.species")
        numbers.append(value if isinstance(value, int) else atomic_numbers[value])
    return numbers
