"""``SplitDataModule``: the dataloaders shared by the data modules whose items are dealt to splits."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset


class SplitDataModule(L.LightningDataModule):
    """Train / val / test dataloaders over ``dataset(name)``.

    Subclasses set ``batch_size``, ``eval_batch_size``, ``num_workers``, ``seed`` and ``lagtime`` (``None``
    for single frames) and implement :meth:`dataset`. Training batches are shuffled with a generator
    seeded by ``seed``; batches of lagged pairs drop the incomplete last one (a few pairs give noisy
    moments). Evaluation batches keep the order. ``loader_class`` is PyG's loader for graphs.
    """

    loader_class: type[DataLoader] = DataLoader
    batch_size: int
    eval_batch_size: int
    num_workers: int
    seed: int
    lagtime: int | None

    def dataset(self, name: str) -> Dataset:
        """The items of split ``name`` (``"train"``, ``"val"`` or ``"test"``)."""
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        return self.loader_class(
            self.dataset("train"),
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.num_workers,
            drop_last=self.lagtime is not None,
            generator=torch.Generator().manual_seed(self.seed),
        )

    def split_dataloader(self, name: str) -> DataLoader:
        """Every item of split ``name`` (``"train"``, ``"val"`` or ``"test"``) in order, in evaluation batches."""
        return self.loader_class(self.dataset(name), batch_size=self.eval_batch_size, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self.split_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.split_dataloader("test")
