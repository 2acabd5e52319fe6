"""``DegreeLayout``: which degrees a feature tensor stacks along its M axis, and where each one sits.

A feature tensor has shape (N, M, C): M stacks the 2l + 1 components of each degree l of ``degrees`` in
order (like the irreps of an e3nn ``Irreps`` with one multiplicity, channels kept apart in C). The
E2Former's node features use ``DegreeLayout.up_to(lmax)``: degree l occupies rows l^2 .. (l + 1)^2 - 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class DegreeLayout:
    """Degrees (each >= 0, repeats allowed) stacked along M; ``dim`` = sum of 2l + 1."""

    degrees: tuple[int, ...]

    def __post_init__(self) -> None:
        degrees = tuple(int(l) for l in self.degrees)
        if any(l < 0 for l in degrees):
            raise ValueError(f"degrees must be >= 0, got {degrees}")
        object.__setattr__(self, "degrees", degrees)

    @classmethod
    def up_to(cls, lmax: int) -> DegreeLayout:
        """Degrees 0, 1, ..., lmax: dim (lmax + 1)^2."""
        return cls(tuple(range(lmax + 1)))

    def __len__(self) -> int:
        return len(self.degrees)

    def __iter__(self) -> Iterator[int]:
        return iter(self.degrees)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Start of each degree's block along M."""
        starts, total = [], 0
        for l in self.degrees:
            starts.append(total)
            total += 2 * l + 1
        return tuple(starts)

    @cached_property
    def dim(self) -> int:
        return sum(2 * l + 1 for l in self.degrees)

    @cached_property
    def slices(self) -> tuple[slice, ...]:
        """``x[:, slices[k]]`` is the (N, 2l + 1, C) block of the k-th degree."""
        return tuple(slice(s, s + 2 * l + 1) for l, s in zip(self.degrees, self.offsets, strict=True))
