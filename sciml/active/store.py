"""``LabelStore``: every frame active learning sent to the oracle, labelled or failed, in two extxyz files.

- ``labelled.extxyz``: the oracle's energy (eV) and forces (eV/Å) with, in each frame's info, ``key`` (which
  candidate it was: ``seed-3``, ``round2-step1840``), ``round``, ``uncertainty`` (the model's largest per-atom
  force uncertainty when it was picked, eV/Å; NaN for seed frames), ``reason`` and ``oracle``;
- ``failed.extxyz``: the frames the oracle could not label, with the same fields and ``error``.

Each frame is appended in one write and flushed to disk before the next oracle call, so a killed run loses at
most the frame being labelled; a half-written last frame (a kill during the write) is cut off when the store
is opened again and kept aside in ``<file>.partial``. The training data of every round is ``labelled.extxyz``.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import ase.io
from ase import Atoms

LABELLED, FAILED = "labelled.extxyz", "failed.extxyz"


class LabelStore:
    """The store in ``directory`` (created when absent); reopening it continues where it ended."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.labelled_path, self.failed_path = self.directory / LABELLED, self.directory / FAILED
        self.labelled = _read_complete(self.labelled_path)
        self.failed = _read_complete(self.failed_path)

    @property
    def keys(self) -> set[str]:
        """Keys of every frame sent to the oracle (labelled or failed): never sent again on resuming."""
        return {frame.info["key"] for frame in (*self.labelled, *self.failed)}

    def add(self, labelled: Atoms, key: str, round: int, uncertainty: float, reason: str, oracle: str) -> None:
        """Append an oracle-labelled frame (energy and forces in its calculator)."""
        labelled.info.update(key=key, round=round, uncertainty=_finite(uncertainty), reason=reason, oracle=oracle)
        _append(self.labelled_path, labelled)
        self.labelled.append(labelled)

    def add_failure(self, atoms: Atoms, key: str, round: int, uncertainty: float, reason: str, error: str) -> None:
        """Append a frame the oracle failed on, with the error."""
        failed = Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
        failed.info.update(key=key, round=round, uncertainty=_finite(uncertainty), reason=reason,
                           error=" ".join(str(error).split()))  # fmt: skip
        _append(self.failed_path, failed)
        self.failed.append(failed)

    def rounds(self) -> dict[int, int]:
        """``{round: frames labelled in it}`` (round 0: the seed set)."""
        counts: dict[int, int] = {}
        for frame in self.labelled:
            counts[int(frame.info["round"])] = counts.get(int(frame.info["round"]), 0) + 1
        return counts


def _finite(value: float) -> float:
    return float(value) if value is not None and math.isfinite(value) else float("nan")


def _append(path: Path, atoms: Atoms) -> None:
    text = io.StringIO()
    ase.io.write(text, atoms, format="extxyz")
    with open(path, "a") as handle:
        handle.write(text.getvalue())
        handle.flush()
        os.fsync(handle.fileno())


def _read_complete(path: Path) -> list[Atoms]:
    """The complete frames of ``path`` (none when absent); a broken tail is moved to ``<path>.partial``."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    lines = path.read_text().splitlines(keepends=True)
    frames, start = [], 0
    while start < len(lines):
        try:
            size = int(lines[start])
            block = lines[start : start + size + 2]
            if len(block) < size + 2:
                raise ValueError("truncated frame")
            frames.append(ase.io.read(io.StringIO("".join(block)), format="extxyz"))
        except Exception:
            with open(path.with_name(path.name + ".partial"), "a") as handle:
                handle.write("".join(lines[start:]))
            path.write_text("".join(lines[:start]))
            break
        start += size + 2
    return frames
