"""Output files written atomically and never overwritten by accident.

A result is written to a hidden temporary file next to its destination (same folder, same suffix, so
ASE still infers the format) and renamed over it only when complete: an interrupted run leaves either the
old file or none, never half a file. An existing destination is refused unless ``overwrite`` is given.
"""

from __future__ import annotations

import os
from pathlib import Path


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
