"""Energy and forces of an E2Former ahead of time: one program per model, no Python per operator at run time.

The eager model runs hundreds of small operators per call, each through Python and the dispatcher; on a
molecule of 20 atoms that overhead, not arithmetic, is most of the call. Here the forward pass *and* the force
backward are traced once (``make_fx`` unfolds ``autograd.grad`` into the graph), exported with the atom, edge
and frame-image counts dynamic (``torch.export``), and compiled by AOTInductor into a shared library in a
``.pt2`` package. One package serves every step and every molecule size; the ``sciml::`` kernels are called
from it as custom operators (the library is loaded first).

What stays eager is :class:`~sciml.models.e2former.context.GraphTopology` (sorts and a unique: integer
tensors whose sizes depend on the data); the program takes them as inputs, with the positions (N, 3) Å and
the edge shifts (E, 3) Å, and returns the per-atom energies (N,) eV, the forces (N, 3) eV/Å (the derivative of
the total energy: structures of a batch do not interact, so each one's forces are its own) and the energy
head's last-layer input; the energies per structure are summed outside.

Packages are cached by what determines them (the weights, the architecture, the dtype, the kernels, torch and
the CPU), under ``$SCIML_INFERENCE_CACHE`` or ``~/.cache/sciml/inference``: the first start pays the compile
(about 100 s for the medium model on 2 cores), later ones load in well under a second.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import time
from pathlib import Path

import torch
from torch import nn

from sciml.equivariant.graph import EdgeGraph
from sciml.equivariant.operations import KernelModule
from sciml.models.e2former.context import GraphContext, GraphTopology
from sciml.models.e2former.model import E2Former

#: Each dynamic size must be at least this (PyTorch specialises sizes 0 and 1); smaller inputs run eager.
MIN_SIZE = 2


def cache_root() -> Path:
    return Path(os.environ.get("SCIML_INFERENCE_CACHE", Path.home() / ".cache" / "sciml" / "inference"))


class EnergyForces(nn.Module):
    """The traced function: ``forward(positions, shifts, *topology.tensors())`` -> (energies (N,), forces
    (N, 3), the energy head's last-layer input (N, C)) for a batch of structures (no stress: it runs eager)."""

    def __init__(self, model: E2Former) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        positions: torch.Tensor,
        shifts: torch.Tensor,
        atom_types: torch.Tensor,
        origin: torch.Tensor,
        image_atom: torch.Tensor,
        image_receiver: torch.Tensor,
        image_edge: torch.Tensor,
        *graph: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            positions = positions.detach().requires_grad_(True)
            edge_graph = EdgeGraph(*graph, positions.shape[0], image_atom.shape[0])
            topology = GraphTopology(atom_types, origin, image_atom, image_receiver, image_edge, edge_graph)
            context = GraphContext.from_topology(positions, shifts, topology, self.model.max_order)
            hidden, energies = self.model.readout(self.model.layers(context, atom_types), atom_types)
            total = energies.sum()  # not per structure: a scatter here trips Inductor's CPU code generation
            (gradient,) = torch.autograd.grad(total, [positions])
        return energies.detach(), -gradient, hidden.detach()


def package_key(model: E2Former, dtype: torch.dtype, device: torch.device) -> str:
    """What determines a package: the weights and buffers, the architecture, dtype, device, the kernels'
    backend, torch's version and the CPU."""
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    torch.save({name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}, buffer)
    digest.update(buffer.getvalue())
    backends = sorted({m.backend for m in model.modules() if isinstance(m, KernelModule)})
    context = {"model": repr(model), "dtype": str(dtype), "device": str(device), "backends": backends,
               "torch": torch.__version__, "cpu": platform.processor() or platform.machine(), "format": 1}  # fmt: skip
    digest.update(json.dumps(context, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def package_path(model: E2Former, dtype: torch.dtype, device: torch.device, cache: str | Path | None = None) -> Path:
    """Where ``model``'s package is (or will be) cached."""
    return Path(cache or cache_root()) / f"{package_key(model, dtype, device)}.pt2"


def topology_of(model: E2Former, batch) -> GraphTopology:
    """The eager part for ``batch`` (a PyG ``Data``: pos, numbers, batch, cell, edge_index, shifts)."""
    atom_types = model.atom_types(batch.numbers)
    shifts = batch.shifts.to(batch.pos.dtype)
    return GraphTopology.build(batch.pos, atom_types, batch.batch, batch.cell.shape[0], batch.edge_index, shifts,
                               model.frame_size)  # fmt: skip


def export_package(model: E2Former, batch, path: str | Path) -> Path:
    """Trace, export and compile ``model``'s energy and forces on the example ``batch`` (at least
    :data:`MIN_SIZE` atoms, edges and images) into the package ``path``."""
    from torch.fx.experimental.proxy_tensor import make_fx

    device, dtype = batch.pos.device, batch.pos.dtype
    for module in model.modules():  # kernels resolved and coefficient tables built outside the trace
        if isinstance(module, KernelModule):
            module.prepare(device, dtype)
    inputs = (batch.pos, batch.shifts.to(dtype), *topology_of(model, batch).tensors())
    function = EnergyForces(model).eval()
    traced = make_fx(function, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*inputs)
    atoms = torch.export.Dim("atoms", min=MIN_SIZE)
    edges = torch.export.Dim("edges", min=MIN_SIZE)
    images = torch.export.Dim("images", min=MIN_SIZE)
    per_input = (atoms, edges, atoms, atoms, images, images, images, edges, edges, atoms + 1, edges, edges,
                 images + 1)  # fmt: skip
    exported = torch.export.export(traced, inputs, dynamic_shapes=tuple({0: size} for size in per_input), strict=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial.pt2")  # two processes building at once do not collide
    torch._inductor.aoti_compile_and_package(exported, package_path=str(partial))
    partial.replace(path)  # atomic: a killed build leaves no package that looks finished
    return path


class CompiledEnergyForces:
    """``model``'s energy and forces through its ahead-of-time package (built on the first example, or loaded
    from the cache). ``__call__(batch)`` -> {"energy": (B,), "energies": (N,), "forces": (N, 3),
    "last_layer_features": (N, C)}, for a batch of at least :data:`MIN_SIZE` atoms, edges and images
    (:meth:`fits`).

    Attributes: ``compile_seconds``: the time the package took to build here (0.0 when it came from the cache);
    ``path``: the package; ``compilations``: packages built by this object (1 at most).
    """

    def __init__(self, model: E2Former, example, cache: str | Path | None = None) -> None:
        self.model = model
        device, dtype = example.pos.device, example.pos.dtype
        self.path = package_path(model, dtype, device, cache)
        self.compile_seconds, self.compilations = 0.0, 0
        if not self.path.exists():
            start = time.perf_counter()
            export_package(model, example, self.path)
            self.compile_seconds, self.compilations = time.perf_counter() - start, 1
        from sciml.equivariant.kernels import resolve_backend

        resolve_backend("auto", device)  # the package calls the sciml:: operators: their library loaded
        self.runner = torch._inductor.aoti_load_package(str(self.path))

    @staticmethod
    def fits(topology: GraphTopology) -> bool:
        """Whether the package's dynamic sizes cover this structure."""
        sizes = (topology.atom_types.shape[0], topology.graph.row.shape[0], topology.image_atom.shape[0])
        return topology.padding == 0 and min(sizes) >= MIN_SIZE

    def __call__(self, batch, topology: GraphTopology | None = None) -> dict[str, torch.Tensor]:
        topology = topology_of(self.model, batch) if topology is None else topology
        dtype = batch.pos.dtype
        energies, forces, hidden = self.runner(batch.pos, batch.shifts.to(dtype), *topology.tensors())
        energy = energies.new_zeros(batch.cell.shape[0]).index_add(0, batch.batch, energies)  # as the model sums
        return {"energy": energy, "energies": energies, "forces": forces, "last_layer_features": hidden}
