"""``DistanceEncoder``: an MLP on standardised inverse interatomic distances of one molecule, the cheap
invariant reference for Koopman models of a molecular trajectory (no hand-picked dihedrals)."""

from __future__ import annotations

import torch
from torch import nn

from sciml.koopman.encoders import MLPEncoder
from sciml.nn.checkpoint import records_config


class DistanceEncoder(nn.Module):
    """Graph batch of B frames of one molecule -> (B, output_dim) functions of the inverse distances
    1 / |r_i - r_j| (Å^-1) between the chosen ``atoms`` (indices into each frame, all pairs i < j).

    Invariant under rotations, translations and reflections; not under permutations (the atoms are
    indexed), which is what a trajectory of one molecule needs. The distances are standardised by a
    ``BatchNorm1d`` without affine parameters (running statistics in evaluation), then mapped by an MLP.

    Args:
        atoms: indices of the atoms to use, e.g. the heavy atoms (``heavy_atoms(numbers)``).
        output_dim: learned functions (k - 1). hidden, activation: of the MLP (see ``MLPEncoder``).
    """

    @records_config
    def __init__(
        self, atoms: list[int], output_dim: int, hidden: tuple[int, ...] = (64, 64), activation: str = "silu"
    ) -> None:
        super().__init__()
        if len(atoms) < 2 or len(set(atoms)) != len(atoms):
            raise ValueError(f"DistanceEncoder needs at least two distinct atom indices, got {list(atoms)}")
        first, second = torch.triu_indices(len(atoms), len(atoms), offset=1)
        index = torch.as_tensor(list(atoms), dtype=torch.int64)
        self.register_buffer("first", index[first], persistent=False)
        self.register_buffer("second", index[second], persistent=False)
        self.normalise = nn.BatchNorm1d(len(first), affine=False)
        self.mlp = MLPEncoder(len(first), output_dim, hidden, activation)
        self.output_dim = output_dim

    def inverse_distances(self, batch) -> torch.Tensor:
        """(B, P) inverse distances in Å^-1 of the P atom pairs, frames of equal size required."""
        sizes = torch.bincount(batch.batch, minlength=batch.cell.shape[0])
        n_atoms = int(sizes[0])
        if bool((sizes != n_atoms).any()) or n_atoms <= int(self.second.max()):
            raise ValueError(
                f"DistanceEncoder needs frames of one molecule with more than {int(self.second.max())} atoms; "
                f"this batch has frames of {sorted(set(sizes.tolist()))} atoms"
            )
        positions = batch.pos.reshape(len(sizes), n_atoms, 3)
        return 1.0 / (positions[:, self.first] - positions[:, self.second]).norm(dim=-1)

    def forward(self, batch) -> torch.Tensor:
        return self.mlp(self.normalise(self.inverse_distances(batch)))


def heavy_atoms(numbers) -> list[int]:
    """Indices of the atoms that are not hydrogen, in order (``numbers``: atomic numbers of one frame)."""
    return [i for i, z in enumerate(torch.as_tensor(numbers).tolist()) if z > 1]


#: Elements whose bonded hydrogens :func:`polar_hydrogens` counts: N, O, S.
POLAR_ELEMENTS = (7, 8, 16)
#: The atom selections :func:`select_atoms` knows.
ATOM_SELECTIONS = ("heavy", "heavy+polar-h")


def polar_hydrogens(numbers, positions, bond: float = 1.3) -> list[int]:
    """Indices of the hydrogens within ``bond`` Å of an N, O or S atom in one frame (``positions`` (N, 3) Å):
    the hydrogens of OH, NH and SH rotors, whose turns are conformational changes (a methyl group's are not)."""
    numbers, positions = torch.as_tensor(numbers), torch.as_tensor(positions, dtype=torch.float64)
    polar = torch.isin(numbers, torch.tensor(POLAR_ELEMENTS))
    hydrogens = (numbers == 1).nonzero().flatten()
    if not bool(polar.any()) or not len(hydrogens):
        return []
    distances = torch.cdist(positions[hydrogens], positions[polar])
    return hydrogens[(distances < bond).any(dim=1)].tolist()


def select_atoms(numbers, positions, selection: str | list[int]) -> list[int]:
    """The atoms of a ``DistanceEncoder`` in one frame: ``"heavy"`` (every atom but hydrogen), ``"heavy+polar-h"``
    (those and the hydrogens bonded to N, O or S: a hydroxyl rotor's turn is then visible) or a list of indices."""
    if not isinstance(selection, str):
        return [int(i) for i in selection]
    if selection not in ATOM_SELECTIONS:
        raise ValueError(f"unknown atom selection '{selection}'; choose one of {ATOM_SELECTIONS} or give indices")
    chosen = heavy_atoms(numbers)
    if selection == "heavy+polar-h":
        chosen = sorted(chosen + polar_hydrogens(numbers, positions))
    return chosen
