"""AtomsDataModule and ArrayDataModule: batches, pairs, statistics, split records and errors."""

from __future__ import annotations

from pathlib import Path

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.data import ArrayDataModule, AtomsDataModule, DataError
from sciml.data.splits import frame_index
from sciml.data.systems import OrnsteinUhlenbeck


def test_frame_batches_carry_the_graph_fields(tmp_path, cu_frames, molecule_frames):
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    ase.io.write(tmp_path / "mol.traj", molecule_frames)
    dm = AtomsDataModule(paths=str(tmp_path), cutoff=3.0, split=(0.5, 0.5, 0.0), batch_size=3, labels=["energy"])
    assert dm.species == [1, 6, 8, 29]
    batch = next(iter(dm.train_dataloader()))
    n_structures = batch.num_graphs
    assert batch.cell.shape == (n_structures, 3, 3) and batch.pbc.shape == (n_structures, 3)
    assert batch.energy.shape == (n_structures,) and batch.forces.shape == batch.pos.shape
    i, j = batch.edge_index
    assert torch.all(batch.batch[i] == batch.batch[j])  # edges stay inside a structure
    vectors = batch.pos[j] + batch.shifts - batch.pos[i]
    assert torch.all(vectors.norm(dim=1) < 3.0)
    record = dm.split_record
    assert record["seed"] == 0 and len(record["train"]) + len(record["val"]) == 2


def test_pairs_never_cross_trajectories(tmp_path, cu_frames):
    for k in range(3):
        frames = [f.copy() for f in cu_frames]
        for t, atoms in enumerate(frames):
            atoms.info["tag"] = 100 * k + t  # identifies trajectory and time
        ase.io.write(tmp_path / f"run{k}.extxyz", frames)
    dm = AtomsDataModule(paths=str(tmp_path), cutoff=3.0, lagtime=2, split=(1 / 3, 1 / 3, 1 / 3))
    seen = set()
    for name in ("train", "val", "test"):
        dataset = dm.dataset(name)
        for k in range(len(dataset)):
            trajectory, t = dataset.index[k].tolist()
            first, second = dataset[k]
            assert torch.allclose(
                second.pos,
                torch.as_tensor(dm.records[trajectory][t + 2]["positions"], dtype=second.pos.dtype),
            )
            seen.add((trajectory, t))
    assert len(seen) == 3 * (len(cu_frames) - 2)


def test_cached_graphs_are_built_once_and_equal_fresh_ones(tmp_path, cu_frames):
    ase.io.write(tmp_path / "run.extxyz", cu_frames)
    fresh = AtomsDataModule(paths=str(tmp_path / "run.extxyz"), cutoff=3.0, lagtime=1, split=(0.5, 0.5, 0.0))
    cached = AtomsDataModule(paths=str(tmp_path / "run.extxyz"), cutoff=3.0, lagtime=1, split=(0.5, 0.5, 0.0),
                             cache_graphs=True)  # fmt: skip
    for name in ("train", "val"):
        for k in range(len(fresh.dataset(name))):
            for a, b in zip(fresh.dataset(name)[k], cached.dataset(name)[k], strict=True):
                assert torch.equal(a.pos, b.pos) and torch.equal(a.edge_index, b.edge_index)
    built = len(cached._graph_cache)
    assert built == len(cu_frames)  # every frame once, shared by the splits and by new datasets
    first = cached.dataset("train")[0][0]
    assert cached.dataset("train")[0][0] is first and len(cached._graph_cache) == built


def test_energy_reference_recovers_per_element_energies(tmp_path):
    rng = np.random.default_rng(0)
    true = {1: -13.6, 6: -1029.0, 8: -2041.0}
    frames = []
    for _ in range(40):
        numbers = rng.choice(list(true), size=rng.integers(2, 9))
        atoms = Atoms(numbers=numbers, positions=rng.normal(scale=3, size=(len(numbers), 3)))
        energy = sum(true[int(z)] for z in numbers) + rng.normal(scale=1e-3)
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=rng.normal(scale=0.5, size=(len(numbers), 3)))
        frames.append(atoms)
    ase.io.write(tmp_path / "mix.traj", frames)
    dm = AtomsDataModule(paths=str(tmp_path / "mix.traj"), cutoff=2.0)
    np.testing.assert_allclose(dm.energy_reference, [true[1], true[6], true[8]], atol=2e-3)
    assert 0.4 < dm.force_rms < 0.6


