"""Kinetics checks of a learned Koopman basis: implied timescales against lag and the Chapman-Kolmogorov test.

Both keep the trained encoders fixed and refit only the moments at other lags, as a deeptime user does with
a VAMP or MSM model:

    data_at = lambda lag: AtomsDataModule(path, cutoff=5.0, lagtime=lag, ...)   # or lagged_pairs(X, lag)
    implied_timescales(estimator, data_at, [1, 2, 4, 8], time_step=0.1)          # (4, k) in ps
    ck = chapman_kolmogorov(estimator, data_at, {"left": is_left}, steps=4)
    print(ck.summary()); assert ck.passed

``data_at(lag)`` returns the data at that lag: a data module (its ``lagtime`` must be ``lag``), a pair of
(n, d) state tensors, or an iterable of ``(x, x')`` batches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sciml.koopman.estimator import KoopmanEstimator, Observable


def lagged_pairs(trajectories: torch.Tensor | Sequence[torch.Tensor], lag: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(X_t, X_{t+lag}) of one (n, d) trajectory or of several (pairs never cross trajectories)."""
    if isinstance(trajectories, torch.Tensor):
        trajectories = [trajectories]
    if any(len(x) <= lag for x in trajectories):
        raise ValueError(f"a trajectory has no pairs at lag {lag} (lengths {[len(x) for x in trajectories]})")
    return torch.cat([x[:-lag] for x in trajectories]), torch.cat([x[lag:] for x in trajectories])


def refitted(estimator: KoopmanEstimator, data, lag: int, observables: dict[str, Observable] | None = None):
    """A new estimator with the same encoders, rank cut-off and rank, fitted on ``data`` at ``lag``."""
    at_lag = KoopmanEstimator(
        estimator.encoder_f, estimator.encoder_g, lag, estimator.rank_cutoff, estimator.device, estimator.rank
    )
    return at_lag.fit(data, observables)


def implied_timescales(
    estimator: KoopmanEstimator, data_at: Callable[[int], object], lags: Sequence[int], time_step: float = 1.0
) -> torch.Tensor:
    """(len(lags), r) implied timescales -lag time_step / ln|lambda_i(lag)| of the learned basis refitted at
    each lag (r = the estimator's ``rank`` or k; the constant function's is inf). Converged models give
    timescales that no longer change with the lag."""
    return torch.stack([refitted(estimator, data_at(lag), lag).timescales(time_step) for lag in lags])


@dataclass
class ChapmanKolmogorov:
    """Predicted and estimated expectations, both (steps, weights, observables) float64.

    ``predicted[n - 1, w, o]`` = E_w[(K(lag)^n h_o)(x_t)] with the model at ``lag``; ``estimated[n - 1, w, o]``
    = E_w[h_o(x_{t + n lag})] from data at lag n lag; E_w averages over start states x_t weighted by w(x_t)
    (a set indicator selects the starts in that set).
    """

    lag: int
    weights: list[str]
    observables: list[str]
    predicted: torch.Tensor
    estimated: torch.Tensor
    tolerance: float

    @property
    def errors(self) -> torch.Tensor:
        return (self.predicted - self.estimated).abs()

    @property
    def passed(self) -> bool:
        return bool(self.errors.max() <= self.tolerance)

    def summary(self) -> str:
        worst = int(self.errors.argmax())
        n, w, o = torch.unravel_index(torch.tensor(worst), self.errors.shape)
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"Chapman-Kolmogorov test at lag {self.lag}, {self.errors.shape[0]} steps: {verdict} (largest "
            f"|predicted - estimated| {self.errors.max():.4f} vs tolerance {self.tolerance:g}, at {int(n) + 1} "
            f"lags, weight '{self.weights[w]}', observable '{self.observables[o]}')"
        )


def chapman_kolmogorov(
    estimator: KoopmanEstimator,
    data_at: Callable[[int], object],
    observables: dict[str, Observable],
    steps: int = 4,
    weights: dict[str, Observable] | None = None,
    tolerance: float = 0.05,
) -> ChapmanKolmogorov:
    """Chapman-Kolmogorov test of ``estimator`` (fitted, its lag is the base lag) for scalar ``observables``
    (functions of a batch of states -> (B,), e.g. set indicators) and start ``weights`` (same form;
    default: all starts equally). Passes when every |predicted - estimated| <= ``tolerance``."""
    lag = estimator.lagtime or 1
    model = refitted(estimator, data_at(lag), lag, observables)
    weights = weights or {"all": lambda x: torch.ones(_batch_size(x), dtype=torch.float64)}
    predicted = torch.zeros(steps, len(weights), len(observables), dtype=torch.float64)
    estimated = torch.zeros_like(predicted)
    for n in range(1, steps + 1):
        data = data_at(n * lag)
        if getattr(data, "lagtime", n * lag) != n * lag:
            raise ValueError(f"data_at({n * lag}) returned data at lagtime {data.lagtime}")
        total = torch.zeros(len(weights), dtype=torch.float64)
        for x_0, x_n in model.batches(data, "train"):
            w = torch.stack([_column(weight(x_0)) for weight in weights.values()], 1)  # (B, W)
            forecast = torch.stack([model.predict(x_0, n, name)[:, -1, 0] for name in observables], 1)
            later = torch.stack([_column(h(x_n)) for h in observables.values()], 1)  # (B, O)
            predicted[n - 1] += w.T @ forecast
            estimated[n - 1] += w.T @ later
            total += w.sum(0)
        predicted[n - 1] /= total[:, None]
        estimated[n - 1] /= total[:, None]
    return ChapmanKolmogorov(lag, list(weights), list(observables), predicted, estimated, tolerance)


def _column(values) -> torch.Tensor:
    return torch.as_tensor(values).to("cpu", torch.float64).reshape(-1)


def _batch_size(x) -> int:
    return int(x.shape[0]) if isinstance(x, torch.Tensor) else int(x.num_graphs)
