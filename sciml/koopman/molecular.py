"""``MolecularEncoder``: the E2Former backbone pooled to invariant per-structure features, for Koopman
models of molecular trajectories (same kernels as the potentials)."""

from __future__ import annotations

import inspect
from typing import ClassVar

import torch
from torch import nn

from sciml.models.e2former import E2Former
from sciml.nn.checkpoint import records_config
from sciml.nn.mlp import MLP

#: The backbone's settings where they differ from E2Former's own. A smaller, shallower model (32 channels, 2
#: layers, 16 Gaussians), per-layer edge networks of width C, the joint norm. With ``parity=False``
#: (rotation-invariant only) pseudo-scalars such as the handedness of a chiral centre are directly available.
BACKBONE_DEFAULTS = {"channels": 32, "layers": 2, "radial_basis": 16, "radial": "gaussian", "norm": "joint",
                     "edge_network": "per_layer", "edge_hidden": None}  # fmt: skip
#: E2Former arguments that are not the backbone's to set.
NOT_BACKBONE = {"species", "cutoff", "avg_neighbours", "energy_reference", "energy_scale", "direct_force_head"}


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
        backbone: init arguments of the :class:`~sciml.models.E2Former` backbone (any but ``species``,
            ``cutoff``, ``avg_neighbours`` and the energy readout's), over
            :data:`~sciml.koopman.molecular.BACKBONE_DEFAULTS`.
        avg_neighbours: the backbone's edge-degree normaliser (linked from the data by ``sciml fit``).
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
        backbone: dict | None = None,
        avg_neighbours: float | None = None,
        hidden: tuple[int, ...] = (64,),
        pooling: str = "mean",
        normalize: bool = True,
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "sum"):
            raise ValueError(f"pooling must be 'mean' or 'sum', got '{pooling}'")
        settings = {**BACKBONE_DEFAULTS, **(backbone or {})}
        allowed = set(inspect.signature(E2Former).parameters) - NOT_BACKBONE
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise ValueError(f"backbone: {unknown} are not E2Former settings a MolecularEncoder takes "
                             f"({sorted(allowed)})")  # fmt: skip
        self.pooling, self.output_dim = pooling, output_dim
        self.backbone = E2Former(species, cutoff, avg_neighbours=avg_neighbours, **settings)
        self.backbone.energy_head.requires_grad_(False)  # the energy readout is not used here
        channels = self.backbone.atom_embedding.embedding_dim
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
