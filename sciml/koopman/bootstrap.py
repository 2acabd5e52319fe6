"""Error bars for a learned Koopman basis: a bootstrap over trajectories of the timescales and of the
Chapman-Kolmogorov test.

The encoders stay fixed (as in :mod:`sciml.koopman.kinetics`); what is resampled is the data the moments are
estimated from. Trajectories are the independent units: each bootstrap sample draws as many trajectories as
there are, with replacement, and refits the moments at every lag (Efron's nonparametric bootstrap; with
correlated frames inside a trajectory, resampling frames would understate the spread). A dataset of fewer
than ``blocks`` trajectories is first cut into ``blocks`` contiguous pieces (a block bootstrap; the pairs that
straddle two pieces are dropped, few when the pieces are much longer than the lag and the slowest timescale).

Trajectories may come in groups: replicas that ran on the same posterior draw of the potential
(:class:`~sciml.uncertainty.PosteriorSamples`). Then two resamplings answer two questions
(:func:`resampled_counts`): drawing the groups with replacement, each with all its trajectories, gives the
spread of sampling and of the potential together (Davison & Hinkley, Bootstrap Methods, 1997, sec. 3.8: with
groups drawn from a population, resample the groups alone); drawing the trajectories within each group, the
groups kept, gives the spread of sampling alone.

The features of every frame are computed once (:class:`TrajectoryFeatures`), and the moments of each piece at
each lag once; a bootstrap sample is then a weighted sum of those moments, so hundreds of samples cost little.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sciml.koopman.estimator import KoopmanEstimator, Observable
from sciml.koopman.moments import Moments, add_pairs


class TrajectoryFeatures:
    """(f, g) of each frame of each trajectory (``estimator.features``, float64 (n_r, k)), and the values of
    named scalar ``observables`` and start ``weights``: functions of a batch of states -> (B,), or lists of
    per-trajectory (n_r,) values (e.g. state indicators); default one weight, ``"all starts"``, of 1.

    ``trajectories``: per trajectory, what ``estimator.features`` takes ((n_r, d) states, a batch of graphs)
    or a list of such chunks in order; ``blocks``: cut them into at least this many contiguous pieces
    (module docstring); ``groups``: per trajectory, its group (e.g. the posterior draw it ran on), or ``None``.
    """

    def __init__(
        self,
        estimator: KoopmanEstimator,
        trajectories: Sequence,
        observables: dict[str, Observable] | None = None,
        weights: dict[str, Observable] | None = None,
        blocks: int = 20,
        groups: Sequence[int] | None = None,
    ) -> None:
        if groups is not None and len(groups) != len(trajectories):
            raise ValueError(f"groups name {len(groups)} trajectories, there are {len(trajectories)}")
        self.trajectory_groups = None if groups is None else [int(g) for g in groups]
        weights = weights or {"all starts": lambda states: torch.ones(_frames(states), dtype=torch.float64)}
        self.observable_names, self.weight_names, self.blocks = list(observables or {}), list(weights), blocks
        self.trajectories = []  # per trajectory (f, g, h, w)
        with torch.no_grad():
            for r, trajectory in enumerate(trajectories):
                f, g = (torch.cat(parts) for parts in zip(*over_chunks(estimator.features, trajectory), strict=True))
                h = _columns(observables, trajectory, r, f.shape[0])
                w = _columns(weights, trajectory, r, f.shape[0])
                self.trajectories.append((f, g, h, w))
        self._cut()

    def _cut(self) -> None:
        pieces, owners = self.trajectories, list(range(len(self.trajectories)))
        if len(pieces) < self.blocks:  # too few trajectories to resample: contiguous blocks of each
            per = int(np.ceil(self.blocks / len(pieces)))
            cuts = [(r, cut) for r, piece in enumerate(pieces) for cut in _slices(len(piece[0]), per)]
            pieces, owners = [tuple(part[cut] for part in pieces[r]) for r, cut in cuts], [r for r, _ in cuts]
        self.pieces = pieces
        groups = self.trajectory_groups
        self.groups = None if groups is None else np.asarray([groups[r] for r in owners])
        self._moments: dict[int, list[Moments]] = {}

    def with_values(self, observables: dict[str, list], weights: dict[str, list]) -> TrajectoryFeatures:
        """The same features with other observables and start weights, given as per-trajectory (n_r,) values
        (the encoders are not run again)."""
        copy = object.__new__(TrajectoryFeatures)
        copy.observable_names, copy.weight_names, copy.blocks = list(observables), list(weights), self.blocks
        copy.trajectory_groups = self.trajectory_groups
        copy.trajectories = [
            (f, g, _columns(observables, None, r, len(f)), _columns(weights, None, r, len(f)))
            for r, (f, g, _, _) in enumerate(self.trajectories)
        ]
        copy._cut()
        return copy

    @property
    def shortest_piece(self) -> int:
        """The number of frames in the shortest resampled unit (a lag beyond it has no pairs in that unit)."""
        return min(len(piece[0]) for piece in self.pieces)

    @property
    def count(self) -> int:
        """The number of resampled units (trajectories, or blocks of them)."""
        return len(self.pieces)

    def resampled_counts(self, samples: int, seed: int, within_groups: bool = False) -> np.ndarray:
        """(samples, count) bootstrap counts of the units (:func:`resampled_counts` with their groups)."""
        return resampled_counts(self.count, samples, seed, self.groups, within_groups)

    def moments(self, lag: int, counts: np.ndarray | None = None) -> Moments:
        """The moments of the pairs ``lag`` frames apart, each piece counted ``counts[piece]`` times (default 1)."""
        if lag not in self._moments:
            per_piece = []
            for f, g, h, _ in self.pieces:
                moments = Moments()
                if len(f) > lag:
                    values = {name: (h[:-lag, [i]], h[lag:, [i]]) for i, name in enumerate(self.observable_names)}
                    add_pairs(moments, f[:-lag], g[:-lag], f[lag:], g[lag:], values)
                per_piece.append(moments)
            if not any(m.count for m in per_piece):
                raise ValueError(f"no trajectory is longer than the lag {lag}")
            self._moments[lag] = per_piece
        counts = np.ones(self.count) if counts is None else counts
        combined = Moments()
        for moments, times in zip(self._moments[lag], counts, strict=True):
            if times and moments.count:
                for key, value in moments.sums.items():
                    combined.sums[key] = combined.sums.get(key, 0) + times * value
                combined.count += int(times) * moments.count
        return combined

    def start_sums(self, lag: int, counts: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Over starts x_t with a partner ``lag`` later, each piece ``counts`` times: sum_t w(x_t) f(x_t)
        (W, k), sum_t w(x_t) h(x_{t + lag}) (W, O) and sum_t w(x_t) (W,)."""
        first = self.pieces[0]
        f_sum = torch.zeros(first[3].shape[1], first[0].shape[1], dtype=torch.float64)
        h_sum = torch.zeros(first[3].shape[1], first[2].shape[1], dtype=torch.float64)
        w_sum = torch.zeros(first[3].shape[1], dtype=torch.float64)
        for (f, _, h, w), times in zip(self.pieces, counts, strict=True):
            if times and len(f) > lag:
                f_sum += times * (w[:-lag].T @ f[:-lag])
                h_sum += times * (w[:-lag].T @ h[lag:])
                w_sum += times * w[:-lag].sum(0)
        return f_sum, h_sum, w_sum


