"""Metastable states from a learned Koopman basis, their populations and the mean first-passage times
between them, with Bayesian error bars: the route a PyEMMA or deeptime user takes, on learned coordinates.

1. Coordinates: the leading non-trivial eigenfunctions of the estimator at every frame (real parts; the slow
   coordinates, as TICA's would be).
2. Microstates: k-means on those coordinates (deeptime's ``KMeans``, k-means++ seeded).
3. A reversible maximum-likelihood Markov state model at the estimator's lag (deeptime) on the microstate
   trajectories, and PCCA+ (Roeblitz and Weber, Adv. Data Anal. Classif. 7, 147 (2013); deeptime's ``pcca``)
   into ``n_states`` metastable sets: fuzzy memberships chi (microstates x states) and hard sets (argmax).
4. Populations p_j = sum_i pi_i chi_ij, and MFPTs between the hard sets; their uncertainty from a bootstrap
   over trajectories (:mod:`sciml.koopman.bootstrap`: blocks when there are few), the microstates and sets
   held fixed and the MSM re-estimated on each resample. (deeptime's ``BayesianMSM`` counts with a sliding
   window and so treats correlated transitions as independent: its intervals came out several times too
   narrow here.) With trajectories in groups (replicas on posterior draws of the potential), the bands resample
   the groups (sampling and the potential's error) and ``sampling_only`` resamples within them.
5. Representative frames of each state: frames of its microstates of the highest membership.
6. Other trajectories in the same states (:meth:`MetastableStates.statistics_of`): to compare two potentials'
   kinetics, the states are defined once (on the reference's data) and the other data's frames are assigned
   to the same microstates; an MSM is estimated on them and gives their populations and MFPTs between the
   same sets. Two separate PCCA+ splits need not be the same sets of structures.

deeptime is the ``kinetics`` extra's (also in ``dev``); without it the error names the extra.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sciml.koopman.bootstrap import Bands, over_chunks, resampled_counts
from sciml.koopman.estimator import KoopmanEstimator


def _deeptime():
    try:
        return importlib.import_module("deeptime")
    except ImportError as error:
        raise ImportError("metastable states need deeptime: pip install 'sciml[kinetics]'") from error


@dataclass
class MetastableStates:
    """The states of :func:`metastable_states`. Times are in units of ``time_step`` (e.g. ps)."""

    n_states: int
    lag: int
    time_step: float
    coordinates: list[np.ndarray]  # per trajectory (n_r, c): the eigenfunctions clustered
    microstates: list[np.ndarray]  # per trajectory (n_r,): k-means labels, -1 outside the MSM's connected set
    memberships: np.ndarray  # (microstates, n_states): PCCA+ chi
    stationary: np.ndarray  # (microstates,)
    populations: Bands  # (n_states,)
    mfpt: Bands  # (n_states, n_states), time units; the diagonal is 0
    representatives: list[list[tuple[int, int]]]  # per state: (trajectory, frame)
    centres: np.ndarray  # (k-means centres, c): the microstates in the coordinates
    active: np.ndarray  # (microstates,): k-means labels of the MSM's connected set, in the order of memberships
    samples: int = 100
    blocks: int = 20
    seed: int = 0
    groups: list[int] | None = None  # per trajectory (module docstring)
    sampling_only: StateStatistics | None = None  # with groups: the bands of sampling alone

    def assignments(self) -> list[np.ndarray]:
        """Per trajectory (n_r,): each frame's state (argmax membership of its microstate; -1 outside the set)."""
        hard = self.memberships.argmax(1)
        return [np.where(labels >= 0, hard[np.maximum(labels, 0)], -1) for labels in self.microstates]

    def statistics_of(self, estimator: KoopmanEstimator, trajectories: Sequence) -> StateStatistics:
        """Populations and MFPTs of other ``trajectories`` (e.g. the same molecule under another potential) in
        these states: their frames get the microstate of the nearest k-means centre in ``estimator``'s
        eigenfunctions (the estimator these states came from), a new MSM at the same lag is estimated on
        them, and the states' memberships and sets are kept; bootstrap intervals as for these states'."""
        coordinates = eigenfunction_coordinates(estimator, trajectories, self.centres.shape[1])
        labels = [_nearest(self.centres, c) for c in coordinates]
        figures = functools.partial(_figures, memberships=self.memberships, active=self.active,
                                    rows=_rows(self.active, len(self.centres)), time_step=self.time_step)  # fmt: skip
        msm = _msm(labels, self.lag)
        populations, mfpt = figures(msm, msm.count_model.state_symbols)
        drawn = _bootstrap(labels, self.lag, figures, self.n_states, self.samples, self.blocks, self.seed, None)
        confidence = self.populations.confidence
        return StateStatistics(Bands(populations, drawn[0], confidence), Bands(mfpt, drawn[1], confidence))

    def summary(self) -> str:
        lines = [f"{self.n_states} metastable states (PCCA+ of a {len(self.stationary)}-microstate MSM at lag "
                 f"{self.lag}):"]  # fmt: skip
        for j in range(self.n_states):
            lines.append(f"  state {j}: population {self.populations.estimate[j]:.3f} "
                         f"[{self.populations.lower[j]:.3f}, {self.populations.upper[j]:.3f}]")  # fmt: skip
        for a in range(self.n_states):
            for b in range(self.n_states):
                if a != b:
                    lines.append(f"  MFPT {a} -> {b}: {self.mfpt.estimate[a, b]:.4g} "
                                 f"[{self.mfpt.lower[a, b]:.4g}, {self.mfpt.upper[a, b]:.4g}]")  # fmt: skip
        return "\n".join(lines)


