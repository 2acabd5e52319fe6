"""Readers: round trips of every format, lists and folders, and the clear errors for bad files."""

from __future__ import annotations

import ase.db
import ase.io
import numpy as np
import pytest

from sciml.data import DataError, read_trajectories


def _same(a, b, atol=1e-10):
    np.testing.assert_allclose(a.positions, b.positions, atol=atol)
    np.testing.assert_array_equal(a.numbers, b.numbers)
    np.testing.assert_allclose(a.get_potential_energy(), b.get_potential_energy(), atol=atol)
    np.testing.assert_allclose(a.get_forces(), b.get_forces(), atol=atol)


@pytest.mark.parametrize("suffix", [".traj", ".xyz", ".extxyz"])
def test_round_trip_file(tmp_path, cu_frames, suffix):
    path = tmp_path / f"cu{suffix}"
    ase.io.write(path, cu_frames)
    (trajectory,) = read_trajectories(path)
    assert trajectory.source == str(path) and len(trajectory) == len(cu_frames)
    atol = 1e-10 if suffix == ".traj" else 1e-7  # extxyz stores 8 decimals
    for read, written in zip(trajectory.frames, cu_frames, strict=True):
        _same(read, written, atol)
        np.testing.assert_allclose(read.get_stress(), written.get_stress(), atol=atol)


def test_database_one_trajectory_and_groups(tmp_path, cu_frames):
    path = tmp_path / "frames.db"
    with ase.db.connect(path) as db:
        for k, atoms in enumerate(cu_frames):
            db.write(atoms, trajectory=f"run{k % 2}")
    runs = read_trajectories(path)
    assert [t.source for t in runs] == [f"{path}::trajectory=run0", f"{path}::trajectory=run1"]
    for read, written in zip(runs[0].frames, cu_frames[0::2], strict=True):
        _same(read, written)
    plain = tmp_path / "plain.db"
    with ase.db.connect(plain) as db:
        for atoms in cu_frames:
            db.write(atoms)
    (single,) = read_trajectories(plain)
    assert len(single) == len(cu_frames)


def test_list_and_folder_keep_order(tmp_path, cu_frames, molecule_frames):
    ase.io.write(tmp_path / "b.traj", molecule_frames)
    ase.io.write(tmp_path / "a.extxyz", cu_frames)
    (tmp_path / "notes.txt").write_text("ignored")
    from_folder = read_trajectories(tmp_path)
    assert [len(t) for t in from_folder] == [len(cu_frames), len(molecule_frames)]
    from_list = read_trajectories([tmp_path / "b.traj", tmp_path / "a.extxyz"])
    assert [len(t) for t in from_list] == [len(molecule_frames), len(cu_frames)]
    for read, written in zip(from_list[0].frames, molecule_frames, strict=True):
        _same(read, written, atol=1e-10)


def test_missing_path_empty_folder_unknown_suffix(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_trajectories(tmp_path / "nope.traj")
    with pytest.raises(DataError, match="holds no trajectory files"):
        read_trajectories(tmp_path)
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(DataError, match="unknown suffix"):
        read_trajectories(tmp_path / "x.csv")
    with pytest.raises(DataError, match="no data paths"):
        read_trajectories([])


def test_corrupt_and_truncated_files_name_the_file(tmp_path, cu_frames):
    garbage = tmp_path / "garbage.extxyz"
    garbage.write_text("3\nnot an extxyz header\nCu 0 0\n")
    with pytest.raises(DataError, match="garbage.extxyz"):
        read_trajectories(garbage)
    good = tmp_path / "good.traj"
    ase.io.write(good, cu_frames)
    truncated = tmp_path / "truncated.traj"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DataError, match="truncated.traj"):
        read_trajectories(truncated)
    broken_db = tmp_path / "broken.db"
    broken_db.write_bytes(b"this is not sqlite" * 10)
    with pytest.raises(DataError, match="broken.db"):
        read_trajectories(broken_db)
