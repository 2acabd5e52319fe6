"""Bootstrap error bars of Koopman timescales and of the Chapman-Kolmogorov test, on the Prinz potential (its
SqRA Markov chain is sampled exactly and its spectrum is known): the bands hold the exact value, and their
width matches the spread of estimates from independent datasets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from sciml.data.systems import PrinzPotential
from sciml.koopman import KoopmanEstimator
from sciml.koopman.bootstrap import TrajectoryFeatures, bootstrap_chapman_kolmogorov, bootstrap_timescales

SYSTEM = PrinzPotential(dt=0.1, n_grid=300)
LAG = 10  # steps: beyond the fast processes (the third timescale is ~1.3 steps)


class Bins(nn.Module):
    """One-hot of ``bins`` equal bins of x in [-1.2, 1.2] (or of the bins between ``edges``), the last dropped
    (the constant is prepended)."""

    def __init__(self, bins: int = 0, edges: list[float] | None = None) -> None:
        super().__init__()
        edges = torch.tensor(edges) if edges is not None else torch.linspace(-1.2, 1.2, bins + 1)[1:-1]
        self.register_buffer("edges", edges)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = torch.bucketize(x[:, 0].contiguous().float(), self.edges)
        return nn.functional.one_hot(index, len(self.edges) + 1)[:, :-1].to(x.dtype)


def trajectories(count: int, steps: int, seed: int) -> list[torch.Tensor]:
    return list(torch.tensor(SYSTEM.simulate(steps, seed=seed, n_trajectories=count)))


def exact_slowest(lag: int = LAG) -> float:
    return float(-lag * SYSTEM.dt / np.log(SYSTEM.eigenvalues(lag, 2).real[1]))


def test_timescale_bands_hold_the_exact_value_and_match_the_spread_of_independent_datasets():
    estimator = KoopmanEstimator(Bins(60))
    estimates, errors, covered = [], [], 0
    for seed in range(12):
        features = TrajectoryFeatures(estimator, trajectories(20, 400, seed))
        bands = bootstrap_timescales(estimator, features, [LAG], time_step=SYSTEM.dt, samples=100, seed=seed)
        estimates.append(bands.estimate[0, 1])
        errors.append(bands.standard_error[0, 1])
        covered += bands.lower[0, 1] <= exact_slowest() <= bands.upper[0, 1]
    spread = np.std(estimates, ddof=1)
    # the bootstrap's standard error is the spread an independent repetition would show (12 repetitions:
    # the sample std is good to ~20 %, hence the wide window)
    assert 0.6 < np.mean(errors) / spread < 1.6, (np.mean(errors), spread)
    assert covered >= 9  # of 12 intervals at 95 %: 9 or fewer happens with probability < 2 %
    assert abs(np.mean(estimates) / exact_slowest() - 1) < 0.1  # 60 bins: a small discretisation bias


def test_a_single_long_trajectory_is_cut_into_blocks():
    estimator = KoopmanEstimator(Bins(30))
    features = TrajectoryFeatures(estimator, trajectories(1, 8000, 0), blocks=20)
    assert features.count == 20 and sum(len(piece[0]) for piece in features.pieces) == 8000
    bands = bootstrap_timescales(estimator, features, [5, LAG], time_step=SYSTEM.dt, samples=50)
    assert bands.samples.shape[:2] == (50, 2) and np.all(bands.lower[:, 1] < bands.upper[:, 1])


def left_well(x: torch.Tensor) -> torch.Tensor:
    return (x[:, 0] < 0).double()


@pytest.mark.parametrize("basis, expected", [(Bins(60), True), (Bins(edges=[-0.5, 0.5]), False)])
def test_the_chapman_kolmogorov_test_passes_a_markov_model_and_fails_a_coarse_misplaced_one(basis, expected):
    estimator = KoopmanEstimator(basis)
    data = trajectories(40, 1000, 1)
    features = TrajectoryFeatures(estimator, data, {"left": left_well}, {"left": left_well, "right": lambda x:
                                  1 - left_well(x)})  # fmt: skip
    test = bootstrap_chapman_kolmogorov(estimator, features, lag=2, steps=4, samples=100)
    assert test.predicted.estimate.shape == (4, 2, 1)
    # three bins split at -0.5 and 0.5 lump the wells on either side of the main barrier at 0: not Markovian
    assert test.passed is expected, test.summary()
