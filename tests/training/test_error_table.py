"""`sciml test` error tables: exact over the split, per config_type, equal to a by-hand computation."""

from __future__ import annotations

import json

import ase.io
import lightning as L
import numpy as np
import torch

from sciml.data import AtomsDataModule
from sciml.models import E2Former
from sciml.nn.forces import ForceStressOutput
from sciml.training import PotentialModule


def test_test_errors_per_config_type_equal_a_by_hand_computation(tmp_path, molecule_frames, capsys):
    frames = []
    for k, atoms in enumerate(molecule_frames * 3):
        frame = atoms.copy()
        frame.calc = atoms.calc
        frame.info["config_type"] = "md" if k % 3 else "rattled"
        frames.append(frame)
    ase.io.write(tmp_path / "frames.extxyz", frames)
    data = AtomsDataModule(
        paths=str(tmp_path / "frames.extxyz"), cutoff=3.0, split=(0.4, 0.2, 0.4), split_mode="random",
        batch_size=2, eval_batch_size=2, dtype="float64",
    )  # fmt: skip
    torch.manual_seed(0)
    model = E2Former(data.species, data.cutoff, channels=8, lmax=1, layers=1, heads=2, radial_basis=8).double()
    torch.nn.init.normal_(model.energy_head[-1].weight)  # not constant: errors differ frame to frame
    module = PotentialModule(model)
    trainer = L.Trainer(logger=False, default_root_dir=tmp_path, enable_progress_bar=False, accelerator="cpu")
    trainer.test(module, data)
    assert "| all |" in capsys.readouterr().out
    rows = {row["group"]: row for row in json.loads((tmp_path / "test_errors.json").read_text())["rows"]}

    by_hand: dict[str, dict[str, list]] = {}
    for batch in data.split_dataloader("test"):
        outputs = ForceStressOutput(model.eval())(batch)
        for k, group in enumerate(batch.config_type):
            atoms = batch.batch == k
            for name in (group, "all"):
                entry = by_hand.setdefault(name, {"energy": [], "forces": [], "atoms": 0})
                entry["energy"].append(float((outputs["energy"][k] - batch.energy[k]) / atoms.sum()))
                entry["forces"].append((outputs["forces"][atoms] - batch.forces[atoms]).detach().numpy().ravel())
                entry["atoms"] += int(atoms.sum())
    assert set(rows) == set(by_hand) == {"md", "rattled", "all"}
    for name, entry in by_hand.items():
        energy, forces = np.array(entry["energy"]) * 1000, np.concatenate(entry["forces"]) * 1000
        row = rows[name]
        assert row["frames"] == len(energy) and row["atoms"] == entry["atoms"]
        np.testing.assert_allclose(row["energy_mae"], np.abs(energy).mean(), rtol=1e-9)
        np.testing.assert_allclose(row["energy_rmse"], np.sqrt((energy**2).mean()), rtol=1e-9)
        np.testing.assert_allclose(row["force_mae"], np.abs(forces).mean(), rtol=1e-9)
        np.testing.assert_allclose(row["force_rmse"], np.sqrt((forces**2).mean()), rtol=1e-9)
    # the logged figure is the split-wide RMSE, not a mean of per-batch RMSEs
    np.testing.assert_allclose(float(trainer.callback_metrics["test/force_rmse"]) * 1000, rows["all"]["force_rmse"])
    assert (tmp_path / "test_errors.csv").read_text().splitlines()[0].startswith("group,frames,atoms,energy_mae")
