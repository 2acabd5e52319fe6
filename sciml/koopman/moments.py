"""Float64 moments of learned features over a whole dataset of lagged pairs (x, x').

With f_0 = f(x), f_1 = f(x'), g_0 = g(x), g_1 = g(x') (constant first, k columns) the sums kept are
``ff_00, gg_11, fg_01`` (CCA: M_f, M_g, T), ``gf_11, gf_00`` (aligned Koopman matrix forward and
backward), ``ff_01, gg_01, gg_00`` (EDMD on f or g), and for each named observable h (a (B, d)
function of a batch of states) ``fh_00:<name>, gh_00:<name>, gh_11:<name>`` (decoders, forecasts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class Moments:
    """Running sums of outer products; ``mean(key)`` divides by the number of pairs seen."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, key: str, left: torch.Tensor, right: torch.Tensor) -> None:
        product = left.T.to(torch.float64) @ right.to(torch.float64)
        self.sums[key] = self.sums[key] + product if key in self.sums else product

    def mean(self, key: str) -> torch.Tensor:
        if key not in self.sums:
            raise KeyError(f"moment '{key}' was not accumulated (observables seen: {self.observables})")
        return self.sums[key] / self.count

    @property
    def observables(self) -> list[str]:
        return sorted(key.split(":", 1)[1] for key in self.sums if key.startswith("gh_11:"))

    def state_dict(self) -> dict:
        return {"count": self.count, "sums": dict(self.sums)}

    @classmethod
    def from_state_dict(cls, state: dict) -> Moments:
        moments = cls()
        moments.count, moments.sums = int(state["count"]), dict(state["sums"])
        return moments


def accumulate(
    pairs: Iterable,
    features: Callable[[object], tuple[torch.Tensor, torch.Tensor]],
    observables: dict[str, Callable[[object], torch.Tensor]],
    moments: Moments | None = None,
) -> Moments:
    """Add every batch ``(x, x')`` of ``pairs`` to ``moments`` (a new one by default); ``features(x)``
    returns ``(f(x), g(x))``."""
    moments = moments if moments is not None else Moments()
    for x_0, x_1 in pairs:
        values = {name: (_matrix(h(x_0), name), _matrix(h(x_1), name)) for name, h in observables.items()}
        add_pairs(moments, *features(x_0), *features(x_1), values)
    if moments.count == 0:
        raise ValueError("no pairs to estimate moments from (empty data)")
    return moments


def add_pairs(
    moments: Moments,
    f_0: torch.Tensor,
    g_0: torch.Tensor,
    f_1: torch.Tensor,
    g_1: torch.Tensor,
    observables: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> Moments:
    """Add B pairs given by their features, (B, k) each, and ``{name: (h(x), h(x'))}`` (B, d) values."""
    for key, left, right in (
        ("ff_00", f_0, f_0),
        ("gg_11", g_1, g_1),
        ("fg_01", f_0, g_1),
        ("gf_11", g_1, f_1),
        ("gf_00", g_0, f_0),
        ("ff_01", f_0, f_1),
        ("gg_01", g_0, g_1),
        ("gg_00", g_0, g_0),
    ):
        moments.add(key, left, right)
    for name, (h_0, h_1) in (observables or {}).items():
        moments.add(f"fh_00:{name}", f_0, h_0)
        moments.add(f"gh_00:{name}", g_0, h_0)
        moments.add(f"gh_11:{name}", g_1, h_1)
    moments.count += f_0.shape[0]
    return moments


def _matrix(values: torch.Tensor, name: str) -> torch.Tensor:
    values = torch.as_tensor(values)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"observable '{name}' must return (B,) or (B, d) values, got shape {tuple(values.shape)}")
    return values
