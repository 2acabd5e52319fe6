"""Per-forward geometry shared by every layer: local frames, sender images, edge vectors.

Edges follow the data layer's convention (``sciml.data.neighbours``): receiver i, sender j,
r_ij = pos[j] + shift - pos[i]. Under periodic boundary conditions a sender is an image (j, shift), so
node-level tensor products stay exact: image s has position pos[j] + shift and the features of atom j.

Local frames (float32 on large boxes): the factorised convolution expands solid harmonics of positions
and lets them cancel back to P(r_j - r_i); the rounding error of that cancellation grows with |r|. So
every structure is cut into spatial cells of edge at least ``frame_size`` (one cell per axis for a
structure smaller than two cells: then the frame is simply the structure's bounding-box centre), and each
edge is expanded around the centre o of its *receiver's* cell: P(r_j - o) at the sender, P(r_i - o) at the
receiver. A sender image that reaches receivers in several cells appears once per cell (a "frame image"),
so no position entering a solid harmonic is farther than about half a cell diagonal plus the cutoff from
its origin, whatever the size of the box. The factorisation stays exact: it only needs r_j - r_i.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.so3 import solid_harmonics


def local_frames(positions: torch.Tensor, structure: torch.Tensor, n_structures: int, frame_size: float):
    """Spatial cells per structure and their centres.

    Args: positions (N, 3) Å; structure (N,) structure index of each atom; frame_size: smallest cell edge, Å.
    Returns: ``cell`` (N,) int64, a cell id unique over the batch; ``origin`` (N, 3) the centre of each atom's
    cell (no gradient: the frames are piecewise constant, and the result does not depend on them).
    """
    with torch.no_grad():
        index = structure[:, None].expand(-1, 3)
        low = positions.new_full((n_structures, 3), float("inf")).scatter_reduce(0, index, positions, "amin")
        high = positions.new_full((n_structures, 3), -float("inf")).scatter_reduce(0, index, positions, "amax")
        extent = (high - low).clamp(min=0.0)
        counts = torch.floor(extent / frame_size).clamp(min=1).to(torch.int64)  # cells per axis, edge >= size
        edge = (extent / counts).clamp(min=1e-6)
        cell3 = torch.floor((positions - low[structure]) / edge[structure]).to(torch.int64)
        cell3 = torch.minimum(cell3.clamp(min=0), counts[structure] - 1)
        origin = low[structure] + (cell3.to(positions.dtype) + 0.5) * edge[structure]
        strides = torch.stack([counts[:, 1] * counts[:, 2], counts[:, 2], torch.ones_like(counts[:, 0])], dim=1)
        first = torch.cumsum(counts.prod(dim=1), 0) - counts.prod(dim=1)  # first cell id of each structure
        cell = first[structure] + (cell3 * strides[structure]).sum(dim=1)
    return cell, origin.detach()  # detach as well: a trace (``sciml export``) does not record no_grad


def unique_rows(key: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Distinct rows of a (E, k) tensor by k stable sorts (``torch.unique(dim=0)`` compares rows one by one
    on the CPU: 1 s for 170 000 edges). Returns (count, inverse (E,) row -> distinct id, first (count,) one
    row of each distinct id). Ids follow the lexicographic order of the rows."""
    order = torch.arange(key.shape[0], device=key.device)
    for column in reversed(range(key.shape[1])):
        order = order[torch.argsort(key[order, column], stable=True)]
    ordered = key[order]
    starts = torch.ones(key.shape[0], dtype=torch.bool, device=key.device)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(dim=1)
    group = torch.cumsum(starts, 0) - 1
    inverse = torch.empty_like(group)
    inverse[order] = group
    first = order[starts]
    return first.shape[0], inverse, first  # a shape, not int(sum): a traced export keeps it dynamic


