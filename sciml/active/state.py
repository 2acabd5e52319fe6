"""``RunState``: what a ``sciml learn`` run has done, kept in ``state.json`` so that a run resumes where it stopped.

It holds the run's identity (``source``, ``oracle``: a resumed run must match them), one :class:`StageRecord`
per exploration round and per confirmation, the phase clocks (seconds spent in the oracle, training and MD,
summed over resumed sessions) and what the final stage decided (``final_from``, ``confirmations_of``,
``confirmed``, ``budget_ended_after``, the measured ``rates``). Every change is written at once, atomically.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

PHASES = ("oracle", "training", "md")
STAGES = ("rounds", "confirmations")


@dataclass
class StageRecord:
    """What one exploration round (``round``) or confirmation (``confirmation``) did; ``None``: not yet.

    Attributes:
        frames_trained: labelled frames its model trained on (rounds).
        md_steps, runs, stopped, broken: MD steps, runs, runs stopped by the uncertainty and broken runs.
        max_uncertainty: the largest per-atom force uncertainty of its MD (eV/Å).
        candidates, picked: frames above the threshold, and those picked for the oracle.
        below_threshold: every run stayed below the threshold (set once its exploration ran).
        labelled: frames it added to the store.
        calibration: ``{"frames", "energy_scale_factor", "force_scale_factor"}`` of the refit (confirmations).
        model: the checkpoint it confirmed (confirmations).
    """

    round: int | None = None
    confirmation: int | None = None
    frames_trained: int | None = None
    md_steps: int | None = None
    runs: int | None = None
    max_uncertainty: float | None = None
    stopped: int | None = None
    broken: int | None = None
    candidates: int | None = None
    picked: int | None = None
    below_threshold: bool | None = None
    labelled: int | None = None
    calibration: dict[str, float] | None = None
    model: str | None = None

    @property
    def explored(self) -> bool:
        """Its exploration ran (its picks are on disk)."""
        return self.below_threshold is not None

    def as_json(self) -> dict:
        """The fields that are set (what ``state.json`` holds)."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class RunState:
    """The state of one run (module docstring); :meth:`load` reads or starts it, :meth:`save` writes it."""

    source: str
    oracle: str
    rounds: list[StageRecord] = field(default_factory=list)
    converged: bool = False
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    confirmations: list[StageRecord] = field(default_factory=list)
    confirmations_of: str | None = None
    confirmed: bool | None = None
    final_from: str | None = None
    rates: dict[str, float] | None = None
    budget_ended_after: int | None = None
    path: Path | None = field(default=None, repr=False, compare=False)

    @classmethod
    def load(cls, path: str | Path, source: str, oracle: str) -> RunState:
        """The state in ``path`` (a new one when it does not exist); a run of another start or oracle is refused,
        and so is a file with keys this sciml does not know, both naming the file."""
        path = Path(path)
        if not path.exists():
            return cls(source, oracle, path=path)
        values = json.loads(path.read_text())
        known = {item.name for item in fields(cls)} - {"path"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"'{path}' has keys this sciml does not know: {unknown}")
        stages = {key: [_stage_record(item, path) for item in values.pop(key, [])] for key in STAGES}
        state = cls(**values, **stages, path=path)
        for key, given in (("source", source), ("oracle", oracle)):
            if getattr(state, key) != given:
                raise ValueError(
                    f"'{path.parent}' holds a run with {key} '{getattr(state, key)}', not '{given}': "
                    "resume it with the same start and oracle, or choose another directory"
                )
        return state

    def save(self) -> None:
        """Write the state to its file (a temporary file renamed over it: never half written)."""
        values = {key: value for key, value in asdict(self).items() if key != "path" and value is not None}
        values.update({key: [record.as_json() for record in getattr(self, key)] for key in STAGES})
        temporary = self.path.with_suffix(".json.partial")
        temporary.write_text(json.dumps(values, indent=1))
        temporary.replace(self.path)

    def timed(self, phase: str, function, *args, **kwargs):
        """Call ``function``, adding its seconds to the clock of ``phase`` (saved, also when it fails)."""
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.seconds[phase] += time.perf_counter() - start
            self.save()

    def round_record(self, round: int) -> StageRecord:
        """The record of exploration round ``round`` (created, with those before it, if needed)."""
        while len(self.rounds) < round:
            self.rounds.append(StageRecord(round=len(self.rounds) + 1))
        return self.rounds[round - 1]

    def confirmation_record(self, k: int) -> StageRecord:
        """The record of confirmation ``k`` (created if needed)."""
        while len(self.confirmations) < k:
            self.confirmations.append(StageRecord(confirmation=len(self.confirmations) + 1))
        return self.confirmations[k - 1]


def _stage_record(values: dict, path: Path) -> StageRecord:
    known = {item.name for item in fields(StageRecord)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"'{path}' has a round or confirmation record with keys this sciml does not know: {unknown}")
    return StageRecord(**values)
