"""The wall-time budget of ``sciml learn --time-budget``: the loop plans its rounds so that the final model,
calibrated and confirmed, is written within the budget.

The time counted is the sum of the loop's phase clocks (``state.json``: oracle, training, MD), so a resumed run
goes on with what its earlier sessions spent. Before each exploration round after the first, the round's cost
is estimated from what the rounds so far cost per unit of work (:class:`Rates`): training per frame-epoch
(frames trained on times epochs), MD per step (replica-steps with replicas), the oracle per label. The round
starts only if it, and the end's reserve, still fit: ``FINAL_SHARE`` of the budget for the final training, and
the MD and labels of the calibration and confirmation runs. The final training then gets what is left less
that MD, its epochs fitted to the time (:class:`~sciml.training.callbacks.FitScheduleToTime`); a confirmation's
retraining happens only if it, and one more calibration and confirmation, fit in what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sciml.active.exploration import ExplorationSettings

FINAL_SHARE = 0.25  # of the budget: what bench_active's loop spent on its final training (docs/benchmarks/active.md)
MINIMUM_FINAL_SHARE = 0.1  # the final training's time when the rounds overran the plan


@dataclass(frozen=True)
class Rates:
    """Seconds per frame-epoch of training, per MD step and per oracle label, measured over the rounds."""

    training: float
    md: float
    oracle: float

    @classmethod
    def measured(cls, state: dict, epochs: int, epochs_per_round: int, labels: int) -> Rates:
        """The rates of the rounds in ``state`` (``state.json``: their ``frames_trained`` and ``md_steps``, and
        the phase clocks), round 1 trained ``epochs``, the others ``epochs_per_round``; ``labels``: the frames
        labelled so far (the oracle's calls)."""
        rounds = [record for record in state["rounds"] if "md_steps" in record]
        frame_epochs = sum(record["frames_trained"] * (epochs if record["round"] == 1 else epochs_per_round)
                           for record in rounds)  # fmt: skip
        steps = sum(record["md_steps"] for record in rounds)
        seconds = state["seconds"]
        return cls(seconds["training"] / max(frame_epochs, 1), seconds["md"] / max(steps, 1),
                   seconds["oracle"] / max(labels, 1))  # fmt: skip


def runs_per_round(starts: int, replicas: int) -> int:
    """The runs of a round's first batches, in which every start has had a run (the convergence check)."""
    return replicas * math.ceil(starts / replicas)


def end_md_seconds(
    rates: Rates, exploration: ExplorationSettings, starts: int, confirm_hold_ps: float, calibration_frames: int
) -> float:
    """Seconds of the MD and labels after the final training: the calibration run (``calibration_frames``
    frames of a round's ramp and hold, labelled) and the confirmation run (the ramp, then ``confirm_hold_ps``),
    each from every start."""
    runs = runs_per_round(starts, exploration.replicas)
    confirmation = replace(exploration, hold_ps=confirm_hold_ps).steps
    calibration = exploration.steps if calibration_frames else 0
    labels = calibration_frames + exploration.cap
    return rates.md * runs * (confirmation + calibration) + rates.oracle * labels


def round_seconds(rates: Rates, exploration: ExplorationSettings, starts: int, frames: int, epochs: int) -> float:
    """Seconds of one round: training ``epochs`` on ``frames``, a full exploration from every start, and
    ``cap`` labels."""
    steps = exploration.steps * runs_per_round(starts, exploration.replicas)
    return rates.training * frames * epochs + rates.md * steps + rates.oracle * exploration.cap
