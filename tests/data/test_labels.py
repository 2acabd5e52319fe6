"""Frame validation: every bad input gets a DataError naming file, frame and field."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.data import DataError, LabelKeys, read_frame


def test_record_fields_and_units(cu_frames):
    record = read_frame(cu_frames[0], "cu.traj", 0, required=["energy", "forces", "stress"])
    assert record["positions"].shape == (4, 3) and record["numbers"].tolist() == [29] * 4
    assert record["stress"].shape == (3, 3)
    np.testing.assert_allclose(record["stress"], record["stress"].T)
    np.testing.assert_allclose(record["forces"], cu_frames[0].get_forces())


def test_labels_from_info_and_arrays_keys():
    atoms = Atoms("H2", positions=[[0, 0, 0], [0, 0, 0.74]])
    atoms.info["dft_energy"] = -1.5
    atoms.arrays["dft_forces"] = np.array([[0, 0, 1.0], [0, 0, -1.0]])
    atoms.info["dft_stress"] = np.arange(9.0).reshape(3, 3)
    record = read_frame(
        atoms,
        "h2.xyz",
        0,
        keys=LabelKeys("dft_energy", "dft_forces", "dft_stress"),
        required=["energy", "forces", "stress"],
    )
    assert float(record["energy"]) == -1.5 and record["forces"][0, 2] == 1.0
    assert record["stress"][2, 1] == 7.0


def _bad(atoms, match, **kwargs):
    with pytest.raises(DataError, match=match):
        read_frame(atoms, "bad.traj", 7, **kwargs)


def test_bad_inputs_name_file_frame_and_field(cu_frames):
    atoms = cu_frames[0]
    _bad(Atoms(), r"file 'bad.traj', frame 7: the frame has zero atoms")
    _bad(
        atoms,
        r"frame 7, field 'numbers'.*\['Cu'\] not in the configured species \['H', 'O'\]",
        species=[1, 8],
    )
    nan = atoms.copy()
    nan.positions[1, 2] = np.nan
    _bad(nan, r"frame 7, field 'positions': contains NaN or inf")
    for label, value in [("energy", np.inf), ("forces", np.full((4, 3), np.nan))]:
        broken = atoms.copy()
        results = {"energy": 1.0, "forces": np.zeros((4, 3)), label: value}
        broken.calc = SinglePointCalculator(broken, **results)
        _bad(broken, rf"frame 7, field '{label}': contains NaN or inf")
    wrong = atoms.copy()
    wrong.calc = SinglePointCalculator(wrong, energy=1.0, forces=np.zeros((3, 3)))
    _bad(wrong, r"field 'forces': expected shape \(4, 3\), got \(3, 3\)")
    wrong.calc = SinglePointCalculator(wrong, energy=1.0, forces=np.zeros((4, 3)), stress=np.zeros(5))
    _bad(wrong, r"field 'stress': expected Voigt")
    unlabelled = atoms.copy()
    _bad(unlabelled, r"field 'forces': label is missing but training needs it", required=["forces"])
    assert "forces" not in read_frame(unlabelled, "ok.traj", 0)  # optional when not required
