"""``DegreeLayout``: which degrees a feature tensor stacks along its M axis, and where each one sits.

A feature tensor has shape (N, M, C): M stacks the 2l + 1 components of each degree l of ``degrees`` in
order (like the irreps of an e3nn ``Irreps`` with one multiplicity, channels kept apart in C). The
E2Former's node features use ``DegreeLayout.up_to(lmax)``: degree l occupies rows l^2 .. (l + 1)^2 - 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DegreeLayout:
    """Degrees (each >= 0, repeats allowed) stacked along M.

    Attributes (computed once, plain attributes: ``torch.compile`` reads them without a graph break):
    ``dim`` = sum of 2l + 1; ``offsets``: start of each degree's block along M; ``sizes``: 2l + 1 of each degree;
    ``slices``: ``x[:, slices[k]]`` is the (N, 2l + 1, C) block of the k-th degree.
    """

    degrees: tuple[int, ...]
    offsets: tuple[int, ...] = field(init=False, repr=False, compare=False)
    dim: int = field(init=False, repr=False, compare=False)
    sizes: tuple[int, ...] = field(init=False, repr=False, compare=False)
    slices: tuple[slice, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        degrees = tuple(int(l) for l in self.degrees)
        if any(l < 0 for l in degrees):
            raise ValueError(f"degrees must be >= 0, got {degrees}")
        sizes = [2 * l + 1 for l in degrees]
        offsets = tuple(sum(sizes[:k]) for k in range(len(sizes)))
        object.__setattr__(self, "degrees", degrees)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "dim", sum(sizes))
        object.__setattr__(self, "sizes", tuple(sizes))
        object.__setattr__(self, "slices", tuple(slice(s, s + n) for s, n in zip(offsets, sizes, strict=True)))

    @classmethod
    def up_to(cls, lmax: int) -> DegreeLayout:
        """Degrees 0, 1, ..., lmax: dim (lmax + 1)^2."""
        return cls(tuple(range(lmax + 1)))

    def blocks(self, x: torch.Tensor, dim: int = 1) -> tuple[torch.Tensor, ...]:
        """The blocks of every degree of ``x`` along ``dim``, as views: one ``torch.split``, whose gradient is
        one concatenation (slicing block by block costs a zero-filled full-size gradient per block)."""
        return x.split(self.sizes, dim=dim)

    def __len__(self) -> int:
        return len(self.degrees)

    def __iter__(self) -> Iterator[int]:
        return iter(self.degrees)
