"""Read ASE trajectories from `.traj`, extxyz, ASE `.db`, lists of those, or folders.

One file is one trajectory, frames in file order; an ASE database whose rows carry a
``trajectory`` key holds one trajectory per distinct value (rows in id order). A :class:`Trajectory` given
among the paths is frames already in memory, taken as they are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import ase
import ase.db
import ase.io

from sciml.data.errors import DataError

SUFFIXES = (".traj", ".xyz", ".extxyz", ".db")


@dataclass
class Trajectory:
    """Frames of one trajectory, in time order.

    Attributes:
        source: where it came from (a path, or ``path::trajectory=name`` for a database group).
        frames: the ASE ``Atoms`` (positions in Å), in order.
    """

    source: str
    frames: list[ase.Atoms]

    def __len__(self) -> int:
        return len(self.frames)


def expand_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """Turn a path, a list of paths or folders into a sorted list of trajectory files."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise DataError("no data paths were given")
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if not path.exists():
            raise DataError(f"data path '{path}' does not exist")
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
            if not found:
                raise DataError(f"folder '{path}' holds no trajectory files ({', '.join(SUFFIXES)})")
            files.extend(found)
        elif path.suffix not in SUFFIXES:
            raise DataError(f"file '{path}' has an unknown suffix; expected one of {', '.join(SUFFIXES)}")
        else:
            files.append(path)
    return files


def read_trajectories(paths: str | Path | Trajectory | Sequence[str | Path | Trajectory]) -> list[Trajectory]:
    """Read every trajectory under ``paths`` (see module docstring), in the order given."""
    items = [paths] if isinstance(paths, str | Path | Trajectory) else list(paths)
    if not items:
        raise DataError("no data paths were given")
    trajectories: list[Trajectory] = []
    for item in items:
        if isinstance(item, Trajectory):
            trajectories.append(item)
            continue
        for path in expand_paths(item):
            trajectories.extend(_read_file(path))
    return trajectories


def stream_trajectories(paths: str | Path | Sequence[str | Path]) -> Iterator[tuple[str, Iterator[ase.Atoms]]]:
    """``(source, frames)`` per trajectory under ``paths``, as :func:`read_trajectories` finds them, but the
    frames of ``.traj`` and extxyz files are read one at a time (memory stays bounded by one frame); a
    database is read whole. Errors name the file (and the last frame read)."""
    for path in expand_paths(paths):
        if path.suffix == ".db":
            for trajectory in _read_database_checked(path):
                yield trajectory.source, iter(trajectory.frames)
        else:
            yield str(path), _stream_file(path)


def _stream_file(path: Path) -> Iterator[ase.Atoms]:
    count = 0
    try:
        for atoms in ase.io.iread(path, index=":"):
            count += 1
            yield atoms
    except Exception as error:  # ASE raises many types for corrupt or truncated files
        raise DataError(
            f"file '{path}' could not be read after {count} frame(s) ({type(error).__name__}: {error})"
        ) from error
    if count == 0:
        raise DataError(f"file '{path}' holds no frames")


def _read_database_checked(path: Path) -> list[Trajectory]:
    try:
        return _read_database(path)
    except DataError:
        raise
    except Exception as error:
        raise DataError(f"file '{path}' could not be read ({type(error).__name__}: {error})") from error


def _read_file(path: Path) -> list[Trajectory]:
    if path.suffix == ".db":
        return _read_database_checked(path)
    try:
        frames = ase.io.read(path, index=":")
    except Exception as error:  # ASE raises many types for corrupt or truncated files
        raise DataError(f"file '{path}' could not be read ({type(error).__name__}: {error})") from error
    if not frames:
        raise DataError(f"file '{path}' holds no frames")
    return [Trajectory(str(path), list(frames))]


def _read_database(path: Path) -> list[Trajectory]:
    groups: dict[str, list[ase.Atoms]] = {}
    with ase.db.connect(path, type="db") as db:
        for row in db.select(sort="id"):
            atoms = row.toatoms(add_additional_information=False)
            atoms.info.update(row.key_value_pairs)
            atoms.info.update(row.data)
            groups.setdefault(str(row.key_value_pairs.get("trajectory", "")), []).append(atoms)
    if not groups:
        raise DataError(f"file '{path}' holds no frames")
    if list(groups) == [""]:
        return [Trajectory(str(path), groups[""])]
    return [Trajectory(f"{path}::trajectory={name}", frames) for name, frames in groups.items()]
