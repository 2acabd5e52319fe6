"""Metastable states, populations and mean first-passage times from a Koopman basis, against the exact values
of a tilted double well (a Markov chain on a grid, sampled exactly)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import expm

from sciml.koopman import KoopmanEstimator
from sciml.koopman.bootstrap import TrajectoryFeatures, fitted
from sciml.koopman.states import eigenfunction_coordinates, metastable_states
from tests.koopman.test_bootstrap import Bins

GRID = np.linspace(-2.0, 2.0, 81)
POTENTIAL = 3 * (GRID**2 - 1) ** 2 + 0.6 * GRID  # kT = 1: a 3 kT barrier, the left well deeper
DT = 0.05


def transition_matrix(potential: np.ndarray = POTENTIAL) -> np.ndarray:
    """exp(Q dt) of the square-root approximation of overdamped diffusion (D = 1) in ``potential``."""
    h = GRID[1] - GRID[0]
    rates = np.zeros((len(GRID), len(GRID)))
    for i in range(len(GRID) - 1):
        rates[i, i + 1] = np.exp(-(potential[i + 1] - potential[i]) / 2) / h**2
        rates[i + 1, i] = np.exp(-(potential[i] - potential[i + 1]) / 2) / h**2
    np.fill_diagonal(rates, -rates.sum(1))
    return np.clip(expm(rates * DT), 0, None)


def simulate(transition: np.ndarray, trajectories: int, steps: int, seed: int,
             potential: np.ndarray = POTENTIAL) -> list[torch.Tensor]:  # fmt: skip
    rng = np.random.default_rng(seed)
    stationary = np.exp(-potential) / np.exp(-potential).sum()
    cdf = np.cumsum(transition / transition.sum(1, keepdims=True), axis=1)
    state = rng.choice(len(GRID), size=trajectories, p=stationary)
    out = np.empty((trajectories, steps))
    for t in range(steps):
        out[:, t] = GRID[state]
        state = np.minimum((cdf[state] < rng.random(trajectories)[:, None]).sum(1), len(GRID) - 1)
    return [torch.tensor(x[:, None]) for x in out]


def exact(transition: np.ndarray, core: float = 0.5, potential: np.ndarray = POTENTIAL) -> tuple[float, float, float]:
    """(population of x < 0, MFPT left -> right, MFPT right -> left) in time units, the MFPTs between the well
    cores |x| > ``core`` (what rates between metastable states describe, without the fast recrossings at the
    barrier top), averaged over the start core with stationary weights (deeptime's convention)."""
    stationary = np.exp(-potential) / np.exp(-potential).sum()
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


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_other_trajectories_are_measured_in_the_same_states():
    """States found on one double well, then data of another (the tilt reversed: the right well deeper, and
    a lower barrier) measured in them: its populations and MFPTs are the other potential's exact ones, not
    the first one's; the first data measured in its own states gives the states' own figures."""
    data = simulate(transition_matrix(), 40, 2000, 0)
    estimator = KoopmanEstimator(Bins(edges=list(np.linspace(-1.6, 1.6, 40))))
    lag = 10
    estimator = fitted(estimator, TrajectoryFeatures(estimator, data).moments(lag), lag)
    states = metastable_states(estimator, data, n_states=2, time_step=DT, microstates=30, samples=40)
    same = states.statistics_of(estimator, data)
    np.testing.assert_allclose(same.populations.estimate, states.populations.estimate, rtol=1e-10)
    np.testing.assert_allclose(same.mfpt.estimate, states.mfpt.estimate, rtol=1e-10)

    other_potential = 2.5 * (GRID**2 - 1) ** 2 - 0.6 * GRID
    other_transition = transition_matrix(other_potential)
    other = states.statistics_of(estimator, simulate(other_transition, 40, 2000, 1, other_potential))
    _, left_to_right, right_to_left = exact(other_transition, potential=other_potential)
    positions = np.concatenate([x[:, 0].numpy() for x in data])
    assignments = np.concatenate(states.assignments())
    left, right = np.argsort([positions[assignments == j].mean() for j in range(2)])
    # the exact population of the left state under the other potential: its Boltzmann weights on the grid
    # times the left membership of the microstate each grid point falls into
    grid = eigenfunction_coordinates(estimator, [torch.tensor(GRID[:, None])], 1)[0]
    nearest = ((grid[:, None, :] - states.centres[None]) ** 2).sum(-1).argmin(1)
    row = {int(label): k for k, label in enumerate(states.active)}
    membership = np.array([states.memberships[row[m], left] if m in row else 0.0 for m in nearest])
    boltzmann = np.exp(-other_potential) / np.exp(-other_potential).sum()
    population = float(boltzmann @ membership)
    assert population < 0.35 < 0.65 < states.populations.estimate[left]  # the two potentials differ
    assert other.populations.estimate[left] == pytest.approx(population, abs=0.02)
    assert other.populations.lower[left] <= population + 0.01 and population - 0.01 <= other.populations.upper[left]
    assert other.mfpt.estimate[left, right] == pytest.approx(left_to_right, rel=0.15)
    assert other.mfpt.estimate[right, left] == pytest.approx(right_to_left, rel=0.15)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_trajectories_that_never_return_are_refused_plainly():
    """A drift through space (what an unbound molecule's MD looks like) connects no microstates: the error says so
    instead of deeptime's PCCA+ message."""
    drifts = [torch.linspace(-2.0, 2.0, 400, dtype=torch.float64)[:, None] + shift for shift in (0.0, 0.01)]
    estimator = KoopmanEstimator(Bins(edges=list(np.linspace(-1.6, 1.6, 40))))
    estimator = fitted(estimator, TrajectoryFeatures(estimator, drifts).moments(5), 5)
    with pytest.raises(ValueError, match=r"connect only 1 of the 20 microstates at lag 5.*split into 2 states"):
        metastable_states(estimator, drifts, n_states=2, microstates=20, samples=5)
