"""The frames picked for the oracle, as files and as frames: written before the oracle sees them (so that a
killed run leaves either no file or the whole list), read back on resuming, made from exploration candidates
with their key and reason; and a given dataset's frames as labelled copies."""

from __future__ import annotations

from pathlib import Path

import ase.io
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active.exploration import Candidate


def write_picks(path: Path, frames: list[Atoms]) -> None:
    """Write the frames picked for the oracle to ``path`` (extxyz; empty when none) through a temporary file,
    so that a killed run leaves either no file or the whole list."""
    temporary = path.with_suffix(".partial")
    temporary.write_text("")
    if frames:
        ase.io.write(temporary, frames, format="extxyz")
    temporary.replace(path)


def read_picks(path: Path) -> list[Atoms]:
    """The frames :func:`write_picks` wrote to ``path``."""
    return ase.io.read(path, index=":") if path.stat().st_size else []


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


def candidate_frame(
    candidate: Candidate, prefix: str, run: int, stopped_run: bool, origin: int | None, note: str = ""
) -> Atoms:
    """``candidate``'s frame with its store key ``<prefix>-run<run>-step<s>``, its uncertainty and the reason it
    was picked (the start it ran from, whether it stopped its run, then ``note``)."""
    frame = candidate.atoms.copy()
    reason = (f"force uncertainty {candidate.uncertainty:.3f} eV/Å above the threshold at "
              f"{candidate.temperature:.0f} K, MD run {run} step {candidate.step}")  # fmt: skip
    if origin is not None:
        reason += f" from start {origin}"
    if stopped_run:
        reason += " (stopped the run)"
    frame.info.update(key=f"{prefix}-run{run}-step{candidate.step}", uncertainty=candidate.uncertainty,
                      reason=reason + note)  # fmt: skip
    return frame
