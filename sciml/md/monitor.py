"""The largest per-atom force uncertainty of an MD run, step by step: one monitor per run or replica, the same
rules on ASE's path (:mod:`sciml.md.ase_driver`) and on the engine (:mod:`sciml.md.engine`)."""

from __future__ import annotations

import numpy as np


def largest_force_uncertainty(calculator) -> float | None:
    """The largest per-atom ``forces_uncertainty`` (eV/Å) of the calculator's latest results, if it reports one."""
    values = getattr(calculator, "results", {}).get("forces_uncertainty")
    return None if values is None else float(np.max(values))


class UncertaintyMonitor:
    """Per-step largest per-atom force uncertainty: the run's peak, the steps above ``threshold`` (eV/Å; a NaN
    value, a model that blew up, counts as above) and the peak since the last record (for the progress
    display)."""

    def __init__(self, threshold: float | None, stop: bool) -> None:
        self.threshold, self.stop = threshold, stop
        self.peak, self.last, self.recent = float("nan"), float("nan"), float("nan")
        self.flagged: list[int] = []

    def check(self, calculator, step: int) -> bool:
        """Read the calculator's latest uncertainty at ``step`` (:meth:`observe`); False without an estimate."""
        value = largest_force_uncertainty(calculator)
        return False if value is None else self.observe(value, step)

    def observe(self, value: float, step: int) -> bool:
        """Record the largest per-atom uncertainty ``value`` (eV/Å) at ``step``; True when above the threshold."""
        self.last = value
        self.peak = value if not self.peak >= value else self.peak  # NaN-safe max
        self.recent = value if not self.recent >= value else self.recent
        above = self.threshold is not None and not value <= self.threshold
        if above:
            self.flagged.append(step)
        return above

    def since_record(self) -> dict:
        """``{"max_force_uncertainty": peak since the last call}`` (empty without an estimate); resets it."""
        recent, self.recent = self.recent, float("nan")
        return {} if recent != recent else {"max_force_uncertainty": recent}
