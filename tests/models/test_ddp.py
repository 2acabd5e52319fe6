"""PotentialModule trains under DDP with 2 CPU processes (gloo), through the real `sciml` command."""

from __future__ import annotations

import subprocess
import sys

import ase.io
import numpy as np
import pytest
import torch

from sciml.calculators import SciMLCalculator
from tests.conftest import ROOT


@pytest.mark.slow
def test_potential_fits_under_ddp_with_two_cpu_processes(tmp_path):
    command = [
        sys.executable,
        "-m",
        "sciml",
        "fit",
        "--config",
        "configs/e2former/quickstart.yaml",
        "--trainer.strategy=ddp",
        "--trainer.devices=2",
        "--trainer.accelerator=cpu",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=4",
        "--trainer.limit_val_batches=2",
        "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in result.stderr + result.stdout
    (checkpoint,) = tmp_path.rglob("last.ckpt")
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["global_step"] == 4  # four optimizer steps, each on both processes' batches
    atoms = ase.io.read(ROOT / "data/ethanol_gfn2.extxyz", index=0)
    atoms.calc = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    assert np.all(np.isfinite(atoms.get_forces())) and np.abs(atoms.get_forces()).max() > 0
