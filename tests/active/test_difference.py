"""The expensive level as a difference to the cheap one, distilled (sciml.active.difference)."""

from __future__ import annotations

import json

import ase.io
import numpy as np
import pytest
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.active import ActiveLearning, LabelStore, Oracle, gfn2_xtb
from sciml.active.difference import DifferenceLevel, DifferenceSettings, pick_uncertain
from sciml.active.exploration import ExplorationSettings
from sciml.active.training import TrainingSettings

WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])


class StiffenedXTB(Oracle):
    """An 'expensive level': GFN2-xTB plus a harmonic O-H stretch term (k = 2 eV/Å², about 0.97 Å) and 0.5 eV per
    atom, so that expensive - cheap is a smooth function of the geometry, as DFT - GFN2-xTB is; calls counted."""

    def __init__(self) -> None:
        super().__init__("stiffened GFN2-xTB", gfn2_xtb().factory)
        self.calls = 0

    def compute(self, atoms: Atoms) -> Atoms:
        self.calls += 1
        labelled = super().compute(atoms)
        energy, forces = labelled.get_potential_energy() + 0.5 * len(atoms), labelled.get_forces().copy()
        for hydrogen in (1, 2):
            bond = atoms.positions[hydrogen] - atoms.positions[0]
            length = np.linalg.norm(bond)
            energy += (length - 0.97) ** 2
            push = -2.0 * (length - 0.97) * bond / length
            forces[hydrogen] += push
            forces[0] -= push
        labelled.calc = SinglePointCalculator(labelled, energy=energy, forces=forces)
        return labelled


def tiny_difference(calibration_frames: int = 3) -> DifferenceSettings:
    exploration = ExplorationSettings(temperature=300, start_temperature=100, ramp_ps=0.01, hold_ps=0.01,
                                      threshold=1e-4, stop_factor=1e6, cap=3, spacing_fs=2.0)  # fmt: skip
    training = TrainingSettings(epochs=2, epochs_per_round=1, batch_size=4, validation_fraction=0.25)
    return DifferenceSettings(exploration, training, pool_frames=12, pool_spacing_fs=1.0, seed_frames=4, cap=2,
                              rounds=2, threshold=1e-6, spacing_fs=0.0, final_preset="small", difference_epochs=1,
                              final_epochs=1, calibration_frames=calibration_frames, source="smiles:O")  # fmt: skip


def test_the_difference_is_labelled_where_uncertain_distilled_and_resumed_without_new_calls(tmp_path):
    """The pool is the cheap model's MD labelled by the cheap oracle; the expensive oracle labels the seeds, each
    round's picks and the calibration frames, nothing twice; the distilled set holds the expensive labels where
    they exist and cheap + the last difference model elsewhere; a second run makes no call."""
    pytest.importorskip("tblite")
    from sciml.active.two_level import learn_on_two_levels
    from sciml.calculators import SciMLCalculator
    from tests.active.test_loop import tiny_settings

    expensive = StiffenedXTB()

    def levels():
        return learn_on_two_levels(
            tmp_path,
            lambda folder: ActiveLearning(folder, gfn2_xtb(), tiny_settings(rounds=1, uncertainty="last-layer"),
                                          report=lambda line: None),
            lambda folder, spent: DifferenceLevel(folder, gfn2_xtb(), expensive, tiny_difference(),
                                                  report=lambda line: None),
            WATER, report=lambda line: None,
        )  # fmt: skip

    model = levels()
    assert model == tmp_path / "model.ckpt" and (tmp_path / "final" / "calibrated.ckpt").exists()
    pool = ase.io.read(tmp_path / "pool.extxyz", index=":")
    assert len(pool) == 12 and all("time_fs" in frame.info for frame in pool)
    store = LabelStore(tmp_path)
    keys = [record.key for record in store.labelled_records]
    picked = [key for key, record in zip(keys, store.labelled_records, strict=True) if record.round in (1, 2)]
    assert expensive.calls == len(keys) == 4 + 2 + 2 + 3 and len(set(keys)) == len(keys)
    assert all(key.startswith("pool-") for key in picked) and keys[-3:] == [f"calibration-{k}" for k in range(3)]
    distilled = ase.io.read(tmp_path / "distilled.extxyz", index=":")
    assert len(distilled) == len(pool)
    labelled = {int(k.removeprefix("pool-")): frame for k, frame in zip(keys, store.labelled, strict=True)
                if k.startswith("pool-")}  # fmt: skip
    difference = SciMLCalculator.from_checkpoint(tmp_path / "difference" / "model.ckpt", dtype="float64")
    for index, frame in enumerate(distilled):
        if index in labelled:
            expected = labelled[index].get_potential_energy()
        else:
            copy_ = Atoms(pool[index].numbers, pool[index].positions)
            copy_.calc = difference
            expected = pool[index].get_potential_energy() + copy_.get_potential_energy()
        assert frame.get_potential_energy() == pytest.approx(expected, abs=1e-6)
    check = json.loads((tmp_path / "final" / "check.json").read_text())
    assert check["frames"] == 3 and check["force_mae_ev_per_a"] > 0
    record = json.loads((tmp_path / "two_level.json").read_text())
    assert record["levels"][1]["oracle_calls"] == expensive.calls and record["levels"][1]["check"] == check
    # the composite: GFN2-xTB + the difference model, checked on the same calibration frames
    composite_check = json.loads((tmp_path / "difference" / "check.json").read_text())
    assert record["levels"][1]["composite_check"] == composite_check and composite_check["frames"] == 3
    assert record["composite"] == str(tmp_path / "composite.ckpt")
    composite = SciMLCalculator.from_checkpoint(tmp_path / "composite.ckpt", dtype="float64", compile="eager")
    calibration = store.labelled[-1]

    def on_calibration_frame(calculator) -> Atoms:
        atoms = Atoms(calibration.numbers, calibration.positions)
        atoms.calc = calculator
        return atoms

    energies = [on_calibration_frame(c).get_potential_energy() for c in (difference, gfn2_xtb().factory())]
    assert on_calibration_frame(composite).get_potential_energy() == pytest.approx(sum(energies), abs=1e-8)
    error = abs(on_calibration_frame(composite).get_forces() - calibration.get_forces()).mean()
    assert composite_check["force_mae_ev_per_a"] > 0 and error < 1.0  # the composite predicts the expensive level
    trained = (tmp_path / "final" / "model.ckpt").stat().st_mtime_ns
    levels()  # resumed: nothing labelled or trained again (the calibration's labels do not make a new final model)
    assert expensive.calls == 4 + 2 + 2 + 3 and (tmp_path / "final" / "model.ckpt").stat().st_mtime_ns == trained


