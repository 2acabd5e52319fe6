"""The one error type of the data layer: every message names the file, the frame and the field."""

from __future__ import annotations


class DataError(ValueError):
    """Bad input data. The message says where (file, frame, field) and what is wrong."""


def where(source: str, frame: int | None = None, field: str | None = None) -> str:
    """Format a location as ``file 'x.traj', frame 3, field 'forces'``."""
    parts = [f"file '{source}'"]
    if frame is not None:
        parts.append(f"frame {frame}")
    if field is not None:
        parts.append(f"field '{field}'")
    return ", ".join(parts)
