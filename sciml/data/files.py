"""Output files written atomically and never overwritten by accident.

A result is written to a hidden temporary file next to its destination (same folder, same suffix, so
ASE still infers the format) and renamed over it only when complete: an interrupted run leaves either the
old file or none, never half a file. An existing destination is refused unless ``overwrite`` is given.

A file that grows frame by frame (a label store, a replica's trajectory) is extxyz appended one frame per
write and flushed to disk (:func:`append_frame`); :func:`read_complete_frames` reads it back and cuts off a
half-written last frame (a kill during the write), keeping it aside in ``<file>.partial``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import ase.io
from ase import Atoms


class AtomicOutput:
    """``with AtomicOutput(path) as temporary: write(temporary)`` -> ``path`` appears complete, or not at all.

    Outside a ``with`` block (a writer whose start and end are separate hooks): write to ``temporary``, then
    call :meth:`~sciml.data.files.AtomicOutput.commit` or :meth:`~sciml.data.files.AtomicOutput.discard`.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false; the message names ``path`` and ``option``
            (how to allow it, e.g. ``--overwrite``).
    """

    def __init__(self, path: str | Path, overwrite: bool = False, option: str = "overwrite=True") -> None:
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise FileExistsError(f"'{self.path}' already exists; pass {option} to replace it (or choose another path)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.temporary = self.path.with_name(f".{self.path.stem}.partial-{os.getpid()}{self.path.suffix}")

    def commit(self) -> None:
        """Move the finished temporary file to ``path`` (atomic on one file system)."""
        os.replace(self.temporary, self.path)

    def discard(self) -> None:
        """Delete the temporary file: ``path`` stays as it was."""
        self.temporary.unlink(missing_ok=True)

    def __enter__(self) -> Path:
        return self.temporary

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def append_frame(path: str | Path, atoms: Atoms) -> None:
    """Append ``atoms`` (with its info, arrays and calculator results) to the extxyz file ``path`` in one write,
    flushed and synced to disk before returning."""
    text = io.StringIO()
    ase.io.write(text, atoms, format="extxyz")
    with open(path, "a") as handle:
        handle.write(text.getvalue())
        handle.flush()
        os.fsync(handle.fileno())


def read_complete_frames(path: str | Path) -> list[Atoms]:
    """The complete frames of the extxyz file ``path`` (none when it is absent or empty). A broken tail, from
    the first frame that does not parse, is removed from ``path`` and appended to ``<path>.partial``."""
    path = Path(path)
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