def fitted(estimator: KoopmanEstimator, moments: Moments, lag: int) -> KoopmanEstimator:
    """An estimator with ``estimator``'s encoders and rank, holding ``moments`` at ``lag``."""
    copy = KoopmanEstimator(estimator.encoder_f, estimator.encoder_g, lag, estimator.rank_cutoff, estimator.device,
                            estimator.rank)  # fmt: skip
    copy.moments = moments
    return copy


@dataclass
class Bands:
    """A point estimate on all the data, the bootstrap samples and their central ``confidence`` interval."""

    estimate: np.ndarray
    samples: np.ndarray  # (samples, *estimate.shape)
    confidence: float

    @property
    def lower(self) -> np.ndarray:
        return np.nanquantile(self.samples, (1 - self.confidence) / 2, axis=0)

    @property
    def upper(self) -> np.ndarray:
        return np.nanquantile(self.samples, (1 + self.confidence) / 2, axis=0)

    @property
    def standard_error(self) -> np.ndarray:
        return np.nanstd(self.samples, axis=0, ddof=1)


def resampled_counts(
    units: int, samples: int, seed: int, groups: np.ndarray | None = None, within_groups: bool = False
) -> np.ndarray:
    """(samples, units) counts of each unit in each bootstrap sample. Without ``groups``: each sample draws
    ``units`` units with replacement. With ``groups`` ((units,) labels; module docstring): the groups are drawn
    with replacement, each bringing all its units (sampling and the groups' differences), or, with
    ``within_groups``, each group's units are drawn among themselves (sampling alone)."""
    rng = np.random.default_rng(seed)
    if groups is None:
        return rng.multinomial(units, np.full(units, 1.0 / units), size=samples)
    groups = np.asarray(groups)
    if len(groups) != units:
        raise ValueError(f"groups label {len(groups)} units, there are {units}")
    labels, index = np.unique(groups, return_inverse=True)
    if not within_groups:
        drawn = rng.multinomial(len(labels), np.full(len(labels), 1.0 / len(labels)), size=samples)
        return drawn[:, index]
    counts = np.zeros((samples, units), dtype=np.int64)
    for g in range(len(labels)):
        members = np.flatnonzero(index == g)
        counts[:, members] = rng.multinomial(len(members), np.full(len(members), 1.0 / len(members)), size=samples)
    return counts


