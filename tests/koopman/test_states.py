"""Metastable states, populations and mean first-passage times from a Koopman basis, against the exact values
of a tilted double well (a Markov chain on a grid, sampled exactly)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import expm

from sciml.koopman import KoopmanEstimator
from sciml.koopman.bootstrap import TrajectoryFeatures, fitted
from sciml.koopman.states import metastable_states
from tests.koopman.test_bootstrap import Bins

GRID = np.linspace(-2.0, 2.0, 81)
POTENTIAL = 3 * (GRID**2 - 1) ** 2 + 0.6 * GRID  # kT = 1: a 3 kT barrier, the left well deeper
DT = 0.05


def transition_matrix() -> np.ndarray:
    """exp(Q dt) of the square-root approximation of overdamped diffusion (D = 1) in POTENTIAL."""
    h = GRID[1] - GRID[0]
    rates = np.zeros((len(GRID), len(GRID)))
    for i in range(len(GRID) - 1):
        rates[i, i + 1] = np.exp(-(POTENTIAL[i + 1] - POTENTIAL[i]) / 2) / h**2
        rates[i + 1, i] = np.exp(-(POTENTIAL[i] - POTENTIAL[i + 1]) / 2) / h**2
    np.fill_diagonal(rates, -rates.sum(1))
    return np.clip(expm(rates * DT), 0, None)


def simulate(transition: np.ndarray, trajectories: int, steps: int, seed: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    stationary = np.exp(-POTENTIAL) / np.exp(-POTENTIAL).sum()
    cdf = np.cumsum(transition / transition.sum(1, keepdims=True), axis=1)
    state = rng.choice(len(GRID), size=trajectories, p=stationary)
    out = np.empty((trajectories, steps))
    for t in range(steps):
        out[:, t] = GRID[state]
        state = np.minimum((cdf[state] < rng.random(trajectories)[:, None]).sum(1), len(GRID) - 1)
    return [torch.tensor(x[:, None]) for x in out]


def exact(transition: np.ndarray, core: float = 0.5) -> tuple[float, float, float]:
    """(population of x < 0, MFPT left -> right, MFPT right -> left) in time units, the MFPTs between the well
    cores |x| > ``core`` (what rates between metastable states describe, without the fast recrossings at the
    barrier top), averaged over the start core with stationary weights (deeptime's convention)."""
    stationary = np.exp(-POTENTIAL) / np.exp(-POTENTIAL).sum()
    times = []
    for start, target in ((GRID < -core, GRID > core), (GRID > core, GRID < -core)):
        outside = ~target
        steps = np.zeros(len(GRID))
        steps[outside] = np.linalg.solve(np.eye(outside.sum()) - transition[np.ix_(outside, outside)],
                                         np.ones(outside.sum()))  # fmt: skip
        times.append(float((stationary[start] * steps[start]).sum() / stationary[start].sum() * DT))
    return float(stationary[GRID < 0].sum()), times[0], times[1]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_states_populations_and_mfpts_match_the_exact_double_well():
    transition = transition_matrix()
    data = simulate(transition, 40, 2000, 0)
    estimator = KoopmanEstimator(Bins(edges=list(np.linspace(-1.6, 1.6, 40))))
    lag = 10
    estimator = fitted(estimator, TrajectoryFeatures(estimator, data).moments(lag), lag)
    states = metastable_states(estimator, data, n_states=2, time_step=DT, microstates=30, samples=60)
    population, left_to_right, right_to_left = exact(transition)
    positions = np.concatenate([x[:, 0].numpy() for x in data])
    assignments = np.concatenate(states.assignments())
    left, right = np.argsort([positions[assignments == j].mean() for j in range(2)])
    assert positions[assignments == left].mean() < -0.5 < 0.5 < positions[assignments == right].mean()
    assert states.populations.estimate[left] == pytest.approx(population, abs=0.03)
    assert states.populations.lower[left] <= population + 0.01 and population - 0.01 <= states.populations.upper[left]
    # MFPTs of an MSM at lag 0.5 on 30 microstates against the exact core-to-core times: within 15 %
    assert states.mfpt.estimate[left, right] == pytest.approx(left_to_right, rel=0.15)
    assert states.mfpt.estimate[right, left] == pytest.approx(right_to_left, rel=0.15)
    assert states.mfpt.lower[left, right] < states.mfpt.estimate[left, right] < states.mfpt.upper[left, right]
    for state, frames in enumerate(states.representatives):
        assert len(frames) == 5 and all(assignments_of(states, r, t) == state for r, t in frames)
    assert "MFPT" in states.summary()


def assignments_of(states, trajectory: int, frame: int) -> int:
    return int(states.assignments()[trajectory][frame])
