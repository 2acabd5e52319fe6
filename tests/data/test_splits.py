"""Splits and lagged pairs: deterministic, complete, never across a trajectory or split boundary."""

from __future__ import annotations

import pytest
import torch

from sciml.data.errors import DataError
from sciml.data.splits import Segment, check_lagtime, frame_index, pair_index, split_segments


def test_several_trajectories_are_split_whole_and_seeded():
    lengths = [50, 30, 40, 20, 60, 10, 25, 35, 45, 15]
    first = split_segments(lengths, (0.8, 0.1, 0.1), seed=3)
    assert first == split_segments(lengths, (0.8, 0.1, 0.1), seed=3)
    assert first != split_segments(lengths, (0.8, 0.1, 0.1), seed=4)
    owners = [s.trajectory for segs in first.values() for s in segs]
    assert sorted(owners) == list(range(len(lengths)))  # each trajectory in exactly one split
    assert all(s.start == 0 and s.stop == lengths[s.trajectory] for segs in first.values() for s in segs)
    assert [len(first[n]) for n in ("train", "val", "test")] == [8, 1, 1]


def test_single_trajectory_uses_contiguous_blocks():
    split = split_segments([100], (0.8, 0.1, 0.1))
    assert split == {"train": [Segment(0, 0, 80)], "val": [Segment(0, 80, 90)], "test": [Segment(0, 90, 100)]}
    with pytest.raises(DataError, match="summing to 1"):
        split_segments([10], (0.5, 0.1, 0.1))


def test_lagged_pairs_are_complete_and_stay_inside_segments():
    segments = [Segment(0, 0, 10), Segment(1, 0, 7), Segment(2, 3, 9), Segment(3, 0, 2)]
    lagtime = 3
    pairs = pair_index(segments, lagtime)
    expected = {(s.trajectory, t) for s in segments for t in range(s.start, s.stop - lagtime)}
    assert {tuple(p) for p in pairs.tolist()} == expected and len(pairs) == len(expected)
    for trajectory, t in pairs.tolist():
        segment = next(s for s in segments if s.trajectory == trajectory)
        assert segment.start <= t and t + lagtime < segment.stop
    assert frame_index(segments).shape[0] == sum(s.stop - s.start for s in segments)
    with pytest.raises(DataError, match="positive"):
        pair_index(segments, 0)


def test_lagtime_longer_than_trajectory_names_it():
    with pytest.raises(DataError, match=r"file 'short.traj': lagtime 5 >= trajectory length 5"):
        check_lagtime([10, 5], 5, ["long.traj", "short.traj"])


def test_frame_index_rows():
    assert frame_index([Segment(2, 4, 6)]).tolist() == [[2, 4], [2, 5]]
    assert frame_index([]).shape == (0, 2) and pair_index([], 1).dtype == torch.int64


def test_split_modes_partition_every_frame():
    lengths = [30, 50, 20]
    everything = {(t, i) for t, n in enumerate(lengths) for i in range(n)}
    for mode in ("trajectory", "contiguous", "random"):
        split = split_segments(lengths, (0.6, 0.2, 0.2), seed=1, mode=mode)
        frames = {name: {tuple(row) for row in frame_index(segs).tolist()} for name, segs in split.items()}
        assert set.union(*frames.values()) == everything and sum(len(f) for f in frames.values()) == 100, mode
    contiguous = split_segments(lengths, (0.6, 0.2, 0.2), mode="contiguous")
    assert contiguous["val"] == [Segment(0, 18, 24), Segment(1, 30, 40), Segment(2, 12, 16)]
    random = split_segments(lengths, (0.6, 0.2, 0.2), seed=1, mode="random")
    assert [len(frame_index(random[name])) for name in ("train", "val", "test")] == [60, 20, 20]
    assert random == split_segments(lengths, (0.6, 0.2, 0.2), seed=1, mode="random")
    assert random != split_segments(lengths, (0.6, 0.2, 0.2), seed=2, mode="random")
    test_frames = frame_index(random["test"])[:, 1]
    assert len({int(t) for t in test_frames}) > 1 and (test_frames.diff().abs() > 1).any()  # scattered, not a block
    for segments in random.values():  # runs are merged: no two segments touch
        pairs = zip(segments[:-1], segments[1:], strict=True)
        assert not [(a, b) for a, b in pairs if a.trajectory == b.trajectory and a.stop == b.start]
    with pytest.raises(DataError, match="there are 1 for 3 splits"):
        split_segments([100], (0.8, 0.1, 0.1), mode="trajectory")
    with pytest.raises(DataError, match="unknown split_mode 'blocks'"):
        split_segments([100], mode="blocks")


def test_random_split_is_refused_for_lagged_pairs():
    from sciml.data import AtomsDataModule

    with pytest.raises(DataError, match="split_mode 'random' deals single frames"):
        AtomsDataModule(paths="unused.traj", lagtime=2, split_mode="random")
