"""``AtomsDataModule``: ASE trajectories -> labelled frame graphs or time-lagged graph pairs."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import torch
from ase.data import atomic_numbers
from torch_geometric.loader import DataLoader

from sciml.data.datasets import FrameGraphs
from sciml.data.errors import DataError
from sciml.data.labels import LabelKeys, read_frame
from sciml.data.readers import read_trajectories
from sciml.data.split_datamodule import SplitDataModule
from sciml.data.splits import Segment, check_lagtime, check_split_mode, frame_index, pair_index, split_segments
from sciml.data.stats import (
    ISOLATED_ATOM,
    check_reference,
    energy_reference,
    force_rms,
    isolated_atom_energies,
    mapped_reference,
)


class AtomsDataModule(SplitDataModule):
    """Frames (``lagtime=None``) or pairs ``(frame t, frame t + lagtime)`` from ASE trajectory files.

    Args:
        paths: a ``.traj``/extxyz/``.db`` file, a folder of them, or a list of either, dealt to the splits by
            ``split``. Or, instead, ``train_paths`` / ``val_paths`` / ``test_paths``: explicit splits, each
            file whole in the split it is named for (the three files most datasets ship as).
        cutoff: neighbour-list radius (Å), linked into the model.
        lagtime: ``None`` for labelled frames; else the lag in frames, pairs never cross trajectories.
        species: elements the model knows (symbols or numbers); default: those in the data.
        labels: labels every frame must carry; default ``["energy", "forces"]`` for frames, none for pairs.
        split: (train, val, test) fractions, dealt by ``split_mode``.
        split_mode: ``"auto"`` (whole trajectories when there are several, else contiguous blocks),
            ``"trajectory"``, ``"contiguous"`` or ``"random"`` (seeded, frame by frame: for files of independent
            configurations; refused with ``lagtime``). See :mod:`sciml.data.splits`.
        seed: split seed, recorded in ``split_record`` and the checkpoint.
        batch_size / eval_batch_size: structures (or pairs) per batch for training / evaluation.
        energy_key, forces_key, stress_key: ``atoms.info``/``atoms.arrays`` keys; default: calculator results.
        predict_paths: files for ``sciml predict`` (every frame, in order, labels optional).
        neighbour_backend: ``"vesin"``, ``"torch"`` or ``"torch_cluster"``.
        energy_reference: per-element reference energies linked into the model: ``"least_squares"`` (fitted to
            the training split), a mapping ``{element: eV}``, or ``"isolated_atoms"`` (from the single-atom
            frames with ``config_type: IsolatedAtom``). Such frames are never in a split, whatever the mode
            (MACE's convention). See :mod:`sciml.data.stats`.
        dtype: ``"float32"`` or ``"float64"``: positions, cells and labels of the graphs (float64 for float64
            training, ``trainer.precision: 64-true``: labels such as total energies of hundreds of eV lose
            ~0.1 meV when stored in float32).
    """

    loader_class = DataLoader  # PyG's: batches graphs

    def __init__(
        self,
        paths: str | list[str] | None = None,
        cutoff: float = 5.0,
        lagtime: int | None = None,
        species: list[str | int] | None = None,
        labels: list[str] | None = None,
        split: tuple[float, float, float] = (0.8, 0.1, 0.1),
        seed: int = 0,
        batch_size: int = 8,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        energy_key: str | None = None,
        forces_key: str | None = None,
        stress_key: str | None = None,
        predict_paths: str | list[str] | None = None,
        neighbour_backend: str = "vesin",
        dtype: str = "float32",
        train_paths: str | list[str] | None = None,
        val_paths: str | list[str] | None = None,
        test_paths: str | list[str] | None = None,
        split_mode: str = "auto",
        energy_reference: str | dict[str, float] = "least_squares",
    ) -> None:
        super().__init__()
        explicit = {"train": train_paths, "val": val_paths, "test": test_paths}
        if paths is not None and any(v is not None for v in explicit.values()):
            raise DataError("give either data.paths (with split) or data.train_paths/val_paths/test_paths, not both")
        if paths is None and train_paths is None:
            raise DataError("data needs paths (dealt to the splits by split) or train_paths (explicit splits)")
        self.explicit = explicit if paths is None else None
        self.split_mode = check_split_mode(split_mode, lagtime)
        self.reference = check_reference(energy_reference)
        if dtype not in ("float32", "float64"):
            raise ValueError(f"data dtype must be 'float32' or 'float64', got '{dtype}'")
        self.dtype = getattr(torch, dtype)
        self.save_hyperparameters()
        self.paths, self.cutoff, self.lagtime, self.seed = paths, float(cutoff), lagtime, seed
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.num_workers, self.predict_paths, self.neighbour_backend = (
            num_workers,
            predict_paths,
            neighbour_backend,
        )
        self.keys = LabelKeys(energy_key, forces_key, stress_key)
        self.required = labels if labels is not None else (["energy", "forces"] if lagtime is None else [])
        self.split = split
        self._species_arg = [_atomic_number(s) for s in species] if species else None

    # --- loading (lazy: the CLI links species / energy reference before Lightning calls setup) ---
    @cached_property
    def _loaded(self) -> tuple[list[str], list[list[dict[str, np.ndarray]]], list[int], list[tuple]]:
        trajectories = read_trajectories(self.paths) if self.explicit is None else self._explicit_trajectories
        species = self._species_arg or sorted({int(z) for t in trajectories for a in t.frames for z in a.numbers})
        records = [
            [
                read_frame(a, t.source, f, species, self.keys, [] if _is_isolated(a) else self.required)
                for f, a in enumerate(t.frames)
            ]
            for t in trajectories
        ]
        isolated_atoms = [
            (t.source, f, r)
            for t, frames in zip(trajectories, records, strict=True)
            for f, r in enumerate(frames)
            if r.get("config_type") == ISOLATED_ATOM
        ]
        if isolated_atoms:  # never in a split (MACE's convention); a trajectory may be left with no frames
            records = [[r for r in frames if r.get("config_type") != ISOLATED_ATOM] for frames in records]
        sources = [t.source for t in trajectories]
        if self.lagtime is not None:
            check_lagtime([len(r) for r in records], self.lagtime, sources)
        return sources, records, species, isolated_atoms

    @property
    def sources(self) -> list[str]:
        return self._loaded[0]

    @property
    def records(self) -> list[list[dict[str, np.ndarray]]]:
        return self._loaded[1]

    @property
    def species(self) -> list[int]:
        """Atomic numbers the model must know, sorted."""
        return list(self._loaded[2])

    @cached_property
    def _explicit_groups(self) -> dict[str, list]:
        return {name: read_trajectories(p) if p is not None else [] for name, p in self.explicit.items()}

    @property
    def _explicit_trajectories(self) -> list:
        return [t for group in self._explicit_groups.values() for t in group]

    @cached_property
    def segments(self):
        if self.explicit is None:
            return split_segments([len(r) for r in self.records], self.split, self.seed, self.split_mode)
        segments, first = {}, 0
        for name, group in self._explicit_groups.items():
            segments[name] = [Segment(first + k, 0, len(self.records[first + k])) for k in range(len(group))]
            first += len(group)
        return segments

    @property
    def split_record(self) -> dict:
        """Which trajectory ranges went where, with the seed: enough to reproduce the split."""
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

    @cached_property
    def energy_reference(self) -> list[float]:
        """Per-element energies (eV), aligned with ``species``: given, from isolated atoms, or fitted to the
        training split (``energy_reference`` argument)."""
        if isinstance(self.reference, dict):
            return mapped_reference(self.reference, self.species, "the mapping")
        if self.reference == "isolated_atoms":
            sources = sorted({source for source, _, _ in self._loaded[3]}) or "no file"
            found = isolated_atom_energies(self._loaded[3])
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

    # --- datasets (the dataloaders come from SplitDataModule) ---
    def dataset(self, name: str) -> FrameGraphs:
        """Frames (or lagged pairs) of split ``name`` as graphs."""
        segments = self.segments[name]
        index = frame_index(segments) if self.lagtime is None else pair_index(segments, self.lagtime)
        if index.shape[0] == 0:
            raise DataError(f"the '{name}' split is empty (split={list(self.split)}, lagtime={self.lagtime})")
        return FrameGraphs(self.records, index, self.cutoff, self.lagtime, self.neighbour_backend, self.dtype)

    def predict_dataloader(self) -> DataLoader:
        if self.predict_paths is None:
            raise DataError("predict needs data.predict_paths (the structures to predict)")
        trajectories = read_trajectories(self.predict_paths)
        records = [
            [read_frame(a, t.source, f, self.species, self.keys) for f, a in enumerate(t.frames)] for t in trajectories
        ]
        index = frame_index([Segment(k, 0, len(r)) for k, r in enumerate(records)])
        dataset = FrameGraphs(records, index, self.cutoff, None, self.neighbour_backend, self.dtype)
        return DataLoader(dataset, batch_size=self.eval_batch_size, num_workers=self.num_workers)

    def state_dict(self) -> dict:
        return {
            "split_record": self.split_record,
            "species": self.species,
            "energy_reference": self.energy_reference,
            "force_rms": self.force_rms,
        }


def _atomic_number(value: str | int) -> int:
    if isinstance(value, int):
        return value
    if value not in atomic_numbers:
        raise DataError(f"unknown element symbol '{value}' in data.species")
    return atomic_numbers[value]


def _is_isolated(atoms) -> bool:
    """An isolated-atom frame is reference data, not training data: it needs no force label."""
    return atoms.info.get("config_type") == ISOLATED_ATOM
