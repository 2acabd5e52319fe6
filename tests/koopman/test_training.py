"""Training KoopmanModule end to end: OU singular values and near-diagonal moments (nested LoRA), the
checkpoint -> estimator path, and DDP with 2 CPU processes equal to one process."""

from __future__ import annotations

import subprocess
import sys
from functools import partial

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import LambdaCallback, ModelCheckpoint

from sciml.data import ArrayDataModule
from sciml.data.systems import OrnsteinUhlenbeck
from sciml.koopman import KoopmanEstimator, LoRALoss, MLPEncoder
from sciml.training import KoopmanModule
from tests.conftest import ROOT


@pytest.mark.slow
def test_nested_lora_on_ou_recovers_singular_values_with_diagonal_moments(tmp_path):
    """theta = 1, tau = 0.5, k = 5 (with the constant): sigma_n = exp(-n/2) within 0.02 and, at the nested
    optimum, M_f = diag(sigma) without any orthogonality penalty (off-diagonals below 0.05). ~55 s; slow-marked
    because notebooks/01 runs the same training and asserts the same numbers in the default suite."""
    L.seed_everything(0)
    data = ArrayDataModule(system=OrnsteinUhlenbeck(1.0, 2**0.5, 0.5), n_steps=100_000, batch_size=256, seed=0)
    model = KoopmanModule(
        MLPEncoder(1, 4, hidden=(64, 64)), loss=LoRALoss(), optimizer=partial(torch.optim.Adam, lr=0.002)
    )
    trainer = L.Trainer(
        max_epochs=10,
        accelerator="cpu",
        logger=False,
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data)
    estimator = KoopmanEstimator.from_module(model).fit(data)
    exact = torch.exp(-0.5 * torch.arange(5, dtype=torch.float64))
    assert torch.allclose(estimator.singular_values, exact, atol=0.02), estimator.singular_values
    assert torch.allclose(estimator.eigenvalues().real, exact, atol=0.03)
    moments = estimator.moments.mean("ff_00")
    assert (moments - torch.diag(moments.diagonal())).abs().max() < 0.05, moments
    assert torch.allclose(moments.diagonal()[1:], exact[1:], atol=0.06)  # f_n ~ sqrt(sigma_n) phi_n


def test_checkpoint_to_estimator(tmp_path):
    """``KoopmanEstimator.from_checkpoint`` rebuilds the encoders (weights_only) and matches ``from_module``."""
    L.seed_everything(0)
    data = ArrayDataModule(system=OrnsteinUhlenbeck(1.0, 2**0.5, 0.5), n_steps=5000, batch_size=256, lagtime=2)
    model = KoopmanModule(MLPEncoder(1, 3, hidden=(16,)), loss=LoRALoss(), lagtime=2)
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, default_root_dir=tmp_path)
    trainer.fit(model, data)
    in_memory = KoopmanEstimator.from_module(model).fit(data)
    loaded = KoopmanEstimator.from_checkpoint(next(tmp_path.rglob("*.ckpt")), data)
    assert loaded.lagtime == 2 == in_memory.lagtime
    assert torch.allclose(loaded.singular_values, in_memory.singular_values, atol=1e-6)
    assert loaded.score(data) == pytest.approx(in_memory.score(data), abs=1e-6)


def test_validation_logs_the_estimators_held_out_scores_and_keeps_the_best_checkpoint(tmp_path):
    """val/vampe and val/vamp2 after each validation epoch are KoopmanEstimator.score on the validation split
    with the training-split CCA at the same weights; ModelCheckpoint(monitor=val/vampe, mode=max) keeps the best."""
    L.seed_everything(0)
    data = ArrayDataModule(system=OrnsteinUhlenbeck(1.0, 2**0.5, 0.5), n_steps=4000, batch_size=256, lagtime=1)
    model = KoopmanModule(MLPEncoder(1, 3, hidden=(16,)), loss=LoRALoss())
    scores = []
    best = ModelCheckpoint(dirpath=tmp_path, monitor="val/vampe", mode="max", save_last=True)

    def record_score(trainer, _) -> None:
        if not trainer.sanity_checking:
            scores.append(float(trainer.callback_metrics["val/vampe"]))

    record = LambdaCallback(on_validation_end=record_score)
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_progress_bar=False,
                        callbacks=[best, record], default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(model, data)
    expected = KoopmanEstimator.from_module(model).fit(data).score(data, split="val")
    assert float(trainer.callback_metrics["val/vampe"]) == pytest.approx(expected["vampe"], rel=1e-6)
    assert float(trainer.callback_metrics["val/vamp2"]) == pytest.approx(expected["vamp2"], rel=1e-6)
    assert 1.0 < expected["vamp2"] <= 4.0 and expected["vampe"] <= expected["vamp2"]
    assert len(scores) == 3 and float(best.best_model_score) == pytest.approx(max(scores), rel=1e-6)


@pytest.mark.slow
def test_ddp_with_two_cpu_processes_equals_one_process(tmp_path):
    """The loss uses the moments of the global batch, so one step on 2 x 400 pairs equals one on 800."""
    script = ROOT / "tests" / "koopman" / "ddp_step.py"
    for devices in (1, 2):
        result = subprocess.run(
            [sys.executable, str(script), "--devices", str(devices), "--out", str(tmp_path / f"{devices}.pt")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    one, two = (torch.load(tmp_path / f"{d}.pt", weights_only=True) for d in (1, 2))
    for key in one:
        assert torch.allclose(one[key], two[key], atol=2e-6), key
    torch.manual_seed(0)  # the initial weights of ddp_step.py: the step must have moved them
    initial = MLPEncoder(1, 4, hidden=(32,)).state_dict()
    moved = max(float((one[f"encoder_f.{key}"] - value).abs().max()) for key, value in initial.items())
    assert moved > 1e-3