def test_datamodule_errors(tmp_path, cu_frames):
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    path = str(tmp_path / "cu.traj")
    wrong_species = AtomsDataModule(paths=path, cutoff=3.0, species=["H", "O"])
    too_long = AtomsDataModule(paths=path, cutoff=3.0, lagtime=6)  # files are read lazily, on first use
    with pytest.raises(DataError, match=r"cu.traj', frame 0, field 'numbers'"):
        _ = wrong_species.species
    with pytest.raises(DataError, match="lagtime 6 >= trajectory length 6"):
        _ = too_long.species
    with pytest.raises(DataError, match="unknown element symbol 'Xx'"):
        AtomsDataModule(paths=path, cutoff=3.0, species=["Xx"])
    unlabelled = [Atoms(a.numbers, a.positions, cell=a.cell, pbc=True) for a in cu_frames]
    ase.io.write(tmp_path / "bare.traj", unlabelled)
    bare = AtomsDataModule(paths=str(tmp_path / "bare.traj"), cutoff=3.0)
    with pytest.raises(DataError, match=r"bare.traj', frame 0, field 'energy': label is missing"):
        _ = bare.species
    predict = AtomsDataModule(paths=str(tmp_path / "cu.traj"), cutoff=3.0, predict_paths=str(tmp_path / "bare.traj"))
    assert sum(b.num_graphs for b in predict.predict_dataloader()) == len(cu_frames)


def test_array_datamodule_from_system_and_file(tmp_path):
    system = OrnsteinUhlenbeck(theta=1.0, dt=0.5)
    dm = ArrayDataModule(system=system, n_steps=1000, lagtime=2, batch_size=64)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == y.shape == (64, 1)
    np.savez(tmp_path / "ou.npz", trajectories=dm.trajectories[0].numpy())
    from_file = ArrayDataModule(path=str(tmp_path / "ou.npz"), lagtime=2)
    assert torch.equal(from_file.trajectories[0], dm.trajectories[0])
    with pytest.raises(DataError, match="exactly one"):
        ArrayDataModule()
    np.savez(tmp_path / "bad.npz", states=np.zeros(3))
    wrong_field = ArrayDataModule(path=str(tmp_path / "bad.npz"))  # read lazily, on first use
    too_long = ArrayDataModule(system=system, n_steps=1000, lagtime=1000)
    with pytest.raises(DataError, match=r"bad.npz': field 'trajectories' is missing"):
        _ = wrong_field.trajectories
    with pytest.raises(DataError, match="lagtime 1000 >= trajectory length 1000"):
        _ = too_long.trajectories


def test_explicit_train_val_test_files(tmp_path, cu_frames, molecule_frames):
    """Each file whole in the split it is named for (no dealing by seed), statistics from train only."""
    ase.io.write(tmp_path / "train.extxyz", cu_frames)
    ase.io.write(tmp_path / "valid.extxyz", molecule_frames[:3])
    ase.io.write(tmp_path / "test.extxyz", molecule_frames[3:])
    dm = AtomsDataModule(
        train_paths=str(tmp_path / "train.extxyz"),
        val_paths=str(tmp_path / "valid.extxyz"),
        test_paths=[str(tmp_path / "test.extxyz")],
        cutoff=3.0,
        batch_size=4,
    )
    record = dm.split_record
    assert record["mode"] == "explicit files"
    assert [Path(s).name for s, _, _ in record["train"]] == ["train.extxyz"]
    assert record["val"][0][1:] == (0, 3) and record["test"][0][1:] == (0, len(molecule_frames) - 3)
    assert dm.species == [1, 6, 8, 29]
    assert sum(b.num_graphs for b in dm.train_dataloader()) == len(cu_frames)
    assert sum(b.num_graphs for b in dm.val_dataloader()) == 3
    assert sum(b.num_graphs for b in dm.test_dataloader()) == len(molecule_frames) - 3
    cu_only = AtomsDataModule(paths=str(tmp_path / "train.extxyz"), cutoff=3.0, split=(1.0, 0.0, 0.0))
    assert dm.force_rms == pytest.approx(cu_only.force_rms)  # training files only


def test_explicit_and_dealt_splits_exclude_each_other(tmp_path, cu_frames):
    ase.io.write(tmp_path / "cu.traj", cu_frames)
    path = str(tmp_path / "cu.traj")
    with pytest.raises(DataError, match="exactly one of: paths"):
        AtomsDataModule(paths=path, train_paths=path, cutoff=3.0)
    with pytest.raises(DataError, match="exactly one of: paths"):
        AtomsDataModule(val_paths=path, cutoff=3.0)
    with pytest.raises(DataError, match="exactly one of: paths"):
        AtomsDataModule(paths=path, prepared=str(tmp_path / "cu.h5"), cutoff=3.0)


