"""Whether a Koopman model's lag is long enough: the implied-timescale plateau and the Chapman-Kolmogorov test.

A model at lag tau sees the dynamics only through its features; where they do not span the slow eigenfunctions,
the implied timescales it gives are lower bounds that rise with tau until they level off (the variational
principle of VAC/VAMP). A lag on that plateau, where the Chapman-Kolmogorov test also passes, is a lag whose
timescales can be trusted; a lag below it understates every timescale and rate.

    plateau = timescale_plateau(bands, lags, time_step)      # one bool per lag
    choice = choose_lag(bands, lags, time_step, given=5, ck_passes=lambda lag: ck(lag).passed)
    choice.lag, choice.converged, choice.reason
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sciml.koopman.bootstrap import Bands

TOLERANCE = 0.05  # relative rise of the slowest timescale to a larger lag that still counts as level


def timescale_plateau(
    bands: Bands, lags: Sequence[int], time_step: float = 1.0, tolerance: float = TOLERANCE
) -> list[bool]:
    """For each lag, whether the slowest implied timescale has levelled off there: it is resolved (longer than the
    lag itself) and no larger resolved lag's timescale rises above it, where a rise is more than ``tolerance``
    (relative, point estimates) and real: the bootstrap interval of the difference (paired: each bootstrap sample
    gives every lag's timescale from the same resampled trajectories) lies above zero. The largest lag has
    nothing to be compared with and is never on the plateau.

    Args:
        bands: implied timescales at ``lags`` (:func:`~sciml.koopman.bootstrap.bootstrap_timescales`), in units
            of ``time_step``; column 0 is the constant function's (inf), column 1 the slowest process.
        lags: the lags of ``bands``' rows (frames), ascending.
        time_step: time between frames, in the timescales' unit.
        tolerance: relative rise allowed to a larger lag.

    Shape:
        bands.estimate: (len(lags), r); bands.samples: (samples, len(lags), r).
    """
    lags = list(lags)
    if lags != sorted(lags) or len(set(lags)) != len(lags):
        raise ValueError(f"lags must be ascending and distinct, got {lags}")
    slowest, drawn = bands.estimate[:, 1], bands.samples[:, :, 1]
    resolved = np.isfinite(slowest) & (slowest > np.asarray(lags) * time_step)

    def rises(i: int, j: int) -> bool:
        lower = np.nanquantile(drawn[:, j] - drawn[:, i], (1 - bands.confidence) / 2)
        return bool(slowest[j] > slowest[i] * (1 + tolerance) and lower > 0)

    plateau = []
    for i in range(len(lags)):
        later = [j for j in range(i + 1, len(lags)) if resolved[j]]
        plateau.append(bool(resolved[i] and later and not any(rises(i, j) for j in later)))
    return plateau


@dataclass
class LagChoice:
    """The lag a model's kinetics are given at (``lag``, frames), the lag it was asked for (``given``), whether its
    timescales have converged there (``converged``: on the plateau and the CK test passed), the one-line
    ``reason``, the plateau per lag of ``lags`` and the CK verdict of each lag tested (``ck_passed``)."""

    lag: int
    given: int
    converged: bool
    reason: str
    lags: list[int]
    plateau: list[bool]
    ck_passed: dict[int, bool] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"lag": self.lag, "given": self.given, "converged": self.converged, "reason": self.reason,
                "lags": self.lags, "plateau": self.plateau,
                "ck_passed": {str(lag): passed for lag, passed in self.ck_passed.items()}}  # fmt: skip


def choose_lag(
    bands: Bands,
    lags: Sequence[int],
    time_step: float,
    given: int,
    ck_passes: Callable[[int], bool],
    tolerance: float = TOLERANCE,
    unit: str = "ps",
    search: bool = True,
) -> LagChoice:
    """The lag to report the kinetics at: ``given`` when it is on the implied-timescale plateau
    (:func:`timescale_plateau`) and the Chapman-Kolmogorov test passes there (``ck_passes(lag)``); otherwise the
    smallest larger lag of ``lags`` that is; otherwise ``given``, said plainly not to be converged (its
    timescales are then lower bounds). ``ck_passes`` is called only for lags on the plateau, in ascending order.
    ``search=False`` judges ``given`` alone and keeps it.
    """
    lags = list(lags)
    if given not in lags:
        raise ValueError(f"the given lag {given} must be one of the timescale lags {lags}")
    plateau = timescale_plateau(bands, lags, time_step, tolerance)
    slowest = bands.estimate[:, 1]
    ck_passed: dict[int, bool] = {}

    def converged_at(index: int) -> bool:
        if not plateau[index]:
            return False
        if lags[index] not in ck_passed:
            ck_passed[lags[index]] = bool(ck_passes(lags[index]))
        return ck_passed[lags[index]]

    def at(index: int) -> str:
        return f"{slowest[index]:.4g} {unit} at lag {lags[index]}"

    start = lags.index(given)
    searched = range(start, len(lags) if search else start + 1)
    chosen = next((i for i in searched if converged_at(i)), None)
    if chosen == start:
        reason = (
            f"converged: the slowest implied timescale ({at(start)}) rises by at most {tolerance:.0%} (or "
            f"within its sampling error) at every larger lag, and the Chapman-Kolmogorov test passes at lag {given}"
        )
    elif chosen is not None:
        why = "is still rising" if not plateau[start] else "is flat, but the Chapman-Kolmogorov test fails there"
        reason = (f"the lag given ({given} frames) is too short: the slowest implied timescale {why} ({at(start)}); "
                  f"the model's lag is {lags[chosen]}, the first larger lag on the plateau ({at(chosen)}) where the "
                  f"Chapman-Kolmogorov test passes")  # fmt: skip
    else:
        flat = [lags[i] for i in searched if plateau[i]]
        if not flat:
            reason = (f"NOT converged: the slowest implied timescale still rises from {at(start)} to "
                      f"{at(len(lags) - 1)}: the timescales at lag {given} are lower bounds and the rates upper "
                      f"bounds; give larger lags (or longer trajectories)")  # fmt: skip
        else:
            reason = (f"NOT converged: the implied timescales level off from lag {flat[0]}, but the "
                      f"Chapman-Kolmogorov test fails at lag {', '.join(map(str, flat))}: the model does not "
                      f"predict its own long-time behaviour (more states, other features or more data)")  # fmt: skip
    return LagChoice(lags[chosen] if chosen is not None else given, given, chosen is not None, reason, lags,
                     plateau, ck_passed)  # fmt: skip
