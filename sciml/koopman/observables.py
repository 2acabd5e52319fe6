"""Observables of molecular frames for forecasts and Chapman-Kolmogorov tests: functions of a graph batch of
B frames of one molecule -> (B,) values (``KoopmanEstimator.fit(observables=...)``, ``chapman_kolmogorov``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def dihedral_angles(positions: torch.Tensor, atoms: Sequence[int]) -> torch.Tensor:
    """(B,) dihedral angles in radians, in (-pi, pi], of the four ``atoms`` (indices) in ``positions``
    (B, n_atoms, 3), Å; IUPAC sign convention (alanine dipeptide's phi is negative in the beta and
    alpha-R basins)."""
    if len(atoms) != 4:
        raise ValueError(f"a dihedral angle needs four atom indices, got {list(atoms)}")
    p0, p1, p2, p3 = (positions[:, i] for i in atoms)
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    b1 = b1 / b1.norm(dim=1, keepdim=True)
    v = b0 - (b0 * b1).sum(1, keepdim=True) * b1
    w = b2 - (b2 * b1).sum(1, keepdim=True) * b1
    return torch.atan2((torch.cross(b1, v, dim=1) * w).sum(1), (v * w).sum(1))


def dihedral(atoms: Sequence[int]) -> Callable:
    """Observable: graph batch of frames of one molecule -> (B,) float64 dihedral angle of ``atoms`` (rad)."""
    atoms = list(atoms)

    def angle(batch) -> torch.Tensor:
        n_frames = batch.cell.shape[0]
        return dihedral_angles(batch.pos.reshape(n_frames, -1, 3).double(), atoms)

    return angle


def indicator(observable: Callable, low: float = float("-inf"), high: float = float("inf")) -> Callable:
    """Observable: 1.0 where ``low < observable(batch) <= high``, else 0.0 (float64): a set, e.g. phi > 0."""

    def inside(batch) -> torch.Tensor:
        value = torch.as_tensor(observable(batch))
        return ((value > low) & (value <= high)).double()

    return inside