def test_pick_uncertain_takes_the_most_uncertain_unlabelled_frames_spaced_in_each_run():
    pool = []
    for run, time in ((0, 0.0), (0, 10.0), (0, 100.0), (1, 10.0), (1, 200.0)):
        frame = WATER.copy()
        frame.info.update(replica=run, time_fs=time)
        pool.append(frame)
    uncertainty = np.array([0.5, 0.9, 0.4, 0.8, 0.01])
    # 1 first; 0 is 10 fs from it in run 0; 3 in run 1; 2 is 90 fs from 1; 4 is below the threshold
    assert pick_uncertain(pool, uncertainty, set(), 0.05, 9, 50.0) == [1, 3, 2]
    assert pick_uncertain(pool, uncertainty, {1}, 0.05, 2, 50.0) == [3, 0]
    assert pick_uncertain(pool, uncertainty, set(), 0.95, 9, 50.0) == []


def test_difference_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="calibration_frames"):
        DifferenceSettings(calibration_frames=1)
    with pytest.raises(ValueError, match="final_share"):
        DifferenceSettings(final_share=1.0)
    with pytest.raises(ValueError, match="pool_frames"):
        DifferenceSettings(pool_frames=1)


def test_sciml_learn_transfer_difference_runs_both_levels_from_the_command_line(tmp_path):
    """`--transfer difference` builds the expensive level from the loop's options: --seed-frames expensive seeds
    from the pool, --transfer-cap picks a round, --calibration-frames of the final model's MD; two_level.json
    counts them."""
    pytest.importorskip("tblite")
    from sciml.commands.learn import main

    summary = main(["--smiles", "O", "--pretrain", "gfn2-xtb", "--oracle", "gfn2-xtb", "--transfer", "difference",
                    "--rounds", "1", "--seed-frames", "3", "--epochs", "1", "--epochs-per-round", "1",
                    "--final-epochs", "1", "--ramp-ps", "0.005", "--hold-ps", "0.005", "--threshold", "1e-4",
                    "--stop-factor", "1e6", "--cap", "2", "--confirmations", "0", "--calibration-frames", "2",
                    "--pool-frames", "6", "--pool-spacing-fs", "1", "--difference-epochs", "1", "--transfer-rounds",
                    "1", "--transfer-cap", "2", "--transfer-threshold", "1e-9", "--spacing-fs", "0", "--no-progress",
                    "--output", str(tmp_path)])  # fmt: skip
    assert summary["model"] == str(tmp_path / "model.ckpt") and summary["composite"] == str(tmp_path / "composite.ckpt")
    assert len(ase.io.read(tmp_path / "pool.extxyz", index=":")) == 6
    assert summary["levels"][1]["oracle_calls"] == 3 + 2 + 2  # seeds, round 1's picks, calibration
    level = json.loads((tmp_path / "summary.json").read_text())
    assert level == summary and (tmp_path / "final" / "check.json").exists()
