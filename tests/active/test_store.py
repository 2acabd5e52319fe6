"""The label store: one write per frame, resumed with its keys, a half-written tail cut off and kept."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active import LabelStore
from sciml.active.picks import Pick


def labelled_frame(shift: float) -> Atoms:
    atoms = Atoms("OH2", positions=[[0.0, 0.0, shift], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])
    atoms.calc = SinglePointCalculator(atoms, energy=-5.0 - shift, forces=np.full((3, 3), shift))
    return atoms


def add(store: LabelStore, shift: float, key: str, round: int, uncertainty: float, reason: str) -> None:
    frame = labelled_frame(shift)
    store.add(frame, Pick(key, frame, uncertainty, reason), round, "GFN2-xTB")


def test_frames_round_trip_with_round_uncertainty_and_reason(tmp_path):
    store = LabelStore(tmp_path)
    add(store, 0.1, "seed-0", 0, float("nan"), "seed")
    add(store, 0.2, "round1-step40", 1, 0.31, "force uncertainty 0.310 eV/Å at 500 K")
    store.add_failure(Pick("round1-step90", labelled_frame(0.3), 0.5, "picked"), 1, "SCF not converged\nin 2 cycles")
    again = LabelStore(tmp_path)
    assert again.keys == {"seed-0", "round1-step40", "round1-step90"}
    assert again.rounds() == {0: 1, 1: 1}
    second, record = again.labelled[1], again.labelled_records[1]
    assert record.reason == "force uncertainty 0.310 eV/Å at 500 K" and record.uncertainty == 0.31
    assert (record.key, record.round, record.outcome) == ("round1-step40", 1, "GFN2-xTB")
    assert second.get_potential_energy() == -5.2 and np.allclose(second.get_forces(), 0.2)
    assert math.isnan(again.labelled_records[0].uncertainty)
    assert again.failed_records[0].outcome == "SCF not converged in 2 cycles"
    assert again.labelled_with(["round1-step40", "round1-step90"]) == [second]


def test_a_store_file_without_its_fields_is_refused_naming_the_frame(tmp_path):
    import ase.io

    ase.io.write(tmp_path / "labelled.extxyz", [labelled_frame(0.1)], format="extxyz")
    with pytest.raises(ValueError, match=r"labelled.extxyz' frame 0 lacks the store's fields \['key', 'round'"):
        LabelStore(tmp_path)


def test_a_half_written_last_frame_is_cut_off_and_kept_aside(tmp_path):
    store = LabelStore(tmp_path)
    add(store, 0.1, "seed-0", 0, float("nan"), "seed")
    with open(store.labelled_path, "a") as handle:
        handle.write('3\nProperties=species:S:1:pos:R:3 key="seed-1"\nO 0.0 0.0')  # a kill mid-write
    again = LabelStore(tmp_path)
    assert again.keys == {"seed-0"}
    assert (tmp_path / "labelled.extxyz.partial").read_text().endswith("O 0.0 0.0")
    add(again, 0.2, "seed-1", 0, float("nan"), "seed")
    assert len(LabelStore(tmp_path).labelled) == 2
