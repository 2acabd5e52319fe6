"""The label store: one write per frame, resumed with its keys, a half-written tail cut off and kept."""

from __future__ import annotations

import math

import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active import LabelStore


def labelled_frame(shift: float) -> Atoms:
    atoms = Atoms("OH2", positions=[[0.0, 0.0, shift], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])
    atoms.calc = SinglePointCalculator(atoms, energy=-5.0 - shift, forces=np.full((3, 3), shift))
    return atoms


def test_frames_round_trip_with_round_uncertainty_and_reason(tmp_path):
    store = LabelStore(tmp_path)
    store.add(labelled_frame(0.1), "seed-0", 0, float("nan"), "seed", "GFN2-xTB")
    store.add(labelled_frame(0.2), "round1-step40", 1, 0.31, "force uncertainty 0.310 eV/Å at 500 K", "GFN2-xTB")
    store.add_failure(labelled_frame(0.3), "round1-step90", 1, 0.5, "picked", "SCF not converged\nin 2 cycles")
    again = LabelStore(tmp_path)
    assert again.keys == {"seed-0", "round1-step40", "round1-step90"}
    assert again.rounds() == {0: 1, 1: 1}
    second = again.labelled[1]
    assert second.info["reason"] == "force uncertainty 0.310 eV/Å at 500 K" and second.info["uncertainty"] == 0.31
    assert second.get_potential_energy() == -5.2 and np.allclose(second.get_forces(), 0.2)
    assert math.isnan(again.labelled[0].info["uncertainty"])
    assert again.failed[0].info["error"] == "SCF not converged in 2 cycles"


def test_a_half_written_last_frame_is_cut_off_and_kept_aside(tmp_path):
    store = LabelStore(tmp_path)
    store.add(labelled_frame(0.1), "seed-0", 0, float("nan"), "seed", "GFN2-xTB")
    with open(store.labelled_path, "a") as handle:
        handle.write('3\nProperties=species:S:1:pos:R:3 key="seed-1"\nO 0.0 0.0')  # a kill mid-write
    again = LabelStore(tmp_path)
    assert again.keys == {"seed-0"}
    assert (tmp_path / "labelled.extxyz.partial").read_text().endswith("O 0.0 0.0")
    again.add(labelled_frame(0.2), "seed-1", 0, float("nan"), "seed", "GFN2-xTB")
    assert len(LabelStore(tmp_path).labelled) == 2
