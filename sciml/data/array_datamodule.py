"""``ArrayDataModule``: lagged pairs of plain state trajectories (a simulated system, an ``.npz`` file or arrays)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sciml.data.datasets import ArrayPairs
from sciml.data.errors import DataError
from sciml.data.split_datamodule import SplitDataModule
from sciml.data.splits import check_lagtime, check_split_mode, pair_index, split_segments
from sciml.data.systems.base import StochasticSystem


class ArrayDataModule(SplitDataModule):
    """Pairs ``(x_t, x_{t+lagtime})`` from state trajectories, split without crossing trajectories.

    Give exactly one source: ``system`` (simulated here with ``n_steps``, ``n_trajectories``, ``seed``),
    ``path`` (an ``.npz`` with ``trajectories`` of shape (n_trajectories, T, d) or (T, d)) or ``states``
    (in memory: one (T, d) array or tensor, or a list of them, one per trajectory; not stored in hparams).

    Args:
        lagtime: lag in sampling steps.
        split: (train, val, test) fractions, dealt by ``split_mode`` (``"auto"``: whole trajectories when there
            are several, else contiguous blocks; ``"trajectory"``, ``"contiguous"``; see :mod:`sciml.data.splits`).
        batch_size: pairs per training batch (the last incomplete one is dropped); ``eval_batch_size``: per
            evaluation batch. num_workers: dataloader worker processes.
    """

    def __init__(
        self,
        system: StochasticSystem | None = None,
        path: str | None = None,
        n_steps: int = 10_000,
        n_trajectories: int = 1,
        lagtime: int = 1,
        split: tuple[float, float, float] = (0.8, 0.1, 0.1),
        seed: int = 0,
        batch_size: int = 256,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        split_mode: str = "auto",
        states: Any = None,
    ) -> None:
        super().__init__()
        if sum(source is not None for source in (system, path, states)) != 1:
            raise DataError("ArrayDataModule needs exactly one of `system`, `path` or `states`")
        self.save_hyperparameters(ignore=["system", "states"])
        self.system, self.path, self.n_steps, self.n_trajectories = system, path, n_steps, n_trajectories
        self.states = states
        self.lagtime, self.split, self.seed = lagtime, split, seed
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.num_workers = num_workers
        self.split_mode = check_split_mode(split_mode, lagtime)

    @cached_property
    def trajectories(self) -> list[torch.Tensor]:
        if self.system is not None:
            states = self.system.simulate(self.n_steps, seed=self.seed, n_trajectories=self.n_trajectories)
            source = type(self.system).__name__
        elif self.states is not None:
            states, source = _in_memory(self.states), "states"
        else:
            source = self.path
            states = _load_npz(Path(self.path))
        check_lagtime([s.shape[0] for s in states], self.lagtime, [source] * len(states))
        return [torch.as_tensor(s, dtype=torch.get_default_dtype()) for s in states]

    @cached_property
    def segments(self):
        return split_segments([t.shape[0] for t in self.trajectories], self.split, self.seed, self.split_mode)

    def dataset(self, name: str) -> ArrayPairs:
        """Lagged pairs of split ``name``."""
        index = pair_index(self.segments[name], self.lagtime)
        if index.shape[0] == 0:
            raise DataError(f"the '{name}' split has no lagged pairs (lagtime={self.lagtime})")
        return ArrayPairs(self.trajectories, index, self.lagtime)


def _in_memory(states) -> list[np.ndarray]:
    """One (T, d) array or a list of them -> a list of float arrays, each checked (finite, 2-D)."""
    arrays = [states] if getattr(states, "ndim", None) == 2 else list(states)
    arrays = [np.asarray(torch.as_tensor(a).detach().cpu(), dtype=float) for a in arrays]
    for index, array in enumerate(arrays):
        if array.ndim != 2 or not np.all(np.isfinite(array)):
            raise DataError(f"states[{index}] must be a finite (T, d) array, got shape {array.shape}")
    return arrays


def _load_npz(path: Path) -> np.ndarray:
    if not path.exists():
        raise DataError(f"data path '{path}' does not exist")
    try:
        with np.load(path) as archive:
            states = np.asarray(archive["trajectories"], dtype=float)
    except KeyError as error:
        raise DataError(f"file '{path}': field 'trajectories' is missing") from error
    except Exception as error:
        raise DataError(f"file '{path}' could not be read ({type(error).__name__}: {error})") from error
    states = states[None] if states.ndim == 2 else states
    if states.ndim != 3 or not np.all(np.isfinite(states)):
        raise DataError(f"file '{path}', field 'trajectories': need finite (n, T, d) or (T, d) values")
    return states
