"""Uncertainties where a user meets them: ``sciml md`` logging, flagging and stopping on the largest per-atom
force uncertainty (its frame kept), ``sciml predict`` writing them per frame, and a clear error for a
checkpoint that carries none."""

from __future__ import annotations

import ase.io
import lightning as L
import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT

from sciml.calculators import SciMLCalculator
from sciml.commands.md import main as md
from sciml.data import AtomsDataModule
from sciml.md import MDSettings, run_ase_md
from sciml.training.callbacks import PredictionWriter


class GrowingUncertainty(EMT):
    """EMT forces, with a ``forces_uncertainty`` of 0.01 eV/Å times the number of calls so far."""

    implemented_properties = [*EMT.implemented_properties, "forces_uncertainty"]

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def calculate(self, *args, **kwargs) -> None:
        super().calculate(*args, **kwargs)
        self.results["forces_uncertainty"] = np.full(len(self.atoms), 0.01 * self.calls)
        self.calls += 1


def ethanol():
    atoms = molecule("CH3CH2OH")
    atoms.center(vacuum=3.0)
    return atoms


def test_md_flags_the_steps_above_the_threshold_and_can_stop_at_the_first_keeping_its_frame(tmp_path):
    settings = MDSettings("nve", timestep=0.5, steps=20, interval=5, uncertainty_threshold=0.065)
    flagged = run_ase_md(ethanol(), GrowingUncertainty(), settings, tmp_path / "flag.traj")
    assert flagged["stopped"] == "finished" and flagged["uncertain_steps"] == list(range(7, 21))
    assert flagged["max_force_uncertainty"] == pytest.approx(0.20)
    frames = ase.io.read(tmp_path / "flag.traj", index=":")
    assert [frame.info["forces_uncertainty_max"] for frame in frames] == pytest.approx([0, 0.05, 0.10, 0.15, 0.20])

    settings.stop_when_uncertain = True
    stopped = run_ase_md(ethanol(), GrowingUncertainty(), settings, tmp_path / "stop.traj")
    assert stopped["stopped"] == "uncertain" and stopped["uncertain_steps"] == [7]
    frames = ase.io.read(tmp_path / "stop.traj", index=":")
    assert [frame.info["md_step"] for frame in frames] == [0, 5, 7]  # the step it stopped at is kept
    with pytest.raises(ValueError, match="stop_when_uncertain needs an uncertainty_threshold"):
        MDSettings(stop_when_uncertain=True)


def test_md_with_a_committee_reports_the_uncertainty_and_stops_above_the_threshold(committee_run, tmp_path, capsys):
    _, data, checkpoint = committee_run
    structure = tmp_path / "start.extxyz"
    ase.io.write(structure, ethanol())
    arguments = ["--checkpoint", str(checkpoint), "--structure", str(structure), "--steps", "10",
                 "--interval", "5", "--no-progress"]  # fmt: skip
    for engine, output in (("sciml", "free"), ("ase", "free.traj")):  # both paths watch it
        result = md([*arguments, "--engine", engine, "--output", str(tmp_path / output)])
        assert "finished" in result["stopped"] and np.nanmax(result["max_force_uncertainty"]) > 0
        assert "largest per-atom force uncertainty" in capsys.readouterr().out
    result = md([*arguments, "--output", str(tmp_path / "stop"), "--uncertainty-threshold", "1e-6",
                 "--stop-when-uncertain"])  # fmt: skip
    assert result["stopped"] == ["uncertain"] and result["uncertain_steps"] == [[1]]
    assert "replica 0 stopped at step 1: the force uncertainty exceeded 1e-06 eV/Å" in capsys.readouterr().out
    written = ase.io.read(tmp_path / "stop" / "replica_000.extxyz", index=":")
    assert [frame.info["step"] for frame in written] == [0, 1] and written[-1].info["forces_uncertainty_max"] > 1e-6
    result = md([*arguments, "--engine", "ase", "--output", str(tmp_path / "stop.traj"),
                 "--uncertainty-threshold", "1e-6", "--stop-when-uncertain"])  # fmt: skip
    assert result["stopped"] == "uncertain" and result["steps_run"] == 0
    assert "the force uncertainty exceeded 1e-06 eV/Å" in capsys.readouterr().out


def test_md_threshold_on_a_checkpoint_without_an_estimate_is_a_clear_error(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    structure = tmp_path / "start.extxyz"
    ase.io.write(structure, ethanol())
    with pytest.raises(ValueError, match=f"checkpoint '{checkpoint}' carries no uncertainty estimate"):
        md(["--checkpoint", str(checkpoint), "--structure", str(structure), "--steps", "2",
              "--uncertainty-threshold", "0.1", "--output", str(tmp_path / "md")])  # fmt: skip


def test_predict_writes_the_uncertainties_of_every_frame(committee_run, tmp_path):
    module, data, checkpoint = committee_run
    frames = ase.io.read(data.paths[0] if isinstance(data.paths, list) else data.paths, index=":5")
    ase.io.write(tmp_path / "input.extxyz", frames)
    predict = AtomsDataModule(paths=data.paths, cutoff=3.0, predict_paths=str(tmp_path / "input.extxyz"),
                              eval_batch_size=2, dtype="float64")  # fmt: skip
    trainer = L.Trainer(logger=False, default_root_dir=tmp_path, enable_progress_bar=False, accelerator="cpu",
                        callbacks=[PredictionWriter(str(tmp_path / "predicted.extxyz"))])  # fmt: skip
    trainer.predict(module, datamodule=predict)
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    for frame, written in zip(frames, ase.io.read(tmp_path / "predicted.extxyz", index=":"), strict=True):
        atoms = frame.copy()
        atoms.calc = calculator
        atoms.get_forces()
        assert written.info["energy_uncertainty"] == pytest.approx(calculator.results["energy_uncertainty"], rel=1e-6)
        np.testing.assert_allclose(written.arrays["forces_uncertainty"], calculator.results["forces_uncertainty"],
                                   rtol=1e-6)  # fmt: skip


def test_the_quickstart_writes_a_last_layer_uncertainty_checkpoint_that_md_monitors(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    last_layer = checkpoint.parent / "last_layer.ckpt"
    calculator = SciMLCalculator.from_checkpoint(last_layer, uncertainty=True)
    atoms = ethanol()
    atoms.calc = calculator
    atoms.get_forces()
    assert calculator.results["forces_uncertainty"].shape == (len(atoms),)
    structure = tmp_path / "start.extxyz"
    ase.io.write(structure, ethanol())
    result = md(["--checkpoint", str(last_layer), "--structure", str(structure), "--steps", "10", "--no-progress",
                 "--uncertainty-threshold", "10", "--output", str(tmp_path / "md")])  # fmt: skip
    assert result["stopped"] == ["finished"] and 0 < result["max_force_uncertainty"][0] < 10