def eigenfunction_coordinates(estimator: KoopmanEstimator, trajectories: Sequence, count: int) -> list[np.ndarray]:
    """Per trajectory (n_r, count): real parts of the eigenfunctions 2..count+1 (the constant skipped)."""
    with torch.no_grad():
        values = [torch.cat(over_chunks(estimator.eigenfunctions, x)) for x in trajectories]
    return [v[:, 1 : count + 1].real.numpy() for v in values]


def metastable_states(
    estimator: KoopmanEstimator,
    trajectories: Sequence,
    n_states: int = 2,
    time_step: float = 1.0,
    microstates: int = 50,
    samples: int = 100,
    confidence: float = 0.95,
    representatives: int = 5,
    blocks: int = 20,
    seed: int = 0,
    groups: Sequence[int] | None = None,
) -> MetastableStates:
    """The states of the module docstring for ``trajectories`` (what ``estimator.eigenfunctions`` takes, one
    entry per trajectory) at the estimator's lag; ``microstates`` k-means centres, ``samples`` bootstrap
    resamples (of trajectories, or of ``blocks`` pieces when there are fewer); ``groups``: per trajectory, its
    posterior draw (module docstring)."""
    deeptime = _deeptime()
    if n_states < 2:
        raise ValueError(f"n_states must be at least 2, got {n_states}")
    lag = estimator.lagtime or 1
    coordinates = eigenfunction_coordinates(estimator, trajectories, n_states - 1)
    clustering = deeptime.clustering.KMeans(microstates, fixed_seed=seed, n_jobs=1)
    clustering = clustering.fit(np.concatenate(coordinates)).fetch_model()
    labels = [clustering.transform(c).astype(np.int32) for c in coordinates]
    msm = _msm(labels, lag)
    active = msm.count_model.state_symbols  # microstates of the largest connected set, in MSM order
    if len(active) < n_states:
        raise ValueError(f"the trajectories connect only {len(active)} of the {microstates} microstates at lag "
                         f"{lag} (each visited once, or never returned to): too few to split into {n_states} "
                         "states; the trajectories may not sample one stable molecule (longer runs, a shorter "
                         "lag, or fewer states)")  # fmt: skip
    pcca = msm.pcca(n_states)
    rows = _rows(active, microstates)
    kept = [rows[labels_r] for labels_r in labels]
    if any(not np.any(pcca.memberships.argmax(1) == j) for j in range(n_states)):
        raise ValueError(f"PCCA+ left a state without microstates; try fewer states than {n_states}")
    figures = functools.partial(_figures, memberships=pcca.memberships, active=active, rows=rows,
                                time_step=time_step)  # fmt: skip
    populations, mfpt = figures(msm, active)
    groups = None if groups is None else [int(g) for g in groups]
    drawn = _bootstrap(labels, lag, figures, n_states, samples, blocks, seed, groups)
    sampling_only = None
    if groups is not None:
        within = _bootstrap(labels, lag, figures, n_states, samples, blocks, seed, groups, within_groups=True)
        sampling_only = StateStatistics(Bands(populations, within[0], confidence), Bands(mfpt, within[1], confidence))
    return MetastableStates(
        n_states, lag, time_step, coordinates, kept, pcca.memberships, msm.stationary_distribution,
        Bands(populations, drawn[0], confidence), Bands(mfpt, drawn[1], confidence),
        _representatives(kept, pcca.memberships, representatives, seed),
        np.asarray(clustering.cluster_centers), np.asarray(active), samples, blocks, seed, groups, sampling_only,
    )  # fmt: skip


@dataclass
class StateStatistics:
    """Populations (n_states,) and MFPTs (n_states, n_states; time units) of a set of trajectories in given
    states (:meth:`MetastableStates.statistics_of`), with bootstrap intervals."""

    populations: Bands
    mfpt: Bands


