"""``MemoryFrames``: trajectory files read whole into validated frame records, split in memory.

The default frame source of :class:`~sciml.data.atoms_datamodule.AtomsDataModule` (small and medium data). For
data larger than memory, :class:`~sciml.data.frame_store.FrameStore` offers the same interface from a prepared file.
Both give ``sources``, ``records[trajectory][t]`` (see :func:`~sciml.data.labels.read_frame`), ``species``,
``segments`` (per split), ``split_record``, ``reference_energies(reference)`` and ``force_rms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from sciml.data.labels import LabelKeys, read_frame
from sciml.data.readers import read_trajectories
from sciml.data.splits import Segment, check_lagtime, frame_index, split_segments
from sciml.data.stats import (
    ISOLATED_ATOM,
    energy_reference,
    force_rms,
    isolated_atom_energies,
    mapped_reference,
)

Paths = str | list[str] | None


class MemoryFrames:
    """Validated frames of ``paths`` (dealt to splits) or of explicit ``{train, val, test}`` paths.

    Args:
        paths: the files dealt by ``split``, or ``explicit``: the files per split (the data module checks that
            exactly one is given).
        species: atomic numbers the model knows, or ``None`` for those in the data.
        keys: label keys; ``required``: the labels every (non-isolated-atom) frame must carry.
        lagtime: checked against every trajectory's length when given.
        split, seed, split_mode: how ``paths`` are dealt (:func:`~sciml.data.splits.split_segments`).
    """

    def __init__(
        self,
        paths: Paths,
        explicit: dict[str, Paths] | None,
        species: list[int] | None,
        keys: LabelKeys,
        required: Sequence[str],
        lagtime: int | None,
        split: Sequence[float],
        seed: int,
        split_mode: str,
    ) -> None:
        self.paths, self.explicit, self.keys, self.required = paths, explicit, keys, list(required)
        self.lagtime, self.split, self.seed, self.split_mode = lagtime, split, seed, split_mode
        groups = {"all": read_trajectories(paths)} if explicit is None else _read_groups(explicit)
        self.group_sizes = {name: len(group) for name, group in groups.items()}
        trajectories = [t for group in groups.values() for t in group]
        self.species = species or sorted({int(z) for t in trajectories for a in t.frames for z in a.numbers})
        records = [
            [
                read_frame(a, t.source, f, self.species, keys, [] if _is_isolated(a) else self.required)
                for f, a in enumerate(t.frames)
            ]
            for t in trajectories
        ]
        # isolated atoms are never in a split (MACE's convention); a trajectory may be left with no frames
        self.isolated_atoms = [
            (t.source, f, r)
            for t, frames in zip(trajectories, records, strict=True)
            for f, r in enumerate(frames)
            if r.get("config_type") == ISOLATED_ATOM
        ]
        self.records = [[r for r in frames if r.get("config_type") != ISOLATED_ATOM] for frames in records]
        self.sources = [t.source for t in trajectories]
        if lagtime is not None:
            check_lagtime([len(r) for r in self.records], lagtime, self.sources)

    @cached_property
    def segments(self) -> dict[str, list[Segment]]:
        if self.explicit is None:
            return split_segments([len(r) for r in self.records], self.split, self.seed, self.split_mode)
        segments, first = {}, 0
        for name, size in self.group_sizes.items():
            segments[name] = [Segment(first + k, 0, len(self.records[first + k])) for k in range(size)]
            first += size
        return segments

    @property
    def split_record(self) -> dict:
        """Which trajectory ranges went where, and the seed (enough to reproduce the split)."""
        return {
            "seed": self.seed,
            "mode": self.split_mode if self.explicit is None else "explicit files",
            **{
                name: [(self.sources[s.trajectory], s.start, s.stop) for s in segs]
                for name, segs in self.segments.items()
            },
        }

    def _train_frames(self) -> list[dict[str, np.ndarray]]:
        return [self.records[t][i] for t, i in frame_index(self.segments["train"]).tolist()]

    def reference_energies(self, reference: str | dict[int, float]) -> list[float]:
        """Per-element energies (eV) aligned with ``species``: a ``{Z: eV}`` mapping, ``"isolated_atoms"`` or
        ``"least_squares"`` (fitted to the training split)."""
        if isinstance(reference, dict):
            return mapped_reference(reference, self.species, "the mapping")
        if reference == "isolated_atoms":
            sources = sorted({source for source, _, _ in self.isolated_atoms}) or "no file"
            found = isolated_atom_energies(self.isolated_atoms)
            return mapped_reference(found, self.species, f"config_type '{ISOLATED_ATOM}' frames in {sources}")
        frames = [r for r in self._train_frames() if "energy" in r]
        if not frames:
            return [0.0] * len(self.species)
        fit = energy_reference([r["numbers"] for r in frames], [float(r["energy"]) for r in frames], self.species)
        return fit.tolist()

    @cached_property
    def force_rms(self) -> float:
        """RMS force component (eV/Å) on the training split."""
        return force_rms([r["forces"] for r in self._train_frames() if "forces" in r])


def _read_groups(explicit: dict[str, Paths]) -> dict[str, list]:
    return {name: read_trajectories(p) if p is not None else [] for name, p in explicit.items()}


def _is_isolated(atoms) -> bool:
    """An isolated-atom frame is reference data, not training data: it needs no force label."""
    return atoms.info.get("config_type") == ISOLATED_ATOM
