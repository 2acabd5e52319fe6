"""Train/val/test splits as trajectory segments, and the frame and lagged-pair indices inside them.

A segment ``(trajectory, start, stop)`` is a contiguous run of frames. Split modes:

- ``trajectory``: whole trajectories are dealt to the splits by a seeded permutation (no frame of a
  trajectory is in two splits; time-correlated frames never leak between splits);
- ``contiguous``: every trajectory is cut into contiguous blocks (train first, then val, then test);
- ``random``: frames are dealt one by one by a seeded permutation, for files of independent configurations
  (refused with lagged pairs, which need runs of consecutive frames);
- ``auto`` (default): ``trajectory`` when there are enough trajectories, else ``contiguous``.

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
SPLIT_MODES = ("auto", "trajectory", "contiguous", "random")


class Segment(NamedTuple):
    trajectory: int
    start: int
    stop: int


def split_segments(
    lengths: Sequence[int], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0, mode: str = "auto"
) -> dict[str, list[Segment]]:
    """Assign frames to ``train``/``val``/``test``.

    Args:
        lengths: frames per trajectory.
        fractions: shares of (train, val, test); they must sum to 1. They count trajectories (``trajectory``)
            or frames (``contiguous``: of each trajectory; ``random``: of all frames).
        seed: permutation seed (recorded by the caller).
        mode: ``auto``, ``trajectory``, ``contiguous`` or ``random`` (module docstring).
    """
    fractions = np.asarray(fractions, dtype=float)
    if fractions.shape != (3,) or np.any(fractions < 0) or not np.isclose(fractions.sum(), 1.0):
        raise DataError(f"split fractions must be three non-negative numbers summing to 1, got {list(fractions)}")
    if mode not in SPLIT_MODES:
        raise DataError(f"unknown split_mode '{mode}'; choose one of {SPLIT_MODES}")
    needed = int(np.count_nonzero(fractions))
    if mode == "trajectory" and len(lengths) < needed:
        raise DataError(
            f"split_mode 'trajectory' deals whole trajectories, but there are {len(lengths)} for {needed} splits; "
            "give more files or use split_mode 'contiguous' or 'random'"
        )
    if mode == "random":
        return _random_segments(lengths, fractions, seed)
    if mode == "trajectory" or (mode == "auto" and len(lengths) >= max(needed, 2)):
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


def _random_segments(lengths: Sequence[int], fractions: np.ndarray, seed: int) -> dict[str, list[Segment]]:
    """Frames dealt one by one by a seeded permutation; each split's frames merged into runs."""
    starts = np.cumsum([0, *lengths])
    order = np.random.default_rng(seed).permutation(int(starts[-1]))
    bounds = np.cumsum([0, *_counts(len(order), fractions)])
    segments = {}
    for k, name in enumerate(SPLITS):
        frames = np.sort(order[bounds[k] : bounds[k + 1]])
        trajectory = np.searchsorted(starts, frames, side="right") - 1
        local = frames - starts[trajectory]
        breaks = np.flatnonzero((np.diff(frames) != 1) | (np.diff(trajectory) != 0)) + 1
        segments[name] = [
            Segment(int(trajectory[a]), int(local[a]), int(local[b - 1]) + 1)
            for a, b in zip([0, *breaks], [*breaks, len(frames)], strict=True)
            if b > a
        ]
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
    """(F, 2) rows ``(trajectory, t)`` of every frame in the segments (vectorised: random splits of a million
    frames have hundreds of thousands of segments)."""
    if not segments:
        return torch.zeros(0, 2, dtype=torch.int64)
    table = np.asarray(segments, dtype=np.int64).reshape(-1, 3)
    sizes = table[:, 2] - table[:, 1]
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows = np.stack([np.repeat(table[:, 0], sizes), np.repeat(table[:, 1], sizes) + offsets], 1)
    return torch.from_numpy(rows)


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


def check_split_mode(mode: str, lagtime: int | None) -> str:
    """``mode`` if it is known and fits the data (``random`` deals single frames: no lagged pairs)."""
    if mode not in SPLIT_MODES:
        raise DataError(f"unknown split_mode '{mode}'; choose one of {SPLIT_MODES}")
    if mode == "random" and lagtime is not None:
        raise DataError(
            f"split_mode 'random' deals single frames, so it cannot keep lagged pairs (lagtime={lagtime}) together; "
            "use 'trajectory' or 'contiguous'"
        )
    return mode


def check_lagtime(lengths: Sequence[int], lagtime: int, sources: Sequence[str]) -> None:
    """Raise if ``lagtime`` is not shorter than some trajectory (naming it)."""
    for length, source in zip(lengths, sources, strict=True):
        if lagtime >= length:
            raise DataError(f"file '{source}': lagtime {lagtime} >= trajectory length {length} frames")
