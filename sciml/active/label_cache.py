"""``LabelCache``: oracle labels on disk, keyed by the frame's geometry and the level of theory, so that a resumed
or repeated run (another directory, a benchmark run again) never pays for the same label twice.

The key is the SHA-256 of the oracle's name (its level: ``PySCF PBE/def2-SVP (density fitting)``), the atomic
numbers, the positions rounded to 1e-6 Å, the cell and the periodic flags. Each label is one ``<key>.npz`` file
(energy in eV, forces in eV/Å, the name), written to a temporary file and renamed: a killed run leaves no
half-written label. Labels of other levels never match.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

DECIMALS = 6  # positions rounded to 1e-6 Å in the key


class LabelCache:
    """The cache in ``directory`` (created when absent; shared by runs and processes)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def key(self, atoms: Atoms, level: str) -> str:
        """The hex key of ``atoms`` at ``level``."""
        digest = hashlib.sha256(level.encode())
        digest.update(np.ascontiguousarray(atoms.numbers, dtype=np.int64).tobytes())
        positions = np.round(np.asarray(atoms.positions, dtype=np.float64), DECIMALS) + 0.0  # -0.0 -> 0.0
        digest.update(positions.tobytes())
        digest.update(np.round(np.asarray(atoms.cell.array, dtype=np.float64), DECIMALS).tobytes())
        digest.update(np.asarray(atoms.pbc, dtype=bool).tobytes())
        return digest.hexdigest()

    def path(self, atoms: Atoms, level: str) -> Path:
        return self.directory / f"{self.key(atoms, level)}.npz"

    def read(self, atoms: Atoms, level: str) -> Atoms | None:
        """A copy of ``atoms`` with the cached energy and forces at ``level``, or ``None``; a file that does not
        read is an error naming it."""
        path = self.path(atoms, level)
        if not path.exists():
            return None
        try:
            with np.load(path) as stored:
                energy, forces = float(stored["energy"]), np.array(stored["forces"])
        except Exception as error:
            raise ValueError(f"label cache file '{path}' does not read ({error}); delete it to label again") from error
        labelled = atoms.copy()
        labelled.calc = SinglePointCalculator(labelled, energy=energy, forces=forces)
        return labelled

    def write(self, labelled: Atoms, level: str) -> Path:
        """Store the energy (eV) and forces (eV/Å) of ``labelled`` at ``level``; returns the file."""
        path = self.path(labelled, level)
        temporary = path.with_suffix(".partial.npz")
        np.savez(temporary, energy=labelled.get_potential_energy(), forces=labelled.get_forces(), level=level)
        temporary.replace(path)
        return path

    def __len__(self) -> int:
        return sum(1 for path in self.directory.glob("*.npz") if not path.name.endswith(".partial.npz"))
