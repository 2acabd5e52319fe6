"""``E2Former``: graph batch -> per-atom and total energy (eV). A plain ``nn.Module``: no Lightning, no ASE.

Forces and stress come from :class:`sciml.nn.forces.ForceStressOutput` around it.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from sciml.equivariant.graph import grown_capacity
from sciml.equivariant.operations import KernelModule
from sciml.models.e2former.attention import attention_orders
from sciml.models.e2former.blocks import TransformerBlock
from sciml.models.e2former.context import GraphContext
from sciml.models.e2former.edges import EDGE_NETWORKS, EdgeInputs, EdgeTrunk
from sciml.models.e2former.embedding import EdgeDegreeEmbedding
from sciml.models.e2former.settings import BlockSettings, EdgeSettings
from sciml.nn.checkpoint import check_identity_buffers, records_config
from sciml.nn.mlp import MLP
from sciml.nn.radial import RADIAL_BASES, polynomial_envelope
from sciml.nn.so3_layers import EquivariantRMSNorm

DEFAULT_AVG_NEIGHBOURS = 16.0  # avg_neighbours of a model built without data (never change: checkpoints rely on it)

#: The width, degree, depth and heads of each named size (``medium`` is the defaults; every other argument is
#: the default too). Accuracy and speed of each on aspirin
#: and on fcc Cu: ``scripts/bench_presets.py`` (writes ``benchmarks/results/presets.md``). ``configs/e2former/presets/``
#: holds the same for the CLI (``--model.init_args.model configs/e2former/presets/small.yaml``; a test keeps
#: them equal).
PRESETS: dict[str, dict] = {
    "small": {"channels": 32, "lmax": 2, "layers": 2, "heads": 4},
    "medium": {"channels": 64, "lmax": 2, "layers": 3, "heads": 4},  # the defaults
    "large": {"channels": 128, "lmax": 2, "layers": 4, "heads": 8},
}


class E2Former(nn.Module):
    """E(3)-equivariant transformer with Wigner-6j attention.

    Features of degree l have natural parity (e3nn irreps ``0e, 1o, 2e, ...``) and only parity-allowed
    paths exist (``parity=True``, the default), so energies are invariant under rotations, translations,
    inversion and reflections, and a molecule and its mirror image get the same energy. ``parity=False``
    keeps every SO(3) path (pseudo-tensor paths such as 1 ⊗ 1 -> 1 included): rotations only.

    The defaults are the model of the accuracy benchmark against MACE (``scripts/bench_accuracy.py``): C 64,
    lmax 2, 3 layers, 4 heads, order-1 attention, 8 Bessel functions, one shared edge trunk of width 32, the
    centred norm (``benchmarks/results/accuracy_ablation_8_epochs.md``).

    Args:
        species: atomic numbers the model knows (linked from ``data.species``).
        cutoff: neighbour radius in Å (linked from ``data.cutoff``).
        channels: C, the width of every feature degree.
        lmax: highest feature degree.
        layers: transformer blocks.
        heads: attention heads.
        order: attention order L (0, 1 or 2; default 1) or ``"all"`` (orders 0, 1, 2 at widths C, C/2, C/4,
            gated; see :class:`~sciml.models.e2former.attention.Wigner6jAttention`; it lost the ablation at
            equal epochs and costs more).
        radial_basis: size of the radial basis.
        radial: ``"bessel"`` (default: sin(k pi r / cutoff) / r, MACE's) or ``"gaussian"`` (Gaussians on fixed
            centres in [0, cutoff], the default of format version 1), see :mod:`sciml.nn.radial`.
        hidden: feed-forward width (default 2 C).
        edge_network: ``"shared"`` (default: one trunk per forward, a linear map per consumer) or
            ``"per_layer"`` (every radial filter and logit has its own MLP); see
            :mod:`sciml.models.e2former.edges`.
        edge_hidden: hidden width of the edge networks (default 32; ``None``: C).
        norm: which RMS divides the l > 0 features in every norm (see
            :class:`~sciml.nn.so3_layers.EquivariantRMSNorm`): ``"centred"`` (default) or ``"joint"``, exact at
            sites of high symmetry, or ``"separable"`` (EquiformerV2's), which turns rounding noise into forces
            there (perfect crystals: 0.04 eV/Å in float64, every digit of float32). Checkpoints of format
            version 1 that do not record ``norm`` are rebuilt with the separable one
            (:mod:`sciml.nn.checkpoint`).
        edge_degree_scaling: ``"balanced"`` (default: the edge-degree embedding's l > 0 sums divided by
            sqrt(avg_neighbours), the atom embedding initialised at std 0.5 / sqrt(avg_neighbours), so that
            every degree starts at one scale) or ``"mean"`` (every sum divided by avg_neighbours, unit atom
            embedding: before).
        parity: O(3) (default) or SO(3) equivariance, see above.
        avg_neighbours: mean neighbours per atom, the normaliser of the edge-degree embedding; ``sciml fit``
            links it from the training split (``data.avg_neighbours``) unless the config sets it. ``None``
            (a model built in Python without data): ``DEFAULT_AVG_NEIGHBOURS``.
        energy_reference: per-species energies in eV aligned with ``species`` (linked from the data).
        energy_scale: eV per unit of network output (linked from ``data.force_rms``).
        direct_force_head: also output ``direct_forces (N, 3)`` (eV/Å), an equivariant linear readout of the
            l = 1 features (fast, not conservative; off by default).

    Keyword Args:
        dense: compute every message with a per-edge tensor product (the ablation's baseline: same parameters
            and result, O(|E|) tensor products). Speed only.
        backend: kernel backend, ``"auto" | "reference" | "cpu" | "cuda"`` (same result). Speed only.
        frame_size: smallest edge (Å) of the spatial cells whose centres are the local origins of the
            factorised convolution (see :mod:`sciml.models.e2former.context`). It bounds the positions inside
            solid harmonics, so the float32 error stops growing with the box. Default 2 x cutoff (measured at
            4000 atoms: 1.01x the time and 1.03x the memory of one frame, error flat from 108 atoms on); a
            structure under 4 cutoffs across keeps one frame. ``inf``: one frame per structure. Changes
            rounding only, never the result.
        feed_forward: ``"gate"`` (default) or the paper's ``"s2"`` grid feed-forward (lost the ablation at
            equal epochs), see :class:`~sciml.models.e2former.blocks.TransformerBlock`.
        s2_resolution: grid resolution of the ``"s2"`` feed-forward.

    Named sizes: :meth:`E2Former.preset` (``small``, ``medium`` = the defaults, ``large``).

    Input: a graph batch with ``pos (N,3)``, ``numbers (N,)``, ``batch (N,)``, ``cell (B,3,3)``,
    ``edge_index (2,E)``, ``shifts (E,3)``. Output: ``{"energy": (B,), "energies": (N,), "features": (N,M,C)}``.
    """

    @records_config
    def __init__(
        self,
        species: list[int],
        cutoff: float = 5.0,
        channels: int = 64,
        lmax: int = 2,
        layers: int = 3,
        heads: int = 4,
        order: int | str = 1,
        radial_basis: int = 8,
        radial: str = "bessel",
        hidden: int | None = None,
        edge_network: str = "shared",
        edge_hidden: int | None = 32,
        norm: str = "centred",
        edge_degree_scaling: str = "balanced",
        parity: bool = True,
        avg_neighbours: float | None = None,
        energy_reference: list[float] | None = None,
        energy_scale: float = 1.0,
        direct_force_head: bool = False,
        *,
        dense: bool = False,
        backend: str = "auto",
        frame_size: float | None = None,
        feed_forward: str = "gate",
        s2_resolution: int = 18,
    ) -> None:
        super().__init__()
        if edge_network not in EDGE_NETWORKS:
            raise ValueError(f"edge_network must be one of {EDGE_NETWORKS}, got {edge_network!r}")
        self.species, self.cutoff, self.order, self.lmax = list(species), float(cutoff), order, lmax
        self.max_order = max(attention_orders(order))
        lookup = torch.full((119,), -1, dtype=torch.int64)
        lookup[torch.tensor(self.species)] = torch.arange(len(self.species))
        self.register_buffer("type_of_number", lookup, persistent=False)
        reference = torch.tensor(energy_reference if energy_reference is not None else [0.0] * len(self.species))
        if reference.shape != (len(self.species),):
            raise ValueError(
                f"energy_reference needs one value per species ({len(self.species)}), got {reference.shape}"
            )
        self.register_buffer("energy_reference", reference.to(torch.get_default_dtype()))
        self.energy_scale = float(energy_scale)
        # what the weights mean, in the state dict: a checkpoint for other elements or data is refused on load
        self.register_buffer("species_numbers", torch.tensor(self.species, dtype=torch.int64))
        self.register_buffer("cutoff_radius", torch.tensor(self.cutoff, dtype=torch.float64))
        self.register_buffer("energy_scale_value", torch.tensor(self.energy_scale, dtype=torch.float64))
        avg_neighbours = DEFAULT_AVG_NEIGHBOURS if avg_neighbours is None else float(avg_neighbours)
        if not avg_neighbours > 0:
            raise ValueError(f"avg_neighbours must be positive, got {avg_neighbours}")
        self.avg_neighbours = avg_neighbours
        self.frame_size = float(frame_size) if frame_size is not None else 2.0 * self.cutoff
        if radial not in RADIAL_BASES:
            raise ValueError(f"radial must be one of {sorted(RADIAL_BASES)}, got {radial!r}")
        self.radial_basis = RADIAL_BASES[radial](cutoff, radial_basis)
        self.receiver_embedding = nn.Embedding(len(self.species), radial_basis)
        self.sender_embedding = nn.Embedding(len(self.species), radial_basis)
        self.atom_embedding = nn.Embedding(len(self.species), channels)
        shared, edge_width = edge_network == "shared", edge_hidden or channels
        self.edge_trunk = EdgeTrunk(3 * radial_basis, edge_width) if shared else None
        # the consumers read the trunk's features, or the per-edge radial basis and type embeddings
        edges = EdgeSettings(edge_width if shared else 3 * radial_basis, edge_width, shared)
        self.edge_degree = EdgeDegreeEmbedding(lmax, channels, edges, avg_neighbours, edge_degree_scaling)
        if edge_degree_scaling == "balanced":  # the atom embedding at the scale of the edge-degree sums
            nn.init.normal_(self.atom_embedding.weight, std=0.5 / avg_neighbours**0.5)
        block = BlockSettings(lmax, channels, heads, order, edges, hidden, feed_forward, s2_resolution, norm,
                              dense=dense, backend=backend, parity=parity)  # fmt: skip
        self.blocks = nn.ModuleList(TransformerBlock(block) for _ in range(layers))
        self.final_norm = EquivariantRMSNorm(lmax, channels, kind=norm)
        self.energy_head = MLP((channels, channels, 1))
        nn.init.zeros_(self.energy_head[-1].weight)  # start at the fitted per-element reference energies
        nn.init.zeros_(self.energy_head[-1].bias)
        self.force_head = nn.Linear(channels, 1, bias=False) if direct_force_head else None
        self._compiled_layers, self._image_capacity, self._prepared_for = None, None, None  # see compile_layers()

    IDENTITY_BUFFERS = ("species_numbers", "cutoff_radius", "energy_scale_value")
    # init argument -> attribute of the data module that supplies it (``sciml fit`` links them)
    linked_from_data: ClassVar[dict[str, str]] = {
        "cutoff": "cutoff",
        "species": "species",
        "energy_reference": "energy_reference",
        "energy_scale": "force_rms",
        "avg_neighbours": "avg_neighbours",
    }
    # linked unless the config gives a value (``None`` means: take it from the data)
    linked_unless_set: ClassVar[tuple[str, ...]] = ("avg_neighbours",)

    @classmethod
    def preset(cls, name: str, species: list[int], **arguments) -> E2Former:
        """The model of size ``name`` (``"small"``, ``"medium"`` = the defaults, ``"large"``; see
        :data:`~sciml.models.e2former.model.PRESETS`) for ``species``; ``arguments`` (e.g. ``cutoff``,
        ``avg_neighbours``) override it."""
        if name not in PRESETS:
            raise ValueError(f"unknown E2Former preset {name!r}; the presets are {sorted(PRESETS)}")
        return cls(species, **{**PRESETS[name], **arguments})

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, *args) -> None:
        check_identity_buffers(self, state_dict, prefix, self.IDENTITY_BUFFERS)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args)
        for name in self.IDENTITY_BUFFERS:  # old checkpoints lack them: not missing
            if prefix + name in missing_keys and prefix + name not in state_dict:
                missing_keys.remove(prefix + name)

    def atom_types(self, numbers: torch.Tensor) -> torch.Tensor:
        """Atomic numbers (N,) -> atom types (N,): indices into ``species`` (which holds atomic numbers)."""
        indices = self.type_of_number[numbers]
        if torch.any(indices < 0):
            unknown = sorted(set(numbers[indices < 0].tolist()))
            raise ValueError(f"atomic numbers {unknown} are not among the model's species {self.species}")
        return indices

    def readout(self, features: torch.Tensor, atom_types: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features (N, (lmax + 1)^2, C) -> (the energy head's last-layer input (N, C), per-atom energies (N,)
        eV)."""
        hidden = self.energy_head.last_layer_input(features[:, 0])
        energies = self.energy_head[-1](hidden).squeeze(-1) * self.energy_scale + self.energy_reference[atom_types]
        return hidden, energies

    def embed(self, batch) -> torch.Tensor:
        """Per-atom equivariant features after the last block and norm: (N, (lmax + 1)^2, C); the l = 0
        slice ``[:, 0]`` is invariant under rotations, translations and permutations of equal atoms."""
        atom_types = self.atom_types(batch.numbers)
        context = self.graph_context(batch, atom_types)
        if self._compiled_layers is not None and not self.training:
            target = (context.positions.device, context.positions.dtype)
            if self._prepared_for != target:  # before tracing: kernels and tables are built outside the graph
                for module in self.modules():
                    if isinstance(module, KernelModule):
                        module.prepare(*target)
                self._prepared_for = target
            return self._compiled_layers(self, context, atom_types)
        return self.layers(context, atom_types)

    def graph_context(self, batch, atom_types: torch.Tensor) -> GraphContext:
        """The per-forward geometry: local frames, frame images, receiver-sorted edges (sorts and a unique:
        sizes that depend on the data, so this part is never compiled)."""
        return GraphContext.build(
            batch.pos,
            atom_types,
            batch.batch,
            batch.cell.shape[0],
            batch.edge_index,
            batch.shifts.to(batch.pos.dtype),
            self.max_order,
            self.frame_size,
            None if self._image_capacity is None else self._allocate_images,
        )

    def _allocate_images(self, count: int) -> int:
        self._image_capacity = grown_capacity(count, self._image_capacity)
        return self._image_capacity

    def layers(self, context: GraphContext, atom_types: torch.Tensor) -> torch.Tensor:
        """Every per-edge and per-atom layer, from the graph context and the atom types (N,) to the features
        (N, (lmax + 1)^2, C): the part :meth:`compile_layers` compiles."""
        envelope = polynomial_envelope(context.distances, self.cutoff)
        edges = EdgeInputs(
            self.radial_basis(context.distances),
            context.receiver_types * len(self.species) + context.sender_types,
            self.receiver_embedding.weight,
            self.sender_embedding.weight,
        )
        if self.edge_trunk is not None:
            edges = self.edge_trunk(edges)
        x = self.edge_degree(edges, envelope, context)
        x = torch.cat([x[:, :1] + self.atom_embedding(atom_types)[:, None], x[:, 1:]], dim=1)
        for block in self.blocks:
            x = block(x, edges, envelope, context)
        return self.final_norm(x)

    def compile_layers(self, static_shapes: bool = False, **options) -> None:
        """``torch.compile`` :meth:`layers` for inference (MD). The graph context stays eager (data-dependent
        sizes), and so does training mode: force training differentiates the forces, and compiled graphs have
        no double backward. ``options`` go to ``torch.compile``. The state dict does not change.

        ``static_shapes=False``: ``dynamic=True`` by default, so edge and image counts that change from step
        to step do not recompile. ``True`` (for CUDA graphs): ``dynamic=False`` by default, and the frame
        images are padded to a capacity that only grows (:func:`~sciml.equivariant.graph.grown_capacity`), so
        shapes stay fixed when the edges do (``SciMLCalculator(static_shapes=True)`` keeps them fixed between
        neighbour-list rebuilds and pads them the same way). Padding images change nothing."""
        self._image_capacity = 0 if static_shapes else None
        self._compiled_layers = torch.compile(E2Former.layers, **{"dynamic": not static_shapes, **options})

    @property
    def layers_compiled(self) -> bool:
        """Whether :meth:`compile_layers` has compiled the layers (used for inference only)."""
        return self._compiled_layers is not None

    def forward(self, batch) -> dict[str, torch.Tensor]:
        """``energy`` (B,) and per-atom ``energies`` (N,) in eV, the equivariant ``features`` (N, (lmax + 1)^2,
        C), ``last_layer_features`` (N, C): the input of the energy head's last, linear layer (per-atom energy
        = energy_scale * (w . h + b) + reference), and with a direct-force head ``direct_forces`` (N, 3)."""
        atom_types = self.atom_types(batch.numbers)
        x = self.embed(batch)
        hidden, energies = self.readout(x, atom_types)
        energy = energies.new_zeros(batch.cell.shape[0]).index_add(0, batch.batch, energies)
        outputs = {"energy": energy, "energies": energies, "features": x, "last_layer_features": hidden}
        if self.force_head is not None:  # l = 1 block is (x, y, z) in e3nn's real basis
            outputs["direct_forces"] = self.force_head(x[:, 1:4]).squeeze(-1) * self.energy_scale
        return outputs
