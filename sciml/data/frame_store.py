"""``FrameStore``: validated frames in one HDF5 file, read lazily frame by frame (data larger than memory).

Written once by ``sciml data prepare`` (:func:`sciml.data.prepare.prepare_frame_store`); read by
``AtomsDataModule(prepared=...)`` through the interface of :class:`~sciml.data.memory_frames.MemoryFrames`.
Only the index (two offsets per frame and per trajectory) is held in memory; a frame's arrays are read on
access, so memory does not grow with the number of frames. Layout (format ``sciml-frames``, version 1;
units Å, eV, eV/Å, eV/Å^3; ``A`` atoms, ``F`` frames, ``T`` trajectories in all)::

    atoms/positions (A, 3) float64     atoms/numbers (A,) uint8     atoms/forces (A, 3) float64
    frames/atom_start (F + 1,) int64   frames/cell (F, 3, 3)        frames/pbc (F, 3) bool
    frames/energy (F,) float64         frames/stress (F, 3, 3)      frames/config_type (F,) int16
    trajectories/frame_start (T + 1,)  trajectories/source (T,) str config_types (K,) str
    split/train, split/val, split/test (S, 3) int64 segments (trajectory, start, stop)
    statistics/least_squares_reference (len(species),) eV    statistics/isolated_atoms (I, 2) (Z, eV)

Attributes: ``format``, ``version``, ``species``, ``labels`` (those of at least one frame; a frame without
one holds NaN there), ``complete_labels`` (those of every frame), ``force_rms`` (eV/Å, training split),
``split_mode``, ``split_seed``, ``split_fractions``.
Neighbour lists are not stored: the cutoff is chosen when training. Frames of ``config_type`` ``IsolatedAtom``
are not frames of the store; their energies are in ``statistics/isolated_atoms``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from sciml.data.errors import DataError
from sciml.data.splits import SPLITS, Segment, check_lagtime
from sciml.data.stats import ISOLATED_ATOM, mapped_reference

FORMAT, VERSION = "sciml-frames", 1
PER_ATOM = {"positions": "atoms/positions", "numbers": "atoms/numbers", "forces": "atoms/forces"}
PER_FRAME = {"cell": "frames/cell", "pbc": "frames/pbc", "energy": "frames/energy", "stress": "frames/stress"}


class FrameStore:
    """A prepared frame store (module docstring), opened read-only.

    Args:
        path: the ``.h5`` file written by ``sciml data prepare``.
        species: atomic numbers the model knows (a superset of the store's), or ``None`` for the store's.
        required: labels every frame must carry (checked against the stored ones).
        lagtime: checked against every trajectory's length when given.
    """

    def __init__(
        self,
        path: str | Path,
        species: list[int] | None = None,
        required: Sequence[str] = (),
        lagtime: int | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"prepared data '{self.path}' does not exist (write it with `sciml data prepare`)")
        try:
            with h5py.File(self.path, "r") as store:
                self._read_index(store)
        except DataError:
            raise
        except Exception as error:  # truncated or foreign files
            raise DataError(f"file '{self.path}' is not a readable sciml frame store ({error})") from error
        stored = [int(z) for z in self._attrs["species"]]
        unknown = sorted(set(stored) - set(species)) if species else []
        if unknown:
            raise DataError(f"file '{self.path}': elements {unknown} of the store are not in data.species {species}")
        self.species = species or stored
        missing = [label for label in required if label not in self.complete_labels]
        if missing:
            raise DataError(
                f"file '{self.path}': labels {missing} are not stored for every frame (every frame has "
                f"{self.complete_labels}, some have {self.labels})"
            )
        if lagtime is not None:
            check_lagtime([len(r) for r in self.records], lagtime, self.sources)
        self._handle, self._pid = None, None

    def _read_index(self, store: h5py.File) -> None:
        if store.attrs.get("format") != FORMAT or int(store.attrs.get("version", -1)) != VERSION:
            raise DataError(
                f"file '{self.path}' is not a sciml frame store of version {VERSION} "
                f"(format={store.attrs.get('format')!r}, version={store.attrs.get('version')!r})"
            )
        self._attrs = dict(store.attrs)
        self.labels = [str(label) for label in store.attrs["labels"]]
        self.complete_labels = [str(label) for label in store.attrs["complete_labels"]]
        self.atom_start = store["frames/atom_start"][:]
        self.frame_start = store["trajectories/frame_start"][:]
        self.sources = [s.decode() if isinstance(s, bytes) else str(s) for s in store["trajectories/source"][:]]
        self.config_types = [s.decode() if isinstance(s, bytes) else str(s) for s in store["config_types"][:]]
        self.segments = {name: [Segment(*map(int, row)) for row in store[f"split/{name}"][:]] for name in SPLITS}
        self._least_squares = store["statistics/least_squares_reference"][:]
        self.isolated_atoms = {int(z): float(e) for z, e in store["statistics/isolated_atoms"][:]}
        if self.atom_start.shape[0] != self.frame_start[-1] + 1:
            raise DataError(f"file '{self.path}': frame and trajectory offsets disagree (damaged store)")
        self.records = [
            _TrajectoryFrames(self, int(a), int(b))
            for a, b in zip(self.frame_start[:-1], self.frame_start[1:], strict=True)
        ]

    @property
    def force_rms(self) -> float:
        """RMS force component (eV/Å) of the training split, computed when the store was prepared."""
        return float(self._attrs["force_rms"])

    @property
    def split_record(self) -> dict:
        """The split written by ``sciml data prepare``, in the form of the in-memory one."""
        return {
            "seed": int(self._attrs["split_seed"]),
            "mode": f"{self._attrs['split_mode']} (prepared: {self.path})",
            **{
                name: [(self.sources[s.trajectory], s.start, s.stop) for s in segs]
                for name, segs in self.segments.items()
            },
        }

    def reference_energies(self, reference: str | dict[int, float]) -> list[float]:
        """Per-element energies (eV) aligned with ``species``: a ``{Z: eV}`` mapping, the stored isolated-atom
        energies, or the stored least-squares fit to the training split."""
        if isinstance(reference, dict):
            return mapped_reference(reference, self.species, "the mapping")
        if reference == "isolated_atoms":
            return mapped_reference(
                self.isolated_atoms, self.species, f"config_type '{ISOLATED_ATOM}' frames of {self.path}"
            )
        fitted = dict(zip((int(z) for z in self._attrs["species"]), self._least_squares.tolist(), strict=True))
        return [fitted.get(z, 0.0) for z in self.species]

    # --- frames, read on access ---
    def _datasets(self) -> dict[str, h5py.Dataset]:
        """The datasets of the file opened by this process (each DataLoader worker opens its own: HDF5
        handles do not survive a fork)."""
        if self._handle is None or self._pid != os.getpid():
            handle = h5py.File(self.path, "r")
            names = [*PER_ATOM.values(), *PER_FRAME.values(), "frames/config_type"]
            self._handle, self._pid = {n.split("/")[1]: handle[n] for n in names if n in handle}, os.getpid()
        return self._handle

    def record(self, frame: int) -> dict[str, np.ndarray]:
        """Frame ``frame`` (store-wide index) as :func:`~sciml.data.labels.read_frame` returns it."""
        data = self._datasets()
        atoms = slice(int(self.atom_start[frame]), int(self.atom_start[frame + 1]))
        record = {
            "positions": data["positions"][atoms],
            "numbers": data["numbers"][atoms].astype(np.int64),
            "cell": data["cell"][frame],
            "pbc": data["pbc"][frame].astype(bool),
        }
        config_type = self.config_types[int(data["config_type"][frame])]
        if config_type:
            record["config_type"] = config_type
        for label in self.labels:
            value = np.asarray(data[label][atoms] if label == "forces" else data[label][frame], dtype=np.float64)
            if label in self.complete_labels or not np.isnan(value).any():  # NaN: this frame has no such label
                record[label] = value
        return record

    def __getstate__(self) -> dict:  # picklable for spawned DataLoader workers: no open handle travels
        return {**self.__dict__, "_handle": None, "_pid": None}


class _TrajectoryFrames(Sequence):
    """``records[trajectory]``: frames ``first .. stop - 1`` of the store, read on access."""

    def __init__(self, store: FrameStore, first: int, stop: int) -> None:
        self.store, self.first, self.stop = store, first, stop

    def __len__(self) -> int:
        return self.stop - self.first

    def __getitem__(self, t: int) -> dict[str, np.ndarray]:
        if not 0 <= t < len(self):
            raise IndexError(t)
        return self.store.record(self.first + t)
