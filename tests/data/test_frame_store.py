"""Prepared frame stores (``sciml data prepare``): the same frames, splits and statistics as in memory,
read lazily; bad input and damaged stores give DataError naming the file."""

from __future__ import annotations

import json

import ase.io
import h5py
import numpy as np
import pytest
import torch
from ase import Atoms

from sciml.cli import main
from sciml.data import AtomsDataModule, DataError
from sciml.data.frame_store import FrameStore
from sciml.data.labels import LabelKeys
from sciml.data.prepare import prepare_frame_store


def assert_same_items(first: AtomsDataModule, second: AtomsDataModule) -> None:
    for name in ("train", "val", "test"):
        a, b = first.dataset(name), second.dataset(name)
        assert len(a) == len(b) > 0
        for k in range(len(a)):
            for ga, gb in zip(*(x if isinstance(x, tuple) else (x,) for x in (a[k], b[k])), strict=True):
                assert ga.keys() == gb.keys()
                for key in ga.keys():
                    va, vb = ga[key], gb[key]
                    assert torch.equal(va, vb) if torch.is_tensor(va) else va == vb, (name, k, key)


def many_trajectories(tmp_path, cu_frames, molecule_frames, stress: bool = False) -> list[str]:
    """Three files; with ``stress`` the first has stress labels, the others none."""
    if not stress:
        for atoms in cu_frames:
            atoms.calc.results.pop("stress")
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    for atoms in cu_frames:
        atoms.calc.results.pop("stress", None)
    ase.io.write(tmp_path / "mol.extxyz", molecule_frames)
    ase.io.write(tmp_path / "cu_again.extxyz", cu_frames[::-1])
    return [str(tmp_path / name) for name in ("cu.traj", "mol.extxyz", "cu_again.extxyz")]


@pytest.mark.parametrize("split_mode", ["trajectory", "contiguous", "random"])
def test_a_store_gives_the_in_memory_frames_splits_and_statistics(tmp_path, cu_frames, molecule_frames, split_mode):
    paths = many_trajectories(tmp_path, cu_frames, molecule_frames)
    split = dict(split=(0.5, 0.25, 0.25), split_mode=split_mode, seed=3)
    summary = prepare_frame_store(tmp_path / "all.h5", paths, buffer_frames=4, **split)  # several flushes
    assert summary["frames"]["train"] + summary["frames"]["val"] + summary["frames"]["test"] == 17
    assert summary["labels"] == ["energy", "forces"]
    memory = AtomsDataModule(paths=paths, cutoff=3.0, **split)
    stored = AtomsDataModule(prepared=str(tmp_path / "all.h5"), cutoff=3.0, seed=3)
    assert stored.species == memory.species == [1, 6, 8, 29]
    assert stored.segments == memory.segments
    assert stored.energy_reference == pytest.approx(memory.energy_reference, rel=1e-12)
    assert stored.force_rms == pytest.approx(memory.force_rms, rel=1e-12)
    assert_same_items(memory, stored)
    first, second = next(iter(memory.train_dataloader())), next(iter(stored.train_dataloader()))
    assert torch.equal(first.pos, second.pos)  # same seeded shuffling


def test_labels_of_some_frames_only_are_kept_for_those_frames(tmp_path, cu_frames, molecule_frames):
    paths = many_trajectories(tmp_path, cu_frames, molecule_frames, stress=True)
    summary = prepare_frame_store(tmp_path / "all.h5", paths, buffer_frames=4)
    assert summary["labels"] == ["energy", "forces", "stress"]
    memory = AtomsDataModule(paths=paths, cutoff=3.0)
    stored = FrameStore(tmp_path / "all.h5")
    assert stored.complete_labels == ["energy", "forces"]
    for trajectory, frames in enumerate(memory.records):
        for t, expected in enumerate(frames):
            record = stored.records[trajectory][t]
            assert record.keys() == expected.keys()
            assert all(np.array_equal(record[k], expected[k]) for k in expected if k != "config_type")


def test_explicit_files_pairs_isolated_atoms_and_label_keys(tmp_path, molecule_frames):
    isolated = []
    for number, energy in ((1, -13.6), (6, -1027.6), (8, -2041.3)):
        atom = Atoms(numbers=[number], positions=[[0.0, 0.0, 0.0]])
        atom.info.update(config_type="IsolatedAtom", REF_energy=energy)
        isolated.append(atom)
    frames = []
    for atoms in molecule_frames * 2:
        frame = Atoms(atoms.numbers, atoms.positions)
        frame.info.update(REF_energy=atoms.get_potential_energy(), config_type="md")
        frame.arrays["REF_forces"] = atoms.get_forces()
        frames.append(frame)
    for name, part in (("train", isolated + frames[:6]), ("val", frames[6:8]), ("test", frames[8:])):
        ase.io.write(tmp_path / f"{name}.extxyz", part)
    files = {f"{name}_paths": str(tmp_path / f"{name}.extxyz") for name in ("train", "val", "test")}
    keys = LabelKeys(energy="REF_energy", forces="REF_forces")
    prepare_frame_store(tmp_path / "mol.h5", keys=keys, **files)
    options = dict(cutoff=3.0, energy_reference="isolated_atoms")
    memory = AtomsDataModule(energy_key="REF_energy", forces_key="REF_forces", **files, **options)
    stored = AtomsDataModule(prepared=str(tmp_path / "mol.h5"), **options)
    assert stored.energy_reference == memory.energy_reference == [-13.6, -1027.6, -2041.3]
    assert stored.split_record["train"] == memory.split_record["train"]
    assert_same_items(memory, stored)
    assert stored.records[0][0]["config_type"] == "md"
    pairs = AtomsDataModule(prepared=str(tmp_path / "mol.h5"), cutoff=3.0, lagtime=1, split=(1, 0, 0))
    first, second = pairs.dataset("train")[0]
    assert torch.equal(second.pos, torch.as_tensor(frames[1].positions, dtype=torch.float32))
    with pytest.raises(DataError, match="lagtime 2 >= trajectory length 2 frames"):
        _ = AtomsDataModule(prepared=str(tmp_path / "mol.h5"), cutoff=3.0, lagtime=2).species


