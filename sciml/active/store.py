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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ase import Atoms

from sciml.active.picks import Pick
from sciml.data.files import append_frame, read_complete_frames

LABELLED, FAILED = "labelled.extxyz", "failed.extxyz"


@dataclass(frozen=True)
class LabelRecord:
    """Why a frame of the store was sent to the oracle and what came of it (in the file: the frame's info).

    Attributes:
        key: which candidate it was (``seed-3``, ``round2-run0-step1840``); sent to the oracle once.
        round: the round that picked it (0: the seed set).
        uncertainty: the model's largest per-atom force uncertainty when it was picked (eV/Å; NaN for seeds).
        reason: why it was picked.
        outcome: the oracle's name (labelled) or its error (failed).
    """

    key: str
    round: int
    uncertainty: float
    reason: str
    outcome: str

    @classmethod
    def read(cls, frame: Atoms, outcome_key: str, path: Path, index: int) -> LabelRecord:
        """The record in ``frame.info`` (frame ``index`` of ``path``); an error names a missing field."""
        info = frame.info
        missing = [key for key in ("key", "round", "reason", outcome_key) if key not in info]
        if missing:
            raise ValueError(f"'{path}' frame {index} lacks the store's fields {missing}")
        return cls(str(info["key"]), int(info["round"]), _finite(info.get("uncertainty")), str(info["reason"]),
                   str(info[outcome_key]))  # fmt: skip

    def info(self, outcome_key: str) -> dict:
        return {"key": self.key, "round": self.round, "uncertainty": self.uncertainty, "reason": self.reason,
                outcome_key: self.outcome}  # fmt: skip


class LabelStore:
    """The store in ``directory`` (created when absent); reopening it continues where it ended.

    ``labelled`` and ``failed`` are the frames in file order, ``labelled_records`` and ``failed_records``
    their :class:`~sciml.active.store.LabelRecord` (same order), ``keys`` the keys of every frame sent to the
    oracle, labelled or failed (none is sent again on resuming)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.labelled_path, self.failed_path = self.directory / LABELLED, self.directory / FAILED
        self.labelled = read_complete_frames(self.labelled_path)
        self.failed = read_complete_frames(self.failed_path)
        self.labelled_records = _records(self.labelled, "oracle", self.labelled_path)
        self.failed_records = _records(self.failed, "error", self.failed_path)
        self.keys = {record.key for record in (*self.labelled_records, *self.failed_records)}

    def add(self, labelled: Atoms, pick: Pick, round: int, oracle: str) -> None:
        """Append ``pick``'s oracle-labelled frame ``labelled`` (energy and forces in its calculator)."""
        record = LabelRecord(pick.key, round, _finite(pick.uncertainty), pick.reason, oracle)
        labelled.info.update(record.info("oracle"))
        append_frame(self.labelled_path, labelled)
        self.labelled.append(labelled)
        self.labelled_records.append(record)
        self.keys.add(record.key)

    def add_failure(self, pick: Pick, round: int, error: str) -> None:
        """Append ``pick``, whose frame the oracle failed on, with the error."""
        atoms = pick.atoms
        record = LabelRecord(pick.key, round, _finite(pick.uncertainty), pick.reason, " ".join(str(error).split()))
        failed = Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
        failed.info.update(record.info("error"))
        append_frame(self.failed_path, failed)
        self.failed.append(failed)
        self.failed_records.append(record)
        self.keys.add(record.key)

    def labelled_with(self, keys: Iterable[str]) -> list[Atoms]:
        """The labelled frames of ``keys`` (in store order)."""
        wanted = set(keys)
        pairs = zip(self.labelled, self.labelled_records, strict=True)
        return [frame for frame, record in pairs if record.key in wanted]

    def rounds(self) -> dict[int, int]:
        """``{round: frames labelled in it}`` (round 0: the seed set)."""
        counts: dict[int, int] = {}
        for record in self.labelled_records:
            counts[record.round] = counts.get(record.round, 0) + 1
        return counts


def _records(frames: list[Atoms], outcome_key: str, path: Path) -> list[LabelRecord]:
    return [LabelRecord.read(frame, outcome_key, path, index) for index, frame in enumerate(frames)]


def _finite(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(float(value)) else float("nan")
