"""Map-style datasets over validated frames or plain state arrays: single frames or lagged pairs.

Both index with the ``(trajectory, t)`` rows of :mod:`sciml.data.splits`; a pair item is
``(item at t, item at t + lagtime)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data

from sciml.data.graph import frame_to_graph


class FrameGraphs(Dataset):
    """Graphs of validated frame records, built on access (neighbour lists are cheap, memory stays small).

    Args:
        records: per trajectory, per frame: records from :func:`sciml.data.labels.read_frame`.
        index: (F, 2) ``(trajectory, t)`` rows.
        cutoff: Å.
        lagtime: ``None`` for single frames, else the lag time in frames (items are pairs).
        cache: a dict that keeps each graph once built, keyed by ``(trajectory, t)`` (shared between datasets of
            the same records, e.g. the splits of one data module); ``None`` builds every graph on access.
    """

    def __init__(
        self,
        records: Sequence[Sequence[dict[str, np.ndarray]]],
        index: torch.Tensor,
        cutoff: float,
        lagtime: int | None = None,
        neighbour_backend: str = "vesin",
        dtype: torch.dtype | None = None,
        cache: dict | None = None,
    ) -> None:
        self.records, self.index, self.cutoff, self.lagtime = records, index, cutoff, lagtime
        self.neighbour_backend, self.dtype, self.cache = neighbour_backend, dtype, cache

    def __len__(self) -> int:
        return self.index.shape[0]

    def _graph(self, trajectory: int, t: int) -> Data:
        if self.cache is not None and (trajectory, t) in self.cache:
            return self.cache[trajectory, t]
        graph = frame_to_graph(self.records[trajectory][t], self.cutoff, self.dtype, self.neighbour_backend)
        if self.cache is not None:
            self.cache[trajectory, t] = graph
        return graph

    def __getitem__(self, k: int) -> Data | tuple[Data, Data]:
        trajectory, t = self.index[k].tolist()
        if self.lagtime is None:
            return self._graph(trajectory, t)
        return self._graph(trajectory, t), self._graph(trajectory, t + self.lagtime)


class ArrayPairs(Dataset):
    """Lagged pairs ``(x_t, x_{t+lagtime})`` of plain state trajectories (SDEs, maps).

    Args:
        trajectories: list of (T_k, d) tensors.
        index: (P, 2) ``(trajectory, t)`` rows from :func:`sciml.data.splits.pair_index`.
        lagtime: steps between the two states.
    """

    def __init__(self, trajectories: Sequence[torch.Tensor], index: torch.Tensor, lagtime: int) -> None:
        self.trajectories, self.index, self.lagtime = trajectories, index, lagtime

    def __len__(self) -> int:
        return self.index.shape[0]

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        trajectory, t = self.index[k].tolist()
        states = self.trajectories[trajectory]
        return states[t], states[t + self.lagtime]
