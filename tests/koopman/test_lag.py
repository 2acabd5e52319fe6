"""The lag choice: the implied-timescale plateau and the Chapman-Kolmogorov test (sciml.koopman.lag)."""

from __future__ import annotations

import numpy as np
import pytest

from sciml.koopman.bootstrap import Bands
from sciml.koopman.lag import choose_lag, timescale_plateau

LAGS = [1, 2, 4, 8, 16]


def bands(slowest: list[float], spread: float = 0.02, paired: bool = True) -> Bands:
    """Timescales whose bootstrap samples lie within ``spread`` (relative) of ``slowest``, the same factor for every
    lag of a sample (``paired``, as ``bootstrap_timescales`` draws them) or independent per lag; column 0 is the
    constant function's inf, column 2 a fast process."""
    slowest = np.asarray(slowest, dtype=float)
    estimate = np.stack([np.full_like(slowest, np.inf), slowest, 0.1 * slowest], axis=1)
    factors = np.linspace(1 - spread, 1 + spread, 41)[:, None, None]
    if not paired:  # each lag's factors in its own order
        factors = np.stack([np.random.default_rng(i).permutation(factors[:, 0, 0]) for i in range(len(slowest))], 1)
        factors = factors[:, :, None]
    return Bands(estimate, estimate[None] * factors, 0.95)


def test_the_plateau_starts_where_the_slowest_timescale_stops_rising():
    step = 0.5  # ps a frame: the lags are 0.5 to 8 ps
    rising = bands([3.0, 5.0, 7.0, 9.7, 10.0])  # ps; a model whose features miss part of the slow eigenfunction
    assert timescale_plateau(rising, LAGS, step) == [False, False, False, True, False]  # 9.7 -> 10: within 5 %
    assert timescale_plateau(rising, LAGS, step, tolerance=0.01) == [False] * 5  # 3 % is a rise at 1 %
    flat = bands([10.0, 10.2, 10.1, 10.4, 10.1])
    assert timescale_plateau(flat, LAGS, step) == [True, True, True, True, False]  # the largest: nothing after it
    unresolved = bands([10.0, 10.0, 10.0, 9.0, 7.0])  # at lag 16 (8 ps) the timescale is shorter than the lag
    assert timescale_plateau(unresolved, LAGS, step) == [True, True, True, False, False]
    slow_rise = bands([10.0, 10.4, 10.8, 11.2, 11.6], spread=0.3)  # 4 % a lag, each step within the intervals
    assert timescale_plateau(slow_rise, LAGS, step) == [False, False, False, True, False]  # paired: the rise is real
    noisy = bands([10.0, 10.0, 10.0, 10.0, 13.0], spread=0.5, paired=False)  # lag 16: 30 % up, but noise
    assert timescale_plateau(noisy, LAGS, step)[:4] == [True] * 4
    with pytest.raises(ValueError, match="ascending"):
        timescale_plateau(flat, LAGS[::-1], step)


def test_a_lag_below_the_plateau_is_moved_to_the_first_converged_lag_and_the_ck_test_decides():
    rising = bands([3.0, 5.0, 9.6, 9.8, 10.0])
    asked = []

    def ck(lag: int) -> bool:
        asked.append(lag)
        return lag >= 8

    choice = choose_lag(rising, LAGS, 0.1, given=2, ck_passes=ck, unit="ps")
    assert (choice.lag, choice.given, choice.converged) == (8, 2, True)
    assert asked == [4, 8]  # only lags on the plateau, ascending; lag 4 is flat but fails its CK test
    assert choice.ck_passed == {4: False, 8: True} and choice.plateau == [False, False, True, True, False]
    assert "too short" in choice.reason and "still rising (5 ps at lag 2)" in choice.reason
    assert choice.as_dict()["ck_passed"] == {"4": False, "8": True}

    kept = choose_lag(bands([9.0, 9.1, 9.2, 9.3, 9.3]), LAGS, 1.0, given=2, ck_passes=lambda lag: True)
    assert (kept.lag, kept.converged) == (2, True) and kept.reason.startswith("converged")

    never = choose_lag(rising, LAGS, 0.1, given=2, ck_passes=lambda lag: False)
    assert (never.lag, never.converged) == (2, False)
    assert "NOT converged" in never.reason and "fails at lag 4, 8" in never.reason

    still = choose_lag(bands([2.0, 4.0, 7.0, 11.0, 16.0]), LAGS, 1.0, given=2, ck_passes=lambda lag: True)
    assert (still.lag, still.converged) == (2, False)
    assert "still rises" in still.reason and "lower bounds" in still.reason

    judged = choose_lag(rising, LAGS, 0.1, given=2, ck_passes=ck, search=False)  # lag_choice="given"
    assert (judged.lag, judged.converged) == (2, False) and "still rises" in judged.reason
    with pytest.raises(ValueError, match="must be one of"):
        choose_lag(rising, LAGS, 1.0, given=3, ck_passes=ck)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_report_drops_lags_longer_than_a_quarter_of_its_resampled_blocks(tmp_path):
    """Two trajectories of 100 frames are cut into 20 blocks of 10 frames for the bootstrap: lags above 2.5
    frames would leave most blocks without pairs, so the report keeps the given lag and says which it dropped."""
    from sciml.koopman import KoopmanEstimator
    from sciml.koopman.bootstrap import TrajectoryFeatures, fitted
    from sciml.koopman.report import kinetics_report
    from tests.koopman.test_bootstrap import Bins
    from tests.koopman.test_states import simulate, transition_matrix

    data = simulate(transition_matrix(), 2, 100, 0)
    estimator = KoopmanEstimator(Bins(edges=list(np.linspace(-1.6, 1.6, 10))))
    estimator = fitted(estimator, TrajectoryFeatures(estimator, data).moments(2), 2)
    numbers = kinetics_report(estimator, data, [1, 2, 4, 8, 16], 0.05, 2, tmp_path, samples=10, microstates=5)
    assert numbers["timescales"]["lags"] == [1, 2] and numbers["timescales"]["dropped_lags"] == [4, 8, 16]
    assert numbers["lag"] in (1, 2) and (tmp_path / "report.json").exists()
