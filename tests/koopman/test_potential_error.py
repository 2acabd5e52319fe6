"""Kinetics intervals that carry the potential's error: trajectories grouped by the posterior draw they ran on,
resampled by draw (sampling and the potential) and within draws (sampling alone)."""

from __future__ import annotations

import numpy as np
import pytest

from sciml.koopman import KoopmanEstimator
from sciml.koopman.bootstrap import TrajectoryFeatures, fitted, resampled_counts
from sciml.koopman.report import kinetics_report
from tests.koopman.test_bootstrap import Bins
from tests.koopman.test_states import DT, GRID, simulate, transition_matrix

DRAWS, PER_DRAW = 8, 4


def test_group_counts_keep_each_draw_whole_or_resample_inside_it():
    groups = np.repeat(np.arange(4), [1, 2, 3, 4])
    between = resampled_counts(10, 200, 0, groups)
    within = resampled_counts(10, 200, 0, groups, within_groups=True)
    for g in range(4):
        members = groups == g
        assert np.all(between[:, members] == between[:, members][:, :1])  # a draw comes with all its trajectories
        assert np.all(within[:, members].sum(1) == members.sum())  # each draw keeps its number of trajectories
    assert between[:, groups == 0].std() > 0 and np.all(within[:, groups == 0] == 1)
    with pytest.raises(ValueError, match="groups label 3 units, there are 10"):
        resampled_counts(10, 5, 0, groups[:3])


def draws(tilts: list[float], seed: int) -> tuple[list, list[int]]:
    """PER_DRAW trajectories on each double well 3 (x^2 - 1)^2 + tilt x (kT = 1), and the draw of each."""
    data, groups = [], []
    for g, tilt in enumerate(tilts):
        potential = 3 * (GRID**2 - 1) ** 2 + tilt * GRID
        data += simulate(transition_matrix(potential), PER_DRAW, 1500, seed + g, potential)
        groups += [g] * PER_DRAW
    return data, groups


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_report_splits_each_interval_into_sampling_and_the_potentials_share(tmp_path):
    """Eight draws whose wells differ by up to 1.6 kT: the populations' intervals are the draws' doing (share
    > 0.8) and cover the populations' spread between draws, which sampling-only intervals do not; eight draws of
    the same surface: sampling alone explains most of every interval (share < 0.6)."""
    estimator = KoopmanEstimator(Bins(edges=list(np.linspace(-1.6, 1.6, 30))))
    shares = {}
    for case, tilts in {"different": np.linspace(-0.2, 1.4, DRAWS), "same": [0.6] * DRAWS}.items():
        data, groups = draws(list(tilts), seed=10)
        model = fitted(estimator, TrajectoryFeatures(estimator, data).moments(10), 10)
        numbers = kinetics_report(model, data, [5, 10, 20], DT, 2, tmp_path / case, samples=100, microstates=20,
                                  lag_choice="given", groups=groups)  # fmt: skip
        error = numbers["potential_error"]
        assert error["posterior_samples"] == DRAWS
        shares[case] = np.asarray(error["share"]["populations"])
        populations, alone = numbers["states"]["populations"], numbers["states"]["sampling_only"]["populations"]
        width = np.subtract(populations["upper"], populations["lower"])
        if case == "different":  # against the spread of the draws' exact populations of the well at x < 0
            r, t = numbers["states"]["representatives"][0][0]
            left = 0 if float(data[r][t, 0]) < 0 else 1
            exact = [np.exp(-u)[GRID < 0].sum() / np.exp(-u).sum() for u in (3 * (GRID**2 - 1) ** 2 + a * GRID
                                                                               for a in tilts)]  # fmt: skip
            error_of_mean = np.std(exact, ddof=1) / np.sqrt(DRAWS)
            alone_width = np.subtract(alone["upper"], alone["lower"])
            assert width[left] > 2 * error_of_mean > alone_width[left], (width, error_of_mean, alone_width)
        report = (tmp_path / case / "report.md").read_text()
        assert "The potential's error in the intervals" in report and "sampling alone" in report
    assert np.all(shares["different"] > 0.8), shares
    assert np.all(shares["same"] < 0.6), shares