def bootstrap_timescales(
    estimator: KoopmanEstimator,
    features: TrajectoryFeatures,
    lags: Sequence[int],
    time_step: float = 1.0,
    samples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    within_groups: bool = False,
) -> Bands:
    """Implied timescales (len(lags), r) in units of ``time_step`` at each lag, with bootstrap bands (the
    constant function's inf is kept as the first column); with groups in ``features``, of sampling and the
    groups' differences, or of sampling alone (``within_groups``; :func:`resampled_counts`)."""

    def timescales(counts: np.ndarray) -> np.ndarray:
        return np.stack([fitted(estimator, features.moments(lag, counts), lag).timescales(time_step).numpy()
                         for lag in lags])  # fmt: skip

    estimate = timescales(np.ones(features.count))
    drawn = np.stack([timescales(c) for c in features.resampled_counts(samples, seed, within_groups)])
    return Bands(estimate, drawn, confidence)


@dataclass
class ChapmanKolmogorovBands:
    """Predicted and estimated expectations (steps, weights, observables) with bootstrap bands; ``passed``
    when every |predicted - estimated| is within ``z`` combined standard errors (z = 1.96 for 95 %)."""

    lag: int
    weights: list[str]
    observables: list[str]
    predicted: Bands
    estimated: Bands
    z: float = 1.96

    @property
    def tolerance(self) -> np.ndarray:
        """z sqrt(se_predicted^2 + se_estimated^2) per entry."""
        return self.z * np.hypot(self.predicted.standard_error, self.estimated.standard_error)

    @property
    def passed(self) -> bool:
        return bool(np.all(np.abs(self.predicted.estimate - self.estimated.estimate) <= self.tolerance))

    def summary(self) -> str:
        excess = np.abs(self.predicted.estimate - self.estimated.estimate) / np.maximum(self.tolerance, 1e-300)
        n, w, o = np.unravel_index(int(np.argmax(excess)), excess.shape)
        verdict = "passed" if self.passed else "FAILED"
        return (f"Chapman-Kolmogorov test at lag {self.lag}, {excess.shape[0]} steps: {verdict} (worst: "
                f"|predicted - estimated| = {excess[n, w, o]:.2f} x its {self.z:g}-sigma band, at {n + 1} lags, "
                f"weight '{self.weights[w]}', observable '{self.observables[o]}')")  # fmt: skip


def bootstrap_chapman_kolmogorov(
    estimator: KoopmanEstimator,
    features: TrajectoryFeatures,
    lag: int,
    steps: int = 4,
    samples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> ChapmanKolmogorovBands:
    """The Chapman-Kolmogorov test of the model at ``lag`` for the observables and start weights of
    ``features``: predicted E_w[(K^n h)(x_t)] against estimated E_w[h(x_{t + n lag})], n = 1..steps, over the
    same starts, each with bootstrap bands."""
    if not features.observable_names:
        raise ValueError("the Chapman-Kolmogorov test needs observables (e.g. state indicators) in the features")

    def test(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        model = fitted(estimator, features.moments(lag, counts), lag)
        a = model.truncated
        names = features.observable_names
        decoders = torch.cat([a.aligned_right @ model.moment(f"gh_11:{name}") for name in names], 1)
        predicted, estimated = [], []
        step = torch.eye(model.koopman_matrix.shape[0], dtype=torch.float64)
        for n in range(1, steps + 1):
            f_sum, h_sum, w_sum = features.start_sums(n * lag, counts)
            predicted.append(((f_sum @ a.aligned_left.T @ step @ decoders) / w_sum[:, None]).numpy())
            estimated.append((h_sum / w_sum[:, None]).numpy())
            step = step @ model.koopman_matrix
        return np.stack(predicted), np.stack(estimated)

    predicted, estimated = test(np.ones(features.count))
    drawn = [test(c) for c in features.resampled_counts(samples, seed)]
    return ChapmanKolmogorovBands(
        lag, features.weight_names, features.observable_names,
        Bands(predicted, np.stack([d[0] for d in drawn]), confidence),
        Bands(estimated, np.stack([d[1] for d in drawn]), confidence),
    )  # fmt: skip


def _frames(states) -> int:
    return int(states.shape[0]) if isinstance(states, torch.Tensor) else int(states.num_graphs)


def over_chunks(function, trajectory) -> list:
    """``function`` of each chunk of ``trajectory`` (a list of chunks, or one), in order."""
    return [function(chunk) for chunk in (trajectory if isinstance(trajectory, list) else [trajectory])]


def _columns(functions: dict | None, trajectory, index: int, frames: int) -> torch.Tensor:
    """(frames, len(functions)) float64: each function over the trajectory's chunks, or its given values."""
    if not functions:
        return torch.zeros(frames, 0, dtype=torch.float64)
    columns = []
    for h in functions.values():
        values = torch.cat(over_chunks(h, trajectory)) if callable(h) else torch.as_tensor(np.asarray(h[index]))
        columns.append(values.to("cpu", torch.float64).reshape(-1))
    if any(len(c) != frames for c in columns):
        raise ValueError(f"trajectory {index}: observables or weights do not have one value per frame ({frames})")
    return torch.stack(columns, 1)


def _slices(length: int, pieces: int) -> list[slice]:
    bounds = np.linspace(0, length, pieces + 1).round().astype(int)
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
