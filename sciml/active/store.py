"""``LabelStore``: every frame active learning sent to the oracle, labelled or failed, in two extxyz files.

- ``labelled.extxyz``: the oracle's energy (eV) and forces (eV/Å) with, in each frame's info, ``key`` (which
  candidate it was: ``seed-3``, ``round2-run0-step1840``), ``round``, ``uncertainty`` (the model's largest per-atom
  force uncertainty when it was picked, eV/Å; NaN for seed frames), ``reason`` and ``oracle``;
- ``failed.extxyz``: the frames the oracle could not label, with the same fields and ``error``.

Each frame is appended in one write and flushed to disk before the next oracle call, so a killed run loses at
most the frame being labelled; a half-written last frame (a kill during the write) is cut off when the store
is opened again and kept aside in ``<file>.partial``. The training data of every round is ``labelled.extxyz``.
"""

from __future__ import annotations

import math
from pathlib import Path

from ase import Atoms

from sciml.data.files import append_frame, read_complete_frames

LABELLED, FAILED = "labelled.extxyz", "failed.extxyz"


class LabelStore:
    """The store in ``directory`` (created when absent); reopening it continues where it ended."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.labelled_path, self.failed_path = self.directory / LABELLED, self.directory / FAILED
        self.labelled = read_complete_frames(self.labelled_path)
        self.failed = read_complete_frames(self.failed_path)

    @property
    def keys(self) -> set[str]:
        """The keys of every frame sent to the oracle, labelled or failed; none is sent again on resuming."""
        return {frame.info["key"] for frame in (*self.labelled, *self.failed)}

    def add(self, labelled: Atoms, key: str, round: int, uncertainty: float, reason: str, oracle: str) -> None:
        """Append an oracle-labelled frame (energy and forces in its calculator)."""
        labelled.info.update(key=key, round=round, uncertainty=_finite(uncertainty), reason=reason, oracle=oracle)
        append_frame(self.labelled_path, labelled)
        self.labelled.append(labelled)

    def add_failure(self, atoms: Atoms, key: str, round: int, uncertainty: float, reason: str, error: str) -> None:
        """Append a frame the oracle failed on, with the error."""
        failed = Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
        failed.info.update(key=key, round=round, uncertainty=_finite(uncertainty), reason=reason,
                           error=" ".join(str(error).split()))  # fmt: skip
        append_frame(self.failed_path, failed)
        self.failed.append(failed)

    def rounds(self) -> dict[int, int]:
        """``{round: frames labelled in it}`` (round 0: the seed set)."""
        counts: dict[int, int] = {}
        for frame in self.labelled:
            counts[int(frame.info["round"])] = counts.get(int(frame.info["round"]), 0) + 1
        return counts


def _finite(value: float) -> float:
    return float(value) if value is not None and math.isfinite(value) else float("nan")