@dataclass
class GraphTopology:
    """The integer part of a :class:`GraphContext`, and the local origins: everything that does not depend on
    the positions differentiably (sorts, a unique, cell ids: sizes that depend on the data). An exported
    program (:mod:`sciml.models.e2former.inference`) takes these as inputs, so that it holds only fixed-rank
    gathers and arithmetic whose sizes are the inputs' own.

    Attributes (N atoms, S frame images, E edges): atom_types (N,); origin (N, 3) the centre of each atom's cell
    (no gradient); image_atom (S,) atom of each frame image; image_receiver (S,) a receiver it serves (whose
    cell's centre is its frame); image_edge (S,) an edge that reads it (whose shift it carries); graph
    (EdgeGraph over receivers x frame images); padding: images appended at the origin that no edge reads.
    """

    atom_types: torch.Tensor
    origin: torch.Tensor
    image_atom: torch.Tensor
    image_receiver: torch.Tensor
    image_edge: torch.Tensor
    graph: EdgeGraph
    padding: int = 0

    @classmethod
    def build(
        cls,
        positions: torch.Tensor,
        atom_types: torch.Tensor,
        structure: torch.Tensor,
        n_structures: int,
        edge_index: torch.Tensor,
        shifts: torch.Tensor,
        frame_size: float = float("inf"),
        image_capacity: Callable[[int], int] | None = None,
    ) -> GraphTopology:
        """Arguments as :meth:`GraphContext.build`."""
        cell, origin = local_frames(positions, structure, n_structures, frame_size)
        receivers, senders = edge_index
        # (sender, shift, receiver's cell) in float64: atom and cell ids stay exact up to 2^53
        key = torch.cat([senders[:, None].double(), shifts.detach().double(), cell[receivers, None].double()], 1)
        n_images, image_of_edge, representative = unique_rows(key)
        padding = image_capacity(n_images) - n_images if image_capacity is not None else 0
        graph, _ = EdgeGraph.from_edges(receivers, image_of_edge, positions.shape[0], n_images + max(padding, 0))
        return cls(atom_types, origin, senders[representative], receivers[representative], representative, graph,
                   max(padding, 0))  # fmt: skip

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The tensors an exported program takes (``padding`` must be 0): atom types, origin, the images'
        atom, receiver and edge, then :meth:`~sciml.equivariant.graph.EdgeGraph.tensors`."""
        if self.padding:
            raise ValueError("an exported program takes no padding images (image_capacity=None)")
        return (self.atom_types, self.origin, self.image_atom, self.image_receiver, self.image_edge,
                *self.graph.tensors())  # fmt: skip


@dataclass
class GraphContext:
    """Attributes (N atoms, S frame images, E edges in receiver order):
    positions (N, 3) in each atom's own frame (r_i - o_i); image_positions (S, 3) in the frame of the
    receivers they serve (r_j + shift - o); image_atom (S,) atom of each frame image; graph (EdgeGraph over
    receivers x frame images); vectors (E, 3) = r_ij; distances (E,); receiver_types, sender_types (E,) atom
    types (indices into the model's species); receiver_powers[k] = P^k(positions) (N, 2k + 1);
    image_powers[k] = P^k(image_positions) (S, 2k + 1), k = 0..max_order.
    """

    positions: torch.Tensor
    image_positions: torch.Tensor
    image_atom: torch.Tensor
    graph: EdgeGraph
    vectors: torch.Tensor
    distances: torch.Tensor
    receiver_types: torch.Tensor
    sender_types: torch.Tensor
    receiver_powers: list[torch.Tensor]
    image_powers: list[torch.Tensor]

    @classmethod
    def build(
        cls,
        positions: torch.Tensor,
        atom_types: torch.Tensor,
        structure: torch.Tensor,
        n_structures: int,
        edge_index: torch.Tensor,
        shifts: torch.Tensor,
        max_order: int,
        frame_size: float = float("inf"),
        image_capacity: Callable[[int], int] | None = None,
    ) -> GraphContext:
        """Args: positions (N, 3) Å; atom_types (N,) indices into the model's species; structure (N,);
        edge_index (2, E) (receiver, sender); shifts (E, 3) Å; max_order: highest attention order L;
        frame_size: smallest edge of the local-frame cells in Å (``inf``: one frame per structure);
        image_capacity: frame images S -> the number to allocate (>= S): the rest are padding images at the
        origin that no edge reads (for fixed shapes: compiled graphs, CUDA graphs). They change nothing."""
        topology = GraphTopology.build(positions, atom_types, structure, n_structures, edge_index, shifts, frame_size,
                                       image_capacity)  # fmt: skip
        return cls.from_topology(positions, shifts, topology, max_order)

    @classmethod
    def from_topology(
        cls, positions: torch.Tensor, shifts: torch.Tensor, topology: GraphTopology, max_order: int
    ) -> GraphContext:
        """The differentiable part: positions (N, 3) Å and shifts (E, 3) Å (in the edges' input order) through
        the ``topology`` of those edges."""
        local = positions - topology.origin
        image_positions = positions[topology.image_atom] - topology.origin[topology.image_receiver]
        image_positions = image_positions + shifts[topology.image_edge]
        image_atom = topology.image_atom
        if topology.padding:
            image_atom = torch.cat([image_atom, image_atom.new_zeros(topology.padding)])
            image_positions = torch.cat([image_positions, image_positions.new_zeros(topology.padding, 3)])
        graph, atom_types = topology.graph, topology.atom_types
        vectors = image_positions[graph.col] - local[graph.row]
        return cls(
            positions=local,
            image_positions=image_positions,
            image_atom=image_atom,
            graph=graph,
            vectors=vectors,
            distances=vectors.norm(dim=1),
            receiver_types=atom_types[graph.row],
            sender_types=atom_types[image_atom[graph.col]],
            receiver_powers=[solid_harmonics(k, local) for k in range(max_order + 1)],
            image_powers=[solid_harmonics(k, image_positions) for k in range(max_order + 1)],
        )
