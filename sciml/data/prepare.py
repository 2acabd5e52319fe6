"""``sciml data prepare``: trajectory files -> one frame store (:mod:`sciml.data.frame_store`), streamed.

Frames are validated exactly as in memory (:func:`~sciml.data.labels.read_frame`), appended without
neighbour lists, dealt to the splits once (the split is stored), and the training split's statistics
(least-squares reference energies, force RMS) and the isolated-atom energies are computed on the way and
stored, so training never scans the store. Memory: one frame of a ``.traj``/extxyz file at a time (a
database file whole) plus a write buffer, and, per frame, its element counts and sum of squared forces.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import ase
import h5py
import numpy as np

from sciml.data.errors import DataError
from sciml.data.files import AtomicOutput
from sciml.data.frame_store import FORMAT, VERSION
from sciml.data.labels import LABELS, LabelKeys, read_frame
from sciml.data.readers import stream_trajectories
from sciml.data.splits import SPLITS, Segment, check_split_mode, frame_index, split_segments
from sciml.data.stats import ISOLATED_ATOM, energy_reference_from_counts, isolated_atom_energies

Paths = str | list[str] | None
SHAPES = {"positions": (3,), "numbers": (), "forces": (3,), "cell": (3, 3), "pbc": (3,), "energy": (),
          "stress": (3, 3), "config_type": ()}  # fmt: skip
DTYPES = {"numbers": np.uint8, "pbc": np.bool_, "config_type": np.int16}
ATOM_CHUNK, FRAME_CHUNK = 256, 512  # rows per HDF5 chunk: a random frame reads a few kB per field


def prepare_frame_store(
    output: str | Path,
    paths: Paths = None,
    train_paths: Paths = None,
    val_paths: Paths = None,
    test_paths: Paths = None,
    **options,
) -> dict:
    """Write the frames of ``paths`` (dealt by ``split``/``split_mode``/``seed``) or of explicit
    ``train_paths``/``val_paths``/``test_paths`` into ``output`` (atomically; an existing file is refused
    unless ``overwrite``). ``options``: those of :func:`write_frame_store` (``split``, ``split_mode``,
    ``seed``, ``species``, ``labels``, ``keys``, ``overwrite``, ``buffer_frames``). ``labels`` must be in every
    frame; any other label is stored for the frames that have it. Returns a summary (frames, atoms,
    trajectories per split).
    """
    explicit = {"train": train_paths, "val": val_paths, "test": test_paths}
    if (paths is None) == all(p is None for p in explicit.values()):
        raise DataError("give either paths (with split) or train_paths/val_paths/test_paths")
    if paths is not None:
        groups = {"all": stream_trajectories(paths)}
    else:
        groups = {name: stream_trajectories(p) for name, p in explicit.items() if p is not None}
    return write_frame_store(output, groups, **options)


def write_frame_store(
    output: str | Path,
    groups: Mapping[str, Iterable[tuple[str, Iterable[ase.Atoms]]]],
    split: Sequence[float] = (0.8, 0.1, 0.1),
    split_mode: str = "auto",
    seed: int = 0,
    species: Sequence[int] | None = None,
    labels: Sequence[str] = ("energy", "forces"),
    keys: LabelKeys | None = None,
    overwrite: bool = False,
    buffer_frames: int = 4096,
) -> dict:
    """:func:`prepare_frame_store` from ``(source, frames)`` trajectories (ASE ``Atoms``, e.g. generated on the
    fly): ``groups`` is ``{"all": trajectories}`` (dealt by ``split``) or ``{"train": ..., "val": ..., "test":
    ...}`` (explicit splits)."""
    dealt = list(groups) == ["all"]
    if not dealt and not set(groups) <= set(SPLITS):
        raise DataError(f"groups must be {{'all': ...}} or some of {SPLITS}, got {list(groups)}")
    check_split_mode(split_mode, None)
    with AtomicOutput(output, overwrite, "--overwrite") as temporary, h5py.File(temporary, "w") as store:
        writer = _StoreWriter(store, species, list(labels), keys or LabelKeys(), buffer_frames)
        group_sizes = {name: writer.add_trajectories(trajectories) for name, trajectories in groups.items()}
        writer.flush()
        lengths = np.diff(writer.frame_start)
        if dealt:
            segments = split_segments(lengths.tolist(), split, seed, split_mode)
        else:
            segments, first = {}, 0
            for name in SPLITS:
                size = group_sizes.get(name, 0)
                segments[name] = [Segment(first + k, 0, int(lengths[first + k])) for k in range(size)]
                first += size
        writer.finish(segments, split_mode if dealt else "explicit files", seed, split)
    return {"output": str(output), **writer.summary(segments)}


class _StoreWriter:
    """Appends validated frames to resizable chunked datasets, buffering ``buffer_frames`` at a time."""

    def __init__(self, store: h5py.File, species, labels: list[str], keys: LabelKeys, buffer_frames: int) -> None:
        self.store, self.species, self.required, self.keys = store, list(species) if species else None, labels, keys
        self.buffer_frames, self.label_frames = buffer_frames, Counter()
        self.buffer: list[dict] = []
        self.atom_start, self.frame_start, self.sources = array("q", [0]), [0], []
        # per frame, compactly: composition (index into a table of distinct ones), energy, sum of squared forces
        self.compositions: dict[tuple, int] = {}
        self.composition, self.energies, self.force_squares = array("i"), array("d"), array("d")
        self.config_types = {"": 0}
        self.isolated: list[tuple[str, int, dict]] = []  # (source, frame, record) of single-atom references

    def add_trajectories(self, trajectories: Iterable) -> int:
        count = 0
        for source, frames in trajectories:
            for f, atoms in enumerate(frames):
                self._add_frame(atoms, source, f)
            self.sources.append(source)
            self.frame_start.append(len(self.energies))
            count += 1
        return count

    def _add_frame(self, atoms, source: str, f: int) -> None:
        if atoms.info.get("config_type") == ISOLATED_ATOM:
            self.isolated.append((source, f, read_frame(atoms, source, f, self.species, self.keys)))
            return
        record = read_frame(atoms, source, f, self.species, self.keys, self.required)
        self.label_frames.update(label for label in LABELS if label in record)
        record["config_type"] = self.config_types.setdefault(record.get("config_type", ""), len(self.config_types))
        self.buffer.append(record)
        composition = tuple(zip(*np.unique(record["numbers"], return_counts=True), strict=True))
        self.composition.append(self.compositions.setdefault(composition, len(self.compositions)))
        self.energies.append(float(record.get("energy", np.nan)))
        self.force_squares.append(float(np.sum(record["forces"] ** 2)) if "forces" in record else 0.0)
        self.atom_start.append(self.atom_start[-1] + len(record["numbers"]))
        if len(self.buffer) >= self.buffer_frames:
            self.flush()

    @property
    def stored_labels(self) -> list[str]:
        """Labels of at least one frame (a frame without one holds NaN there)."""
        return [label for label in LABELS if self.label_frames[label]]

    def flush(self) -> None:
        """Append the buffered frames; a label a frame lacks is stored as NaN (real labels are finite)."""
        if not self.buffer:
            return
        atoms_before, frames_before = self.atom_start[-len(self.buffer) - 1], len(self.energies) - len(self.buffer)
        for field in ("positions", "numbers", "forces"):
            if field in self.stored_labels or field != "forces":
                rows = [r.get(field, np.full((len(r["numbers"]), 3), np.nan)) for r in self.buffer]
                self._append(f"atoms/{field}", np.concatenate(rows), ATOM_CHUNK, atoms_before)
        for field in ("cell", "pbc", "config_type", "energy", "stress"):
            if field in self.stored_labels or field not in LABELS:
                rows = [np.asarray(r.get(field, np.full(SHAPES[field], np.nan))) for r in self.buffer]
                self._append(f"frames/{field}", np.stack(rows), FRAME_CHUNK, frames_before)
        self.buffer.clear()

    def _append(self, name: str, values: np.ndarray, chunk: int, rows_before: int) -> None:
        """Append ``values`` to dataset ``name``, created (NaN-filled up to ``rows_before``) when first needed."""
        field = name.split("/")[1]
        values = values.astype(DTYPES.get(field, np.float64))
        if name not in self.store:
            shape, fill = SHAPES[field], np.nan if values.dtype == np.float64 else 0
            self.store.create_dataset(
                name,
                (rows_before, *shape),
                values.dtype,
                maxshape=(None, *shape),
                chunks=(chunk, *shape),
                fillvalue=fill,
            )
        dataset = self.store[name]
        dataset.resize(dataset.shape[0] + values.shape[0], axis=0)
        dataset[-values.shape[0] :] = values

    def finish(self, segments: dict[str, list[Segment]], mode: str, seed: int, split: Sequence[float]) -> None:
        if len(self.energies) == 0:
            raise DataError("no frames to store (only isolated atoms, or empty inputs)")
        species = self.species or sorted({int(z) for c in self.compositions for z, _ in c})
        train = frame_index(segments["train"]).numpy()
        train_frames = self.frame_start_array[train[:, 0]] + train[:, 1] if len(train) else np.zeros(0, int)
        s = self.store
        complete = [label for label in LABELS if self.label_frames[label] == len(self.energies)]
        s.attrs.update(format=FORMAT, version=VERSION, species=species, labels=self.stored_labels)
        s.attrs["complete_labels"] = complete
        s.attrs.update(split_mode=mode, split_seed=seed, split_fractions=list(split))
        s.attrs["force_rms"] = self._force_rms(train_frames)
        s["frames/atom_start"] = np.asarray(self.atom_start, dtype=np.int64)
        s["trajectories/frame_start"] = self.frame_start_array
        s["trajectories/source"] = np.asarray(self.sources, dtype=object).astype(h5py.string_dtype())
        s["config_types"] = np.asarray(list(self.config_types), dtype=object).astype(h5py.string_dtype())
        for name in SPLITS:
            s[f"split/{name}"] = np.asarray(segments[name], dtype=np.int64).reshape(-1, 3)
        s["statistics/least_squares_reference"] = self._least_squares(train_frames, species)
        isolated = isolated_atom_energies(self.isolated)  # checked: one atom and its energy each
        s["statistics/isolated_atoms"] = np.asarray(list(isolated.items()), dtype=np.float64).reshape(-1, 2)

    @property
    def frame_start_array(self) -> np.ndarray:
        return np.asarray(self.frame_start, dtype=np.int64)

    def _force_rms(self, frames: np.ndarray) -> float:
        if "forces" not in self.stored_labels or len(frames) == 0:
            return 1.0
        atoms = np.diff(np.asarray(self.atom_start))[frames]
        rms = float(np.sqrt(np.sum(np.asarray(self.force_squares)[frames]) / (3 * np.sum(atoms))))
        return rms if rms > 0 else 1.0

    def _least_squares(self, frames: np.ndarray, species: list[int]) -> np.ndarray:
        if "energy" not in self.stored_labels or len(frames) == 0:
            return np.zeros(len(species))
        column = {z: k for k, z in enumerate(species)}
        table = np.zeros((len(self.compositions), len(species)))
        for composition, row in self.compositions.items():
            for z, n in composition:
                table[row, column[int(z)]] = n
        counts = table[np.asarray(self.composition)[frames]]
        return energy_reference_from_counts(counts, np.asarray(self.energies)[frames])

    def summary(self, segments: dict[str, list[Segment]]) -> dict:
        frames = {name: int(sum(s.stop - s.start for s in segs)) for name, segs in segments.items()}
        return {"frames": frames, "atoms": self.atom_start[-1], "trajectories": len(self.sources),
                "labels": self.stored_labels, "isolated_atoms": len(self.isolated)}  # fmt: skip
