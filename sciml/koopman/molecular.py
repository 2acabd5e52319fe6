"""``MolecularEncoder``: the E2Former backbone pooled to invariant per-structure features, for Koopman
models of molecular trajectories (same kernels as the potentials)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from sciml.models.e2former import E2Former
from sciml.nn.checkpoint import records_config
from sciml.nn.mlp import MLP


class MolecularEncoder(nn.Module):
    """Graph batch (B structures) -> (B, output_dim) functions invariant under rotations, translations,
    permutations of equal atoms and (with ``parity``, the default) reflections.

    The l = 0 channels of E2Former's last-layer features (N, C) are mean- or sum-pooled per structure and
    mapped by an MLP. ``species``, ``cutoff`` (Å) and ``avg_neighbours`` are linked from the data module by
    ``sciml fit``.

    Args:
        species: atomic numbers.
        cutoff: neighbour radius in Å.
        output_dim: learned functions (k - 1).
        channels: E2Former backbone width; like ``lmax``, ``layers``, ``heads``, ``radial_basis``,
            ``avg_neighbours``, ``backend``, ``parity``, ``norm``, ``edge_degree_scaling``, ``edge_network``,
            ``edge_hidden`` and ``radial``, a backbone setting of :class:`~sciml.models.E2Former`
            (``parity=False``: rotation-invariant only, so pseudo-scalars such as the handedness of a chiral
            centre are directly available; per-layer edge networks of width C and Gaussians: the backbone's
            settings before the shared trunk and Bessel basis).
        hidden: widths of the MLP head.
        pooling: ``"mean"`` or ``"sum"`` over the atoms of a structure.
        normalize: standardise the pooled features over the frames (``BatchNorm1d`` without affine
            parameters; running statistics in evaluation) before the head. Pooled features of one molecule
            vary by ~2 % of their mean across its frames (alanine dipeptide, untrained backbone), so without
            it the head sees nearly constant inputs and learns slowly.
    """

    linked_from_data: ClassVar[dict[str, str]] = {  # by ``sciml fit``
        "species": "species",
        "cutoff": "cutoff",
        "avg_neighbours": "avg_neighbours",
    }
    linked_unless_set: ClassVar[tuple[str, ...]] = E2Former.linked_unless_set

    @records_config
    def __init__(
        self,
        species: list[int],
        cutoff: float,
        output_dim: int,
        channels: int = 32,
        lmax: int = 2,
        layers: int = 2,
        heads: int = 4,
        radial_basis: int = 16,
        avg_neighbours: float | None = None,
        hidden: tuple[int, ...] = (64,),
        pooling: str = "mean",
        backend: str = "auto",
        parity: bool = True,
        normalize: bool = True,
        norm: str = "joint",
        edge_degree_scaling: str = "balanced",
        edge_network: str = "per_layer",
        edge_hidden: int | None = None,
        radial: str = "gaussian",
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "sum"):
            raise ValueError(f"pooling must be 'mean' or 'sum', got '{pooling}'")
        self.pooling, self.output_dim = pooling, output_dim
        self.backbone = E2Former(
            species,
            cutoff,
            channels,
            lmax,
            layers,
            heads,
            radial_basis=radial_basis,
            avg_neighbours=avg_neighbours,
            backend=backend,
            parity=parity,
            norm=norm,
            edge_degree_scaling=edge_degree_scaling,
            edge_network=edge_network,
            edge_hidden=edge_hidden,
            radial=radial,
        )
        self.backbone.energy_head.requires_grad_(False)  # the energy readout is not used here
        self.normalise = nn.BatchNorm1d(channels, affine=False) if normalize else nn.Identity()
        self.head = MLP((channels, *hidden, output_dim))

    def forward(self, batch) -> torch.Tensor:
        invariants = self.backbone.embed(batch)[:, 0]  # (N, C): the l = 0 channels
        n_structures = batch.cell.shape[0]
        pooled = invariants.new_zeros(n_structures, invariants.shape[1]).index_add(0, batch.batch, invariants)
        if self.pooling == "mean":
            counts = torch.bincount(batch.batch, minlength=n_structures).clamp_min(1)
            pooled = pooled / counts[:, None].to(pooled.dtype)
        return self.head(self.normalise(pooled))
