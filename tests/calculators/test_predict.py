"""`sciml predict` streams predictions of a trajectory to extxyz, equal to the calculator's."""

from __future__ import annotations

import sys

import ase.io
import numpy as np

from sciml.calculators import SciMLCalculator
from sciml.cli import run
from tests.conftest import ROOT


def test_predict_writes_extxyz_matching_the_calculator(quickstart_run, tmp_path, monkeypatch):
    _, checkpoint = quickstart_run
    frames = ase.io.read(ROOT / "data/ethanol_gfn2.extxyz", index=":7")
    ase.io.write(tmp_path / "input.extxyz", frames)
    output = tmp_path / "predicted.extxyz"
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["sciml"])
    run(
        [
            "predict",
            "--config",
            "configs/e2former/quickstart.yaml",
            f"--ckpt_path={checkpoint}",
            f"--data.init_args.predict_paths={tmp_path / 'input.extxyz'}",
            "--data.init_args.eval_batch_size=3",
            f"--trainer.default_root_dir={tmp_path}",
            "--trainer.enable_progress_bar=false",
            "--trainer.callbacks+=sciml.training.callbacks.PredictionWriter",
            f"--trainer.callbacks.output={output}",
        ]
    )
    predicted = ase.io.read(output, index=":")
    assert len(predicted) == len(frames)
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float32")
    for frame, result in zip(frames, predicted, strict=True):
        np.testing.assert_allclose(result.positions, frame.positions, atol=1e-6)
        atoms = frame.copy()
        atoms.calc = calculator
        assert abs(result.get_potential_energy() - atoms.get_potential_energy()) < 1e-4
        np.testing.assert_allclose(result.get_forces(), atoms.get_forces(), atol=1e-4)