def test_the_store_is_read_lazily_and_by_dataloader_workers(tmp_path, cu_frames):
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    prepare_frame_store(tmp_path / "cu.h5", str(tmp_path / "cu.traj"), split=(0.5, 0.5, 0.0))
    store = FrameStore(tmp_path / "cu.h5")
    assert store._handle is None  # opening reads the index only
    assert np.array_equal(store.records[0][2]["positions"], cu_frames[2].positions)
    assert set(store.atom_start.tolist()) == {4 * k for k in range(7)}
    data = AtomsDataModule(prepared=str(tmp_path / "cu.h5"), cutoff=3.0, num_workers=1, batch_size=2)
    batches = list(data.val_dataloader())  # a worker process opens its own handle
    assert sum(b.num_graphs for b in batches) == 3


def test_bad_inputs_and_damaged_stores_name_the_file(tmp_path, cu_frames, molecule_frames):
    for atoms in cu_frames:
        atoms.calc.results.pop("stress")
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    with pytest.raises(DataError, match="exactly one of|either paths"):
        prepare_frame_store(tmp_path / "x.h5", str(tmp_path / "cu.traj"), train_paths=str(tmp_path / "cu.traj"))
    bad = []
    for atoms in molecule_frames:
        frame = Atoms(atoms.numbers, atoms.positions)
        frame.info["REF_energy"], frame.arrays["REF_forces"] = atoms.get_potential_energy(), atoms.get_forces()
        bad.append(frame)
    bad[3].arrays["REF_forces"][1, 2] = np.inf
    ase.io.write(tmp_path / "bad.extxyz", bad)
    with pytest.raises(DataError, match=r"bad.extxyz', frame 3, field 'forces'"):
        prepare_frame_store(
            tmp_path / "bad.h5", str(tmp_path / "bad.extxyz"), keys=LabelKeys("REF_energy", "REF_forces")
        )
    assert not list(tmp_path.glob("*bad*.h5"))  # nothing half-written is left
    text = tmp_path / "cut.extxyz"
    ase.io.write(text, molecule_frames)
    text.write_text(text.read_text()[:-200])
    with pytest.raises(DataError, match=r"cut.extxyz' could not be read after 4 frame"):
        prepare_frame_store(tmp_path / "cut.h5", str(text))
    unlabelled = [Atoms(a.numbers, a.positions) for a in molecule_frames]
    ase.io.write(tmp_path / "plain.extxyz", unlabelled)
    with pytest.raises(DataError, match=r"plain.extxyz', frame 0, field 'energy'"):
        prepare_frame_store(tmp_path / "plain.h5", str(tmp_path / "plain.extxyz"))
    prepare_frame_store(tmp_path / "cu.h5", str(tmp_path / "cu.traj"))
    with pytest.raises(FileExistsError, match="cu.h5' already exists; pass --overwrite"):
        prepare_frame_store(tmp_path / "cu.h5", str(tmp_path / "cu.traj"))
    with pytest.raises(DataError, match=r"labels \[.stress.\] are not stored for every frame"):
        _ = AtomsDataModule(prepared=str(tmp_path / "cu.h5"), cutoff=3.0, labels=["stress"]).frames
    with pytest.raises(DataError, match=r"elements \[29\] of the store are not in data.species"):
        _ = AtomsDataModule(prepared=str(tmp_path / "cu.h5"), cutoff=3.0, species=["H"]).frames
    with pytest.raises(DataError, match="energy_key/forces_key/stress_key are read by `sciml data prepare`"):
        AtomsDataModule(prepared=str(tmp_path / "cu.h5"), cutoff=3.0, energy_key="E")
    with h5py.File(tmp_path / "other.h5", "w") as other:
        other["x"] = [1]
    with pytest.raises(DataError, match=r"other.h5' is not a sciml frame store"):
        FrameStore(tmp_path / "other.h5")
    (tmp_path / "cut.h5").write_bytes((tmp_path / "cu.h5").read_bytes()[:3000])
    with pytest.raises(DataError, match=r"cut.h5' is not a readable sciml frame store"):
        FrameStore(tmp_path / "cut.h5")


def test_sciml_data_prepare_then_fit(tmp_path, monkeypatch, capsys, molecule_frames):
    ase.io.write(tmp_path / "mol.extxyz", molecule_frames * 4)
    monkeypatch.chdir(tmp_path)
    main(["data", "prepare", "--paths", "mol.extxyz", "--split-mode", "random", "--output", "mol.h5"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["frames"] == {"train": 16, "val": 2, "test": 2} and summary["labels"] == ["energy", "forces"]
    model = "{class_path: sciml.models.E2Former, init_args: {channels: 8, lmax: 1, layers: 1, heads: 2}}"
    main(["fit", "--data=sciml.data.AtomsDataModule", "--data.prepared=mol.h5", "--data.cutoff=3.0",
          "--model=sciml.training.PotentialModule", f"--model.model={model}", "--trainer.max_epochs=1",
          "--trainer.logger=false", "--trainer.enable_progress_bar=false", "--trainer.enable_checkpointing=false",
          f"--trainer.default_root_dir={tmp_path}"])  # fmt: skip
