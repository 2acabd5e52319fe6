"""``AtomsDataModule``: ASE trajectories -> labelled frame graphs or time-lagged graph pairs."""

from __future__ import annotations

from functools import cached_property

import torch
from torch_geometric.loader import DataLoader

from sciml.data.datasets import FrameGraphs
from sciml.data.errors import DataError
from sciml.data.frame_store import FrameStore
from sciml.data.labels import LabelKeys, atomic_numbers_of, read_frame
from sciml.data.memory_frames import MemoryFrames
from sciml.data.readers import read_trajectories
from sciml.data.split_datamodule import SplitDataModule
from sciml.data.splits import Segment, check_split_mode, frame_index, pair_index
from sciml.data.stats import check_reference

NEIGHBOUR_SAMPLE = 2000  # frames that avg_neighbours counts, at most


class AtomsDataModule(SplitDataModule):
    """Frames (``lagtime=None``) or pairs ``(frame t, frame t + lagtime)`` from ASE trajectory files.

    Args:
        paths: a ``.traj``/extxyz/``.db`` file, a folder of them, or a list of either, dealt to the splits by
            ``split``. Or, instead, ``train_paths``, ``val_paths`` and ``test_paths``: explicit splits, each
            file whole in the split it is named for (the three files most datasets ship as). Or ``prepared``:
            an HDF5 frame store written by ``sciml data prepare`` (:mod:`sciml.data.frame_store`), streamed
            from disk frame by frame for data larger than memory; its split and training statistics are the
            stored ones (``split``, ``split_mode`` and the label keys were applied when it was prepared).
        cutoff: neighbour-list radius (Å), linked into the model.
        lagtime: ``None`` for labelled frames; else the lag in frames, pairs never cross trajectories.
        species: elements the model knows (symbols or numbers); default: those in the data.
        labels: labels every frame must carry; default ``["energy", "forces"]`` for frames, none for pairs.
        split: (train, val, test) fractions, dealt by ``split_mode``.
        split_mode: ``"auto"`` (whole trajectories when there are several, else contiguous blocks),
            ``"trajectory"``, ``"contiguous"`` or ``"random"`` (seeded, frame by frame: for files of independent
            configurations; refused with ``lagtime``). See :mod:`sciml.data.splits`.
        seed: split seed, recorded in ``split_record`` and the checkpoint.
        batch_size: structures (or pairs) per training batch.
        eval_batch_size: structures (or pairs) per evaluation batch.
        energy_key: ``atoms.info`` key of the energy (eV); default: the calculator's results.
        forces_key: ``atoms.arrays`` key of the forces (eV/Å); default: the calculator's results.
        stress_key: ``atoms.info`` key of the stress (eV/Å^3); default: the calculator's results.
        predict_paths: files for ``sciml predict`` (every frame, in order, labels optional).
        neighbour_backend: ``"vesin"``, ``"torch"`` or ``"torch_cluster"``.
        energy_reference: per-element reference energies linked into the model: ``"least_squares"`` (fitted to
            the training split), a mapping ``{element: eV}``, or ``"isolated_atoms"`` (from the single-atom
            frames with ``config_type: IsolatedAtom``). Such frames are never in a split, whatever the mode
            (MACE's convention). See :mod:`sciml.data.stats`.
        dtype: ``"float32"`` or ``"float64"``: positions, cells and labels of the graphs (float64 for float64
            training, ``trainer.precision: 64-true``: labels such as total energies of hundreds of eV lose
            ~0.1 meV when stored in float32).
        cache_graphs: keep every graph once built (memory grows with the frames: for many frames of a small
            molecule, e.g. the lagged pairs of a Koopman model, where rebuilding them each epoch dominates).
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
        prepared: str | None = None,
        cache_graphs: bool = False,
    ) -> None:
        super().__init__()
        explicit = {"train": train_paths, "val": val_paths, "test": test_paths}
        given = [paths is not None, any(v is not None for v in explicit.values()), prepared is not None]
        if sum(given) != 1 or (given[1] and train_paths is None):
            raise DataError(
                "data needs exactly one of: paths (dealt to the splits by split), train_paths (with val_paths, "
                "test_paths: explicit splits) or prepared (a store written by `sciml data prepare`)"
            )
        if prepared is not None and any(k is not None for k in (energy_key, forces_key, stress_key)):
            raise DataError("energy_key/forces_key/stress_key are read by `sciml data prepare`, not with data.prepared")
        self.explicit = explicit if given[1] else None
        self.prepared = prepared
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
        self._species_arg = atomic_numbers_of(species) if species else None
        self._graph_cache: dict | None = {} if cache_graphs else None

    # --- frames (read lazily: the CLI links species / energy reference before Lightning calls setup) ---
    @cached_property
    def frames(self) -> MemoryFrames | FrameStore:
        """The frames, read into memory from the files or streamed from disk from the prepared store."""
        if self.prepared is not None:
            return FrameStore(self.prepared, self._species_arg, self.required, self.lagtime)
        return MemoryFrames(
            self.paths,
            self.explicit,
            self._species_arg,
            self.keys,
            self.required,
            self.lagtime,
            self.split,
            self.seed,
            self.split_mode,
        )

    @property
    def sources(self) -> list[str]:
        return self.frames.sources

    @property
    def records(self):
        """``records[trajectory][t]``: validated frames (:func:`~sciml.data.labels.read_frame`)."""
        return self.frames.records

    @property
    def species(self) -> list[int]:
        """Atomic numbers the model must know, sorted."""
        return list(self.frames.species)

    @property
    def segments(self):
        return self.frames.segments

    @property
    def split_record(self) -> dict:
        """Which trajectory ranges went where, and the seed (enough to reproduce the split)."""
        return self.frames.split_record

    @cached_property
    def energy_reference(self) -> list[float]:
        """Per-element energies (eV), aligned with ``species``: given, from isolated atoms, or fitted to the
        training split (``energy_reference`` argument)."""
        return self.frames.reference_energies(self.reference)

    @property
    def force_rms(self) -> float:
        """RMS force component (eV/Å) on the training split."""
        return self.frames.force_rms

    @cached_property
    def avg_neighbours(self) -> float:
        """Mean number of neighbours per atom within ``cutoff`` on the training split (edges / atoms, images
        of periodic cells included), over at most ``NEIGHBOUR_SAMPLE`` evenly spaced frames (all of them in
        smaller splits): the normaliser of E2Former's edge-degree embedding, computed as MACE and NequIP do."""
        split = self.dataset("train")
        picks = torch.linspace(0, len(split) - 1, min(len(split), NEIGHBOUR_SAMPLE)).round().long().unique()
        edges = atoms = 0
        for k in picks.tolist():
            graph = split[k][0] if self.lagtime is not None else split[k]
            edges, atoms = edges + graph.edge_index.shape[1], atoms + graph.num_nodes
        return max(edges / max(atoms, 1), 1.0)  # isolated atoms only: 1, so that nothing divides by zero

    def linked_values(self, model_class: type) -> dict:
        """``{init argument: value}`` for what ``model_class`` takes from the data (its ``linked_from_data``,
        e.g. :class:`~sciml.models.E2Former`'s species, cutoff, energy reference, energy scale and
        avg_neighbours): what ``sciml fit`` links, for models built in Python,
        ``E2Former(**data.linked_values(E2Former), channels=64)``."""
        return {argument: getattr(self, attribute) for argument, attribute in model_class.linked_from_data.items()}

    # --- datasets (the dataloaders come from SplitDataModule) ---
    def dataset(self, name: str) -> FrameGraphs:
        """Frames (or lagged pairs) of split ``name`` as graphs."""
        segments = self.segments[name]
        index = frame_index(segments) if self.lagtime is None else pair_index(segments, self.lagtime)
        if index.shape[0] == 0:
            raise DataError(f"the '{name}' split is empty (split={list(self.split)}, lagtime={self.lagtime})")
        return FrameGraphs(self.records, index, self.cutoff, self.lagtime, self.neighbour_backend, self.dtype,
                           self._graph_cache)  # fmt: skip

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
            "avg_neighbours": self.avg_neighbours,
        }
