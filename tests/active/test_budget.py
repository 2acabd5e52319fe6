"""The time budget's estimates (``sciml.active.budget``), computed here by hand from made-up clocks."""

from __future__ import annotations

import pytest

from sciml.active.budget import Rates, end_md_seconds, round_seconds, runs_per_round
from sciml.active.exploration import ExplorationSettings
from sciml.active.state import RunState, StageRecord

STATE = RunState(
    "smiles:O",
    "GFN2-xTB",
    rounds=[
        StageRecord(round=1, frames_trained=10, md_steps=100),
        StageRecord(round=2, frames_trained=20, md_steps=300),
        StageRecord(round=3, frames_trained=30),  # trained, not yet explored: not counted
    ],
    seconds={"training": 80.0, "md": 40.0, "oracle": 2.0},
)
# 1 ps ramp and 2 ps hold at 0.5 fs: 6000 steps a run
EXPLORATION = ExplorationSettings(ramp_ps=1.0, hold_ps=2.0, timestep=0.5, cap=100, replicas=4)


def test_rates_are_the_clocks_per_frame_epoch_md_step_and_label_of_the_rounds_that_explored():
    rates = Rates.measured(STATE, epochs=6, epochs_per_round=2, labels=40)
    # 10 frames x 6 epochs (round 1) + 20 x 2 = 100 frame-epochs; 400 MD steps
    assert rates == Rates(training=pytest.approx(0.8), md=pytest.approx(0.1), oracle=pytest.approx(0.05))
    empty = Rates.measured(RunState("smiles:O", "GFN2-xTB"), 6, 2, 0)
    assert empty == Rates(0.0, 0.0, 0.0)


def test_a_round_costs_its_training_a_full_exploration_from_every_start_and_the_cap_of_labels():
    rates = Rates(training=0.8, md=0.1, oracle=0.05)
    assert runs_per_round(1, 4) == 4 and runs_per_round(5, 4) == 8 and runs_per_round(3, 1) == 3
    # 50 frames x 2 epochs x 0.8 s + 4 runs x 6000 steps x 0.1 s + 100 labels x 0.05 s
    assert round_seconds(rates, EXPLORATION, starts=1, frames=50, epochs=2) == pytest.approx(80 + 2400 + 5)
    # 8 runs with 5 starts in batches of 4
    assert round_seconds(rates, EXPLORATION, starts=5, frames=50, epochs=2) == pytest.approx(80 + 4800 + 5)


def test_the_end_reserves_the_calibration_and_confirmation_runs_and_their_labels():
    rates = Rates(training=0.8, md=0.1, oracle=0.05)
    # 4 runs x (confirmation: 1 ps ramp + 3 ps = 8000 steps; calibration: 6000) x 0.1 s + (50 + 100) labels
    assert end_md_seconds(rates, EXPLORATION, 1, confirm_hold_ps=3.0, calibration_frames=50) == pytest.approx(
        5600 + 7.5
    )
    assert end_md_seconds(rates, EXPLORATION, 1, confirm_hold_ps=3.0, calibration_frames=0) == pytest.approx(3200 + 5)
