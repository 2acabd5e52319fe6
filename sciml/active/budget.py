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
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from sciml.active.exploration import ExplorationSettings
from sciml.active.state import RunState
from sciml.active.store import LabelStore

FINAL_SHARE = 0.25  # of the budget: what bench_active's loop spent on its final training (docs/benchmarks/active.md)
MINIMUM_FINAL_SHARE = 0.1  # the final training's time when the rounds overran the plan


@dataclass(frozen=True)
class Rates:
    """Seconds per frame-epoch of training, per MD step and per oracle label, measured over the rounds."""

    training: float
    md: float
    oracle: float

    @classmethod
    def measured(cls, state: RunState, epochs: int, epochs_per_round: int, labels: int) -> Rates:
        """The rates of the rounds in ``state`` (their ``frames_trained`` and ``md_steps``, and the phase
        clocks), round 1 trained ``epochs``, the others ``epochs_per_round``; ``labels``: the frames labelled so
        far (the oracle's calls)."""
        rounds = [record for record in state.rounds if record.md_steps is not None]
        frame_epochs = sum(record.frames_trained * (epochs if record.round == 1 else epochs_per_round)
                           for record in rounds)  # fmt: skip
        steps = sum(record.md_steps for record in rounds)
        seconds = state.seconds
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


class Planner:
    """The time budget's decisions for one run of :class:`~sciml.active.loop.ActiveLearning`, from its
    ``settings`` (a ``LearningSettings``), its :class:`~sciml.active.state.RunState` (the phase clocks and the
    rounds' records) and its store (the frames labelled so far); ``report`` receives the reason a round is not
    started. Without a budget (``settings.time_budget_min`` None) everything fits."""

    def __init__(self, settings, state: RunState, store: LabelStore, report: Callable[[str], None]) -> None:
        self.settings, self.state, self.store, self.report = settings, state, store, report

    def left(self) -> float:
        """Seconds of the budget left: the budget less the phase clocks' sum."""
        return self.settings.time_budget_min * 60 - sum(self.state.seconds.values())

    def measured_rates(self) -> Rates:
        """The rounds' rates (kept in the state: later trainings are not rounds)."""
        training = self.settings.training
        rates = Rates.measured(self.state, training.epochs, training.epochs_per_round,
                               len(self.store.labelled) + len(self.store.failed))  # fmt: skip
        self.state.rates = asdict(rates)
        return rates

    def end_md(self, rates: Rates, starts: int) -> float:
        """Seconds of the calibration and confirmation runs and their labels (none without confirmations)."""
        settings = self.settings
        if not settings.confirmations or not settings.rounds:
            return 0.0
        return end_md_seconds(rates, settings.exploration, starts, settings.confirm_hold_ps,
                              settings.calibration_frames)  # fmt: skip

    def round_fits(self, round: int, starts: int) -> bool:
        """Whether round ``round`` and the end's reserve fit in the time left (always, without a budget)."""
        self.state.budget_ended_after = None  # a resumed run with more time goes on
        if self.settings.time_budget_min is None:
            return True
        rates, budget = self.measured_rates(), self.settings.time_budget_min * 60
        exploration, epochs = self.settings.exploration, self.settings.training.epochs_per_round
        cost = round_seconds(rates, exploration, starts, len(self.store.labelled), epochs)
        reserve = FINAL_SHARE * budget + self.end_md(rates, starts)
        if cost + reserve <= self.left():
            return True
        self.state.budget_ended_after = round - 1
        self.state.save()
        self.report(f"time budget: round {round} (about {cost / 60:.1f} min) and the final model's training, "
                    f"calibration and confirmation (about {reserve / 60:.1f} min) would not fit in the "
                    f"{self.left() / 60:.1f} min left of {budget / 60:g}; exploration ends after round "
                    f"{round - 1}")  # fmt: skip
        return False

    def final_seconds(self, starts: int) -> float | None:
        """The final training's time: the time left less the calibration and confirmation (at least
        ``MINIMUM_FINAL_SHARE`` of the budget); None without a budget."""
        if self.settings.time_budget_min is None:
            return None
        reserve = self.end_md(self.measured_rates(), starts)
        return max(self.left() - reserve, MINIMUM_FINAL_SHARE * self.settings.time_budget_min * 60)

    def retraining_fits(self, starts: int) -> bool:
        """Whether a confirmation's retraining (``epochs_per_round`` on everything labelled) and the next
        calibration and confirmation fit in the time left, at the rounds' rates (always, without a budget)."""
        if self.settings.time_budget_min is None:
            return True
        rates = Rates(**self.state.rates) if self.state.rates else self.measured_rates()
        training = rates.training * len(self.store.labelled) * self.settings.training.epochs_per_round
        return training + self.end_md(rates, starts) <= self.left()
