"""The datasets in data/ load through the data layer and carry their provenance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sciml.data import ArrayDataModule, AtomsDataModule

DATA = Path(__file__).resolve().parents[2] / "data"
ATOMS = {
    "ethanol_gfn2.extxyz": ({1, 6, 8}, ["energy", "forces"]),
    "aspirin_gfn2.extxyz": ({1, 6, 8}, ["energy", "forces"]),
    "cu_emt": ({29}, ["energy", "forces", "stress"]),
    "alanine_dipeptide_600K.traj": ({1, 6, 7, 8}, ["energy", "forces"]),
    "n_methylacetamide_dft/test_400K.extxyz": ({1, 6, 7, 8}, ["energy", "forces"]),  # PBE/def2-SVP
}


@pytest.mark.parametrize("name", sorted(ATOMS))
def test_atoms_datasets_load_with_labels_and_provenance(name):
    species, labels = ATOMS[name]
    path = DATA / name
    provenance = path / "README.provenance.json" if path.is_dir() else Path(f"{path}.provenance.json")
    record = json.loads(provenance.read_text())
    assert {"command", "method", "seed"} <= set(record)
    dm = AtomsDataModule(paths=str(path), cutoff=5.0, labels=labels)
    assert set(dm.species) == species
    frames = [f for trajectory in dm.records for f in trajectory]
    assert len(frames) >= 100
    forces = np.concatenate([f["forces"] for f in frames])
    assert 0.05 < forces.std() < 10  # eV/Å: real, varied labels
    if "stress" in labels:
        assert np.std([f["stress"][0, 0] for f in frames]) > 1e-4


@pytest.mark.parametrize("name", ["ou", "ar1", "logistic", "prinz"])
def test_system_samples_load(name):
    path = DATA / "systems" / f"{name}.npz"
    assert Path(f"{path}.provenance.json").exists()
    dm = ArrayDataModule(path=str(path), lagtime=1)
    assert len(dm.dataset("train")) > 1000
    with np.load(path) as archive:
        assert archive["singular_values"][0] == pytest.approx(1.0)
