"""Radius-graph neighbour lists with full periodic images.

Edge convention (the one place it is defined): ``edge_index[0]`` is the **receiver** i, ``edge_index[1]``
the **sender** j, and ``shifts`` (E, 3) in Å is the lattice translation of the sender's image, so that

    r_ij = positions[j] + shifts - positions[i],    |r_ij| < cutoff.

Every pair appears in both directions. A periodic atom sees its own images when the cell is smaller
than the cutoff; an atom never sees itself at zero shift. Molecules (no pbc) take the same path.

Backends: ``"vesin"`` (default, vesin-torch), ``"torch"`` (brute force over images, the reference),
``"torch_cluster"`` (torch-cluster's ``radius`` over the same images; optional extra ``cluster``).
"""

from __future__ import annotations

import math

import torch

BACKENDS = ("vesin", "torch", "torch_cluster")


def radius_graph(
    positions: torch.Tensor,
    cell: torch.Tensor,
    pbc: torch.Tensor,
    cutoff: float,
    backend: str = "vesin",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Neighbour list of one structure.

    Args:
        positions: (N, 3) Å.
        cell: (3, 3) Å, rows are lattice vectors (ignored along non-periodic directions).
        pbc: (3,) bool.
        cutoff: Å.
        backend: one of ``BACKENDS``.

    Returns:
        ``edge_index (2, E)`` int64 as (receiver, sender) and ``shifts (E, 3)`` in Å, same dtype as positions.
    """
    if backend == "vesin":
        return _vesin(positions, cell, pbc, cutoff)
    if backend in ("torch", "torch_cluster"):
        return _images(positions, cell, pbc, cutoff, use_cluster=backend == "torch_cluster")
    raise ValueError(f"unknown neighbour-list backend '{backend}'; choose one of {BACKENDS}")


def _vesin(positions, cell, pbc, cutoff):
    from vesin_torch import NeighborList

    box = torch.where(pbc[:, None], cell, torch.zeros_like(cell)) if pbc.any() else torch.zeros_like(cell)
    i, j, s = NeighborList(cutoff=cutoff, full_list=True).compute(
        points=positions.detach(), box=box.detach(), periodic=pbc.to(torch.bool), quantities="ijS"
    )
    shifts = s.to(positions.dtype) @ cell.to(positions.dtype)
    return torch.stack([i, j]).to(torch.int64), shifts


def _images(positions, cell, pbc, cutoff, use_cluster: bool):
    dtype = positions.dtype
    n = positions.shape[0]
    cell = cell.to(dtype)
    if pbc.any():
        eye = torch.eye(3, dtype=dtype)
        basis = torch.where(pbc[:, None], cell, eye)  # invertible; non-periodic rows are placeholders
        offsets = torch.floor(positions @ torch.linalg.inv(basis)) * pbc.to(dtype)
        wrapped = positions - offsets @ basis
        heights = 1.0 / torch.linalg.norm(torch.linalg.inv(basis), dim=0)
        reps = [math.ceil(cutoff / h) if p else 0 for h, p in zip(heights.tolist(), pbc.tolist(), strict=True)]
    else:
        offsets, wrapped, reps = torch.zeros_like(positions), positions, [0, 0, 0]
    ranges = [torch.arange(-r, r + 1, dtype=dtype) for r in reps]
    lattice = torch.cartesian_prod(*ranges).reshape(-1, 3)  # (S, 3) integer translations
    image_pos = (wrapped[None, :, :] + (lattice @ cell)[:, None, :]).reshape(-1, 3)  # (S*N, 3)
    if use_cluster:
        from torch_cluster import radius

        i, flat = radius(image_pos, wrapped, cutoff, max_num_neighbors=image_pos.shape[0])  # (y, x) indices
        image, j = torch.div(flat, n, rounding_mode="floor"), flat % n
    else:
        distances = torch.cdist(wrapped, image_pos)  # (N, S*N)
        i, flat = torch.nonzero(distances < cutoff, as_tuple=True)
        image, j = torch.div(flat, n, rounding_mode="floor"), flat % n
    zero = torch.all(lattice[image] == 0, dim=1)
    keep = ~(zero & (i == j))
    i, j, image = i[keep], j[keep], image[keep]
    integer_shift = lattice[image] - offsets[j] + offsets[i]
    order = torch.argsort(i * n + j, stable=True)
    return torch.stack([i[order], j[order]]), (integer_shift[order] @ cell)
