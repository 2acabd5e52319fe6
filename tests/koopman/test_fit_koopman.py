"""``fit_koopman``: from arrays (OU singular values exp(-n theta tau)) and from an ASE trajectory file (the
molecular encoder, the data's lag) in one call; wrong combinations are refused with a clear message."""

from __future__ import annotations

import math

import pytest
import torch

from sciml.data.systems import OrnsteinUhlenbeck
from sciml.training import fit_koopman
from tests.conftest import ROOT


def test_fit_koopman_from_arrays_recovers_ou_singular_values():
    states = OrnsteinUhlenbeck(1.0, math.sqrt(2.0), 0.5).simulate(12_000, seed=0, n_trajectories=2)
    estimator = fit_koopman(list(states), lagtime=1, k=3, epochs=12, lr=3e-3)
    assert estimator.lagtime == 1
    exact = torch.exp(-0.5 * torch.arange(3, dtype=torch.float64))
    assert torch.allclose(estimator.singular_values, exact, atol=0.05), estimator.singular_values


def test_fit_koopman_from_a_trajectory_file_uses_the_molecular_encoder():
    estimator = fit_koopman(
        ROOT / "data" / "alanine_dipeptide_600K.traj",
        lagtime=2,
        k=3,
        epochs=1,
        encoder_options={"backbone": {"channels": 8, "layers": 1, "lmax": 1}},
        trainer_options={"limit_train_batches": 2, "limit_val_batches": 1},
    )
    assert estimator.lagtime == 2 and type(estimator.encoder_f).__name__ == "MolecularEncoder"
    assert estimator.singular_values.shape == (3,) and float(estimator.singular_values[0]) > 0.999


def test_fit_koopman_refuses_wrong_combinations():
    states = torch.randn(100, 2)
    with pytest.raises(ValueError, match="the molecular encoder needs ASE trajectory files"):
        fit_koopman(states, encoder="molecular")
    with pytest.raises(ValueError, match="unknown encoder 'cnn'"):
        fit_koopman(states, encoder="cnn")
    with pytest.raises(ValueError, match="at least 2, got 1"):
        fit_koopman(states, k=1)