def _msm(labels: list[np.ndarray], lag: int):
    """deeptime's reversible maximum-likelihood MSM of microstate trajectories at ``lag``."""
    _deeptime()
    from deeptime.markov.msm import MaximumLikelihoodMSM

    return MaximumLikelihoodMSM(reversible=True, lagtime=lag).fit(labels).fetch_model()


def _rows(active: np.ndarray, microstates: int) -> np.ndarray:
    """(microstates,): for each k-means label, its row in the memberships (its place in ``active``), -1 if the
    label is outside the MSM's connected set."""
    rows = np.full(microstates, -1)
    rows[active] = np.arange(len(active))
    return rows


def _figures(model, symbols: np.ndarray, memberships: np.ndarray, active: np.ndarray, rows: np.ndarray,
             time_step: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Populations and MFPTs (time units) of ``model``, an MSM whose states are the k-means labels ``symbols``,
    in the metastable states given by PCCA+ ``memberships`` over the labels ``active`` (``rows``: their
    :func:`_rows`); labels outside ``active`` belong to no state."""
    n_states = memberships.shape[1]
    position = {int(symbol): k for k, symbol in enumerate(symbols)}
    chi = np.zeros((len(symbols), n_states))
    for symbol, k in position.items():
        if rows[symbol] >= 0:
            chi[k] = memberships[rows[symbol]]
    populations = model.stationary_distribution @ chi
    hard = memberships.argmax(1)
    members = [[position[int(active[i])] for i in np.flatnonzero(hard == j) if int(active[i]) in position]
               for j in range(n_states)]  # fmt: skip
    mfpt = np.zeros((n_states, n_states))
    for a in range(n_states):
        for b in range(n_states):
            if a != b:
                mfpt[a, b] = model.mfpt(members[a], members[b]) * time_step if members[a] and members[b] else np.nan
    return populations, mfpt


def _bootstrap(labels: list[np.ndarray], lag: int, figures, n_states: int, samples: int, blocks: int, seed: int,
               groups: list[int] | None, within_groups: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``figures`` (populations, MFPTs) of the MSM re-estimated on each bootstrap resample of the microstate
    trajectories (of their ``groups``, or within them: :func:`~sciml.koopman.bootstrap.resampled_counts`):
    (samples, n_states) and (samples, n_states, n_states), NaN for a resample that lost a state."""
    pieces, owners = resampling_units(labels, blocks)
    units = None if groups is None else np.asarray([groups[r] for r in owners])
    drawn = []
    for counts in resampled_counts(len(pieces), samples, seed, units, within_groups):
        chosen = [piece for piece, times in zip(pieces, counts, strict=True) for _ in range(times)]
        try:
            model = _msm(chosen, lag)
            drawn.append(figures(model, model.count_model.state_symbols))
        except (ValueError, RuntimeError):  # a resample that lost a state entirely: counted as missing
            drawn.append((np.full(n_states, np.nan), np.full((n_states, n_states), np.nan)))
    return np.stack([d[0] for d in drawn]), np.stack([d[1] for d in drawn])


def _nearest(centres: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(n,) int32: the index of the nearest of ``centres`` (m, c) for each of ``points`` (n, c)."""
    distances = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
    return distances.argmin(1).astype(np.int32)


def resampling_units(labels: list[np.ndarray], blocks: int) -> tuple[list[np.ndarray], list[int]]:
    """The microstate trajectories, or, when there are fewer than ``blocks``, that many contiguous pieces; and
    the trajectory of each."""
    if len(labels) >= blocks:
        return labels, list(range(len(labels)))
    per = int(np.ceil(blocks / len(labels)))
    cut = [(r, piece) for r, trajectory in enumerate(labels) for piece in np.array_split(trajectory, per)]
    kept = [(r, piece) for r, piece in cut if len(piece) > 1]
    return [piece for _, piece in kept], [r for r, _ in kept]


def _representatives(labels: list[np.ndarray], memberships: np.ndarray, count: int, seed: int) -> list:
    """Per state, ``count`` frames (trajectory, frame) drawn from its most typical microstates: those of the
    highest membership, taken in that order until they hold ``count`` frames."""
    rng = np.random.default_rng(seed)
    chosen = []
    for j in range(memberships.shape[1]):
        frames: list[tuple[int, int]] = []
        for micro in np.argsort(-memberships[:, j]):
            frames += [(r, int(t)) for r, trajectory in enumerate(labels) for t in np.flatnonzero(trajectory == micro)]
            if len(frames) >= count:
                break
        picks = rng.choice(len(frames), size=min(count, len(frames)), replace=False) if frames else []
        chosen.append([frames[int(k)] for k in sorted(picks)])
    return chosen
