"""Train/val/test splits as trajectory segments, and the frame and lagged-pair indices inside them.

A segment ``(trajectory, start, stop)`` is a contiguous run of frames. Several trajectories are split
whole (no frame of a trajectory is in two splits); a single trajectory is cut into contiguous blocks.
Lagged pairs ``(t, t + lagtime)`` are taken inside one segment only, so they never cross a trajectory (or
split) boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from sciml.data.errors import DataError

SPLITS = ("train", "val", "test")


class Segment(NamedTuple):
    trajectory: int
    start: int
    stop: int


def split_segments(
    lengths: Sequence[int], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, list[Segment]]:
    """Assign frames to ``train``/``val``/``test``.

    Args:
        lengths: frames per trajectory.
        fractions: shares of (train, val, test); they must sum to 1. With several trajectories the
            shares count trajectories (a seeded permutation decides which); with one, they count frames.
        seed: permutation seed (recorded by the caller).
    """
    fractions = np.asarray(fractions, dtype=float)
    if fractions.shape != (3,) or np.any(fractions < 0) or not np.isclose(fractions.sum(), 1.0):
        raise DataError(f"split fractions must be three non-negative numbers summing to 1, got {list(fractions)}")
    needed = int(np.count_nonzero(fractions))
    if len(lengths) >= max(needed, 2):
        order = np.random.default_rng(seed).permutation(len(lengths))
        counts = _counts(len(lengths), fractions)
        bounds = np.cumsum([0, *counts])
        return {
            name: [Segment(int(t), 0, int(lengths[t])) for t in sorted(order[bounds[k] : bounds[k + 1]])]
            for k, name in enumerate(SPLITS)
        }
    segments: dict[str, list[Segment]] = {name: [] for name in SPLITS}
    for t, length in enumerate(lengths):
        bounds = np.cumsum([0, *_counts(int(length), fractions)])
        for k, name in enumerate(SPLITS):
            if bounds[k + 1] > bounds[k]:
                segments[name].append(Segment(t, int(bounds[k]), int(bounds[k + 1])))
    return segments


def _counts(n: int, fractions: np.ndarray) -> list[int]:
    counts = np.floor(fractions * n).astype(int)
    for k in np.argsort(-(fractions * n - counts))[: n - counts.sum()]:
        counts[k] += 1
    # every requested split gets at least one item when possible, taken from the largest
    for k in np.flatnonzero((fractions > 0) & (counts == 0)):
        donor = int(np.argmax(counts))
        if counts[donor] > 1:
            counts[donor] -= 1
            counts[k] += 1
    return counts.tolist()


def frame_index(segments: Sequence[Segment]) -> torch.Tensor:
    """(F, 2) rows ``(trajectory, t)`` of every frame in the segments."""
    rows = [
        torch.stack([torch.full((s.stop - s.start,), s.trajectory), torch.arange(s.start, s.stop)], 1) for s in segments
    ]
    return torch.cat(rows) if rows else torch.zeros(0, 2, dtype=torch.int64)


def pair_index(segments: Sequence[Segment], lagtime: int) -> torch.Tensor:
    """(P, 2) rows ``(trajectory, t)``: every pair ``(t, t + lagtime)`` with both frames in one segment."""
    if lagtime < 1:
        raise DataError(f"lagtime must be a positive number of frames, got {lagtime}")
    rows = [
        torch.stack(
            [torch.full((s.stop - s.start - lagtime,), s.trajectory), torch.arange(s.start, s.stop - lagtime)], 1
        )
        for s in segments
        if s.stop - s.start > lagtime
    ]
    return torch.cat(rows) if rows else torch.zeros(0, 2, dtype=torch.int64)


def check_lagtime(lengths: Sequence[int], lagtime: int, sources: Sequence[str]) -> None:
    """Raise if ``lagtime`` is not shorter than some trajectory (naming it)."""
    for length, source in zip(lengths, sources, strict=True):
        if lagtime >= length:
            raise DataError(f"file '{source}': lagtime {lagtime} >= trajectory length {length} frames")
