"""The frames picked for the oracle (:class:`Pick`), as files and in memory: written before the oracle sees
them (so that a killed run leaves either no file or the whole list), read back on resuming, made from
exploration candidates with their key and reason; a given dataset's frames as labelled copies; and frames
spread over a molecule's shapes (:func:`spread_frames`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ase.io
import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active.exploration import Candidate


@dataclass(frozen=True)
class Pick:
    """A frame for the oracle.

    Attributes:
        key: its store key (``seed-3``, ``round2-run0-step1840``): a key the store holds is not labelled again.
        atoms: the frame (positions in Å).
        uncertainty: the model's largest per-atom force uncertainty at the frame (eV/Å; NaN: none, a seed frame).
        reason: why it was picked (kept in the store).
    """

    key: str
    atoms: Atoms
    uncertainty: float
    reason: str


def write_picks(path: Path, picks: list[Pick]) -> None:
    """Write ``picks`` to ``path`` (extxyz, key, uncertainty and reason in each frame's info; empty when none)
    through a temporary file, so that a killed run leaves either no file or the whole list."""
    temporary = path.with_suffix(".partial")
    temporary.write_text("")
    frames = []
    for pick in picks:
        frame = pick.atoms.copy()
        frame.info.update(key=pick.key, uncertainty=pick.uncertainty, reason=pick.reason)
        frames.append(frame)
    if frames:
        ase.io.write(temporary, frames, format="extxyz")
    temporary.replace(path)


def read_picks(path: Path) -> list[Pick]:
    """The picks :func:`write_picks` wrote to ``path``."""
    frames = ase.io.read(path, index=":") if path.stat().st_size else []
    picks = []
    for index, frame in enumerate(frames):
        info = {key: frame.info.pop(key, None) for key in ("key", "uncertainty", "reason")}
        if info["key"] is None or info["reason"] is None:
            raise ValueError(f"'{path}' frame {index} lacks its key or reason: not a file of picks")
        uncertainty = math.nan if info["uncertainty"] is None else float(info["uncertainty"])
        picks.append(Pick(str(info["key"]), frame, uncertainty, str(info["reason"])))
    return picks


def labelled_copy(frame: Atoms, index: int) -> Atoms:
    """``frame`` with its energy (eV) and forces (eV/Å) as a single-point result; an error names a frame without."""
    try:
        energy, forces = frame.get_potential_energy(), frame.get_forces()
    except Exception as error:
        raise ValueError(f"dataset frame {index} carries no energy and forces (label it, or start from it with "
                         "--structure)") from error  # fmt: skip
    copy = Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)
    copy.calc = SinglePointCalculator(copy, energy=energy, forces=forces)
    return copy


def candidate_pick(
    candidate: Candidate, prefix: str, run: int, stopped_run: bool, origin: int | None, note: str = ""
) -> Pick:
    """``candidate`` picked for the oracle: its store key ``<prefix>-run<run>-step<s>``, its uncertainty and
    the reason it was picked (the start it ran from, whether it stopped its run, then ``note``)."""
    reason = (f"force uncertainty {candidate.uncertainty:.3f} eV/Å above the threshold at "
              f"{candidate.temperature:.0f} K, MD run {run} step {candidate.step}")  # fmt: skip
    if origin is not None:
        reason += f" from start {origin}"
    if stopped_run:
        reason += " (stopped the run)"
    return Pick(f"{prefix}-run{run}-step{candidate.step}", candidate.atoms.copy(), candidate.uncertainty, reason + note)


def spread_frames(frames: Sequence[Atoms], count: int) -> list[int]:
    """Indices of ``count`` frames of ``frames`` (one molecule) spread over their shapes: farthest-point
    sampling of the inverse interatomic distances (1/Å), starting from the lowest-energy frame when the frames
    carry energies, else the first."""
    if count >= len(frames):
        return list(range(len(frames)))
    upper = np.triu_indices(len(frames[0]), k=1)
    features = np.stack([1.0 / frame.get_all_distances()[upper] for frame in frames])
    try:
        first = int(np.argmin([frame.get_potential_energy() for frame in frames]))
    except RuntimeError:  # no calculator: no energies
        first = 0
    chosen = [first]
    distance = np.linalg.norm(features - features[first], axis=1)
    while len(chosen) < count:
        chosen.append(int(np.argmax(distance)))
        distance = np.minimum(distance, np.linalg.norm(features - features[chosen[-1]], axis=1))
    return chosen
