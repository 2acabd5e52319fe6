"""``RunState``: what a ``sciml learn`` run has done, kept in ``state.json`` so that a run resumes where it stopped.

It holds the run's identity (``source``, ``oracle``: a resumed run must match them), one record per exploration
round and per confirmation (plain JSON objects: ``frames_trained``, ``md_steps``, ``runs``, ``max_uncertainty``,
``stopped``, ``broken``, ``candidates``, ``picked``, ``below_threshold``, ``labelled``, ``calibration``,
``model``), the phase clocks (seconds spent in the oracle, training and MD, summed over resumed sessions) and
what the final stage decided (``final_from``, ``confirmations_of``, ``confirmed``, ``budget_ended_after``, the
measured ``rates``). Every change is written at once, atomically.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

PHASES = ("oracle", "training", "md")


@dataclass
class RunState:
    """The state of one run (module docstring); :meth:`load` reads or starts it, :meth:`save` writes it."""

    source: str
    oracle: str
    rounds: list[dict] = field(default_factory=list)
    converged: bool = False
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    confirmations: list[dict] = field(default_factory=list)
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
        state = cls(**values, path=path)
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

    def round_record(self, round: int) -> dict:
        """The record of exploration round ``round`` (created, with those before it, if needed)."""
        while len(self.rounds) < round:
            self.rounds.append({"round": len(self.rounds) + 1})
        return self.rounds[round - 1]

    def confirmation_record(self, k: int) -> dict:
        """The record of confirmation ``k`` (created if needed)."""
        while len(self.confirmations) < k:
            self.confirmations.append({"confirmation": len(self.confirmations) + 1})
        return self.confirmations[k - 1]
