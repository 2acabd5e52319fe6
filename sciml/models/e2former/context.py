"""Per-forward geometry shared by every layer: centred positions, sender images, edge vectors.

Edges follow the data layer's convention (``sciml.data.neighbors``): receiver i, sender j,
r_ij = pos[j] + shift - pos[i]. Positions are centred per structure (exact by translation invariance;
it keeps the node solid harmonics of the factorised convolution small in float32). Under periodic
boundary conditions the senders are the distinct images (j, shift) that occur in edges, so node-level
tensor products stay exact: image s has position pos[j] + shift and the features of atom j.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.so3 import solid_harmonics


@dataclass
class GraphContext:
    """Attributes (N atoms, S sender images, E edges in receiver order):
    positions (N, 3) centred; image_positions (S, 3); image_atom (S,); graph (EdgeGraph over receivers x images);
    vectors (E, 3) = r_ij; distances (E,); receiver_numbers, sender_numbers (E,) species indices;
    receiver_powers[k] = P^k(r_i) (N, 2k + 1); image_powers[k] = P^k(r_s) (S, 2k + 1), k = 0..max_order.
    """

    positions: torch.Tensor
    image_positions: torch.Tensor
    image_atom: torch.Tensor
    graph: EdgeGraph
    vectors: torch.Tensor
    distances: torch.Tensor
    receiver_species: torch.Tensor
    sender_species: torch.Tensor
    receiver_powers: list[torch.Tensor]
    image_powers: list[torch.Tensor]

    @classmethod
    def build(
        cls,
        positions: torch.Tensor,
        species: torch.Tensor,
        structure: torch.Tensor,
        n_structures: int,
        edge_index: torch.Tensor,
        shifts: torch.Tensor,
        max_order: int,
    ) -> GraphContext:
        """Args: positions (N, 3) Å; species (N,) indices into the model's species; structure (N,);
        edge_index (2, E) (receiver, sender); shifts (E, 3) Å; max_order: highest attention order L."""
        counts = torch.zeros(n_structures, dtype=positions.dtype, device=positions.device).index_add(
            0, structure, torch.ones_like(positions[:, 0])
        )
        centres = (
            torch.zeros(n_structures, 3, dtype=positions.dtype, device=positions.device).index_add(
                0, structure, positions
            )
            / counts.clamp(min=1)[:, None]
        )
        centred = positions - centres[structure]
        receivers, senders = edge_index
        key = torch.cat([senders[:, None].to(shifts.dtype), shifts.detach()], dim=1)
        unique, image_of_edge = torch.unique(key, dim=0, return_inverse=True)
        representative = torch.zeros(unique.shape[0], dtype=torch.int64, device=positions.device)
        representative.scatter_(0, image_of_edge, torch.arange(image_of_edge.numel(), device=positions.device))
        image_atom = senders[representative]
        image_positions = centred[image_atom] + shifts[representative]
        graph, order = EdgeGraph.from_edges(receivers, image_of_edge, positions.shape[0], unique.shape[0])
        vectors = image_positions[graph.col] - centred[graph.row]
        return cls(
            positions=centred,
            image_positions=image_positions,
            image_atom=image_atom,
            graph=graph,
            vectors=vectors,
            distances=vectors.norm(dim=1),
            receiver_species=species[graph.row],
            sender_species=species[image_atom[graph.col]],
            receiver_powers=[solid_harmonics(k, centred) for k in range(max_order + 1)],
            image_powers=[solid_harmonics(k, image_positions) for k in range(max_order + 1)],
        )