def fitted_reference(data: AtomsDataModule) -> list[float]:
    """Least squares of the training energies on element counts, by numpy (minimum norm)."""
    train = [data.records[t][i] for t, i in frame_index(data.segments["train"]).tolist()]
    counts = np.array([[np.sum(r["numbers"] == z) for z in data.species] for r in train], dtype=float)
    return np.linalg.lstsq(counts, np.array([float(r["energy"]) for r in train]), rcond=None)[0].tolist()


def test_energy_reference_modes(tmp_path, molecule_frames):
    """least_squares (fitted), a mapping in eV, or isolated atoms (MACE's config_type, kept out of the splits)."""
    isolated = []
    for number, energy in ((1, -13.6), (6, -1027.6), (8, -2041.3)):
        atom = Atoms(numbers=[number], positions=[[0.0, 0.0, 0.0]])
        atom.info.update(config_type="IsolatedAtom", REF_energy=energy)
        isolated.append(atom)
    frames = []
    for atoms in molecule_frames:
        frame = Atoms(atoms.numbers, atoms.positions)
        frame.info.update(REF_energy=atoms.get_potential_energy(), config_type="md")
        frame.arrays["REF_forces"] = atoms.get_forces()
        frames.append(frame)
    path = tmp_path / "train.extxyz"
    ase.io.write(path, isolated[:2] + frames + isolated[2:])
    keys = dict(energy_key="REF_energy", forces_key="REF_forces", cutoff=3.0, split=(0.6, 0.2, 0.2))
    data = AtomsDataModule(paths=str(path), energy_reference="isolated_atoms", **keys)
    assert data.species == [1, 6, 8] and data.energy_reference == [-13.6, -1027.6, -2041.3]
    assert sum(len(r) for r in data.records) == len(frames)  # the isolated atoms are in no split
    assert all(r["config_type"] == "md" for trajectory in data.records for r in trajectory)
    mapped = AtomsDataModule(paths=str(path), energy_reference={"H": -1.0, "C": -2.0, 8: -3.0}, **keys)
    assert mapped.energy_reference == [-1.0, -2.0, -3.0]
    ase.io.write(tmp_path / "md_only.extxyz", frames)
    fitted = AtomsDataModule(paths=str(tmp_path / "md_only.extxyz"), **keys)
    assert fitted.energy_reference == pytest.approx(fitted_reference(fitted))
    with pytest.raises(DataError, match=r"the mapping: no energy for \['O'\]"):
        _ = AtomsDataModule(paths=str(path), energy_reference={"H": -1.0, "C": -2.0}, **keys).energy_reference
    ase.io.write(tmp_path / "no_oxygen.extxyz", isolated[:2] + frames)
    missing = AtomsDataModule(paths=str(tmp_path / "no_oxygen.extxyz"), energy_reference="isolated_atoms", **keys)
    with pytest.raises(DataError, match=r"'IsolatedAtom' frames in .*no_oxygen.extxyz.*: no energy for \['O'\]"):
        _ = missing.energy_reference
    with pytest.raises(DataError, match="energy_reference must be one of"):
        AtomsDataModule(paths=str(path), energy_reference="average", **keys)


def test_epoch_sampler_permutes_every_item_or_one_bootstrap_resample():
    """Without bootstrap each epoch is a permutation of all items, reproducible from seed + epoch; with it,
    each epoch permutes one fixed resample with replacement (about 1 - 1/e = 63 % of the items distinct),
    the resample set by the seed."""
    from collections import Counter

    from sciml.data.split_datamodule import EpochSeededSampler

    plain = EpochSeededSampler(1000, seed=3)
    first = list(plain)
    plain.set_epoch(1)
    assert sorted(first) == list(range(1000)) and list(plain) != first
    plain.set_epoch(0)
    assert list(plain) == first  # resumed at epoch 0: the same batches
    bagged = EpochSeededSampler(1000, seed=3, bootstrap=True)
    epochs = []
    for epoch in range(2):
        bagged.set_epoch(epoch)
        epochs.append(list(bagged))
    assert len(epochs[0]) == 1000 and epochs[0] != epochs[1] and Counter(epochs[0]) == Counter(epochs[1])
    assert 0.58 < len(set(epochs[0])) / 1000 < 0.68
    other = EpochSeededSampler(1000, seed=4, bootstrap=True)
    assert Counter(other) != Counter(epochs[0])
