"""From molecular trajectories to a kinetics report: ``molecular_kinetics`` (what ``sciml kinetics`` runs).

Reads the trajectories (any ASE format, a folder of them, e.g. the replica driver's output), takes a trained
Koopman model (a ``KoopmanModule`` checkpoint) or trains one (:func:`~sciml.training.fit_koopman`, shared
encoders: equilibrium MD is reversible), and writes the report of :func:`~sciml.koopman.report.kinetics_report`
plus, per metastable state, its representative structures (``state_<j>.extxyz``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import ase.io
import numpy as np

from sciml.data.errors import DataError
from sciml.data.graph import trajectory_graphs
from sciml.data.readers import read_trajectories
from sciml.koopman import KoopmanEstimator
from sciml.koopman.report import kinetics_report
from sciml.training.koopman_fit import fit_koopman


def frame_interval_ps(trajectories) -> float:
    """The time between frames (ps) from the frames' ``time_fs`` info (the replica driver writes it)."""
    times = [frame.info.get("time_fs") for frame in trajectories[0].frames[:2]]
    if len(times) < 2 or None in times:
        raise DataError(f"'{trajectories[0].source}': its frames carry no time_fs; give the time between frames "
                        "(--time-step, ps)")  # fmt: skip
    return (float(times[1]) - float(times[0])) / 1000


def molecular_kinetics(
    paths: str | Path | Sequence[str | Path],
    out: str | Path = "kinetics",
    time_step: float | None = None,
    lag: int = 10,
    lags: Sequence[int] | None = None,
    n_states: int = 2,
    checkpoint: str | Path | None = None,
    encoder: str = "distances",
    k: int = 6,
    epochs: int = 20,
    batch_size: int = 256,
    cutoff: float = 5.0,
    samples: int = 200,
    microstates: int = 50,
    seed: int = 0,
    atoms: str | Sequence[int] = "heavy",
    compare: str | Path | Sequence[str | Path] | None = None,
    lag_choice: str = "plateau",
) -> dict:
    """The kinetics report of the trajectories under ``paths`` in ``out`` (module docstring).

    Args:
        time_step: ps between frames (default: from the frames' ``time_fs``).
        lag: the model's lag in frames; ``lags``: the lags of the timescale plot (default lag x 1/2, 1, 2, 4, 8,
            those up to a quarter of the shortest trajectory).
        lag_choice: ``"plateau"``: the report's lag is ``lag`` if the implied timescales have converged there,
            else the first larger lag of ``lags`` where they have; ``"given"``: ``lag``, with the verdict
            (:func:`~sciml.koopman.lag.choose_lag`).
        checkpoint: a trained ``KoopmanModule`` checkpoint; without one, ``encoder`` (``"distances"`` or
            ``"molecular"``) with ``k`` functions (the constant included) trains for ``epochs`` (``batch_size``
            pairs per batch).
        atoms: the distance encoder's atoms: ``"heavy"``, ``"heavy+polar-h"`` or indices
            (:func:`~sciml.koopman.distances.select_atoms`).
        compare: other trajectories (e.g. the molecule under another potential) whose populations and MFPTs
            in the states found on ``paths`` the report adds (``numbers["states"]["compared"]``).

    Trajectories that ran on posterior draws of the potential (their frames' ``posterior_sample``, as
    ``sciml pipeline --posterior-samples`` writes them) get intervals of sampling and of the potential's error,
    each part shown (:func:`~sciml.koopman.report.kinetics_report`'s ``groups``).
    """
    trajectories = read_trajectories(paths)
    time_step = time_step if time_step is not None else frame_interval_ps(trajectories)
    if lags is None:
        shortest = min(len(t.frames) for t in trajectories)
        lags = sorted({max(1, round(lag * f)) for f in (0.5, 1, 2, 4, 8) if f <= 1 or lag * f <= shortest / 4})
    if checkpoint is not None:
        chunks = [trajectory_graphs(t, cutoff) for t in trajectories]
        estimator = KoopmanEstimator.from_checkpoint(checkpoint, [pair for c in chunks for pair in _pairs(c, lag)])
    else:
        files = [t.source for t in trajectories]
        estimator = fit_koopman(files, lagtime=lag, k=k, encoder=encoder, epochs=epochs, batch_size=batch_size,
                                cutoff=cutoff, seed=seed, share_encoders=True,
                                encoder_options={"atoms": atoms} if encoder == "distances" else None)  # fmt: skip
        chunks = [trajectory_graphs(t, cutoff) for t in trajectories]
    others = read_trajectories(compare) if compare is not None else None
    numbers = kinetics_report(estimator, chunks, lags, time_step, n_states, out, "ps", samples=samples,
                              microstates=microstates, seed=seed, lag_choice=lag_choice,
                              compare=[trajectory_graphs(t, cutoff) for t in others] if others else None,
                              groups=posterior_groups(trajectories))  # fmt: skip
    for j, frames in enumerate(numbers["states"]["representatives"]):
        structures = [trajectories[r].frames[t] for r, t in frames]
        for structure, (r, t) in zip(structures, frames, strict=True):
            structure.info.update(source=trajectories[r].source, frame=t, state=j)
        ase.io.write(Path(out) / f"state_{j}.extxyz", structures, format="extxyz")
    numbers["sources"] = [t.source for t in trajectories]
    if others:
        numbers["states"]["compared"]["sources"] = [t.source for t in others]
    return numbers


def posterior_groups(trajectories: list) -> list[int] | None:
    """The ``posterior_sample`` each trajectory ran on (its frames' info, as the pipeline records it), or ``None``
    when no trajectory records one; trajectories that record it only in part are refused, naming one."""
    groups = [t.frames[0].info.get("posterior_sample") if t.frames else None for t in trajectories]
    if all(g is None for g in groups):
        return None
    missing = [t.source for t, g in zip(trajectories, groups, strict=True) if g is None]
    if missing:
        raise ValueError(f"'{missing[0]}' records no posterior_sample where other trajectories do: analyse "
                         "trajectories of one pipeline run together")  # fmt: skip
    return [int(g) for g in groups]


def _pairs(chunks: list, lag: int) -> list:
    """(x_t, x_{t + lag}) batches of one trajectory's graph chunks (for fitting a loaded estimator)."""
    from torch_geometric.data import Batch

    graphs = [graph for chunk in chunks for graph in chunk.to_data_list()]
    starts = np.arange(len(graphs) - lag)
    return [(Batch.from_data_list([graphs[t] for t in block]), Batch.from_data_list([graphs[t + lag] for t in block]))
            for block in np.array_split(starts, max(1, len(starts) // 256)) if len(block)]  # fmt: skip
