"""``SplitDataModule``: the dataloaders shared by the data modules whose items are dealt to splits."""

from __future__ import annotations

from collections.abc import Iterator

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

BOOTSTRAP_SEED_OFFSET = 7_919  # the resample's seed, apart from the epochs' permutation seeds


class EpochSeededSampler(Sampler[int]):
    """A random permutation per epoch drawn from ``seed + epoch`` (Lightning calls ``set_epoch``), so a run
    resumed from a checkpoint sees the same batches as one that was never interrupted.

    ``bootstrap``: instead of every item once, an epoch is a permutation of one bootstrap resample of the
    ``size`` items (``size`` draws with replacement, from ``seed`` and fixed for the whole training): about 63 %
    of the items, some of them more than once, as each member of a bagged committee sees its own."""

    def __init__(self, size: int, seed: int, bootstrap: bool = False) -> None:
        self.size, self.seed, self.epoch = size, seed, 0
        self.items = None
        if bootstrap:
            generator = torch.Generator().manual_seed(BOOTSTRAP_SEED_OFFSET + seed)
            self.items = torch.randint(size, (size,), generator=generator)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.size, generator=generator)
        return iter((order if self.items is None else self.items[order]).tolist())


class SplitDataModule(L.LightningDataModule):
    """Train / val / test dataloaders over ``dataset(name)``.

    Subclasses set ``batch_size``, ``eval_batch_size``, ``num_workers``, ``seed`` and ``lagtime`` (``None``
    for single frames) and implement :meth:`dataset`. Training batches are shuffled by an
    :class:`EpochSeededSampler` (permutation from ``seed + shuffle_offset + epoch``: resuming reproduces the
    batches; ``shuffle_offset`` gives models trained on one split batches in other orders;
    ``bootstrap_training`` trains on a bootstrap resample of the training split drawn from
    ``seed + shuffle_offset``, one per offset); batches
    of lagged pairs drop the incomplete last one (a few pairs give noisy moments). Evaluation batches keep
    the order. ``loader_class`` is PyG's loader for graphs.
    """

    loader_class: type[DataLoader] = DataLoader
    shuffle_offset: int = 0  # added to the seed of the training batches' order only (not to the split's)
    bootstrap_training: bool = False  # each epoch a permutation of one bootstrap resample of the training split
    batch_size: int
    eval_batch_size: int
    num_workers: int
    seed: int
    lagtime: int | None

    def dataset(self, name: str) -> Dataset:
        """The items of split ``name`` (``"train"``, ``"val"`` or ``"test"``)."""
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        dataset = self.dataset("train")
        return self.loader_class(
            dataset,
            batch_size=self.batch_size,
            sampler=EpochSeededSampler(len(dataset), self.seed + self.shuffle_offset, self.bootstrap_training),
            num_workers=self.num_workers,
            drop_last=self.lagtime is not None,
        )

    def split_dataloader(self, name: str) -> DataLoader:
        """Every item of split ``name`` (``"train"``, ``"val"`` or ``"test"``) in order, in evaluation batches."""
        return self.loader_class(self.dataset(name), batch_size=self.eval_batch_size, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self.split_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.split_dataloader("test")
