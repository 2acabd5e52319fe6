"""A trained sciml potential as a metatomic ``AtomisticModel``: one TorchScript file for metatomic engines.

Needs ``metatomic-torch`` (``pip install "metatomic-torch==0.1.19" "metatomic-ase==0.1.4"``, the ``export``
extra). The file runs wherever metatomic models run (``metatomic_ase.MetatomicCalculator``, LAMMPS, i-PI,
GROMACS builds with metatomic), without sciml or Python::

    sciml export model.ckpt model.pt [--dtype float64]

    from metatomic_ase import MetatomicCalculator
    atoms.calc = MetatomicCalculator("model.pt")

How: the energy model (graph -> per-atom energies) is traced with :func:`torch.jit.trace` on a probe
molecule, inside a scripted wrapper that reads metatomic's full neighbour list (``cutoff``, strict) and the
system's cell, so forces and stress come from the engine's autograd through the same graph as in
:class:`~sciml.calculators.SciMLCalculator`. The trace runs the compiled ``sciml::`` kernels: their schemas,
autograd and CPU/CUDA implementations are C++ (``sciml/equivariant/kernels/csrc``), in a shared library that
the model's metadata names (metatomic's ``extensions``), so an engine loads it without Python. Where the
kernels cannot be built, the export runs the pure-PyTorch reference ops instead (same numbers to rounding,
slower) and says so.

Devices: the traced graph is made device-generic (every CPU device constant the trace recorded is replaced
by the positions' device), so one file runs on CPU and CUDA. On CUDA it runs the compiled CUDA kernels
when the CUDA library was loaded at export (export on a GPU machine), else a second, reference-op trace.
Before saving, each trace is checked against the Python model on a periodic probe of another size
(energies and forces), so a model whose code a trace cannot capture is refused instead of written.
"""

import contextlib
import copy
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional  # noqa: UP035 (TorchScript and metatomic read these annotations)

import numpy as np
import torch
from ase import Atoms
from torch import nn

from sciml.calculators.checkpoint import load_model
from sciml.data.files import AtomicOutput
from sciml.data.neighbours import radius_graph
from sciml.equivariant.kernels.build import cuda_library_loaded
from sciml.equivariant.operations import KernelModule


@contextlib.contextmanager
def _unpatched_index_select():
    """PyG (torch_geometric 2.8, ``hash_tensor``) replaces ``torch.index_select`` with a Python wrapper that
    TorchScript cannot compile, and metatensor scripts functions calling it at import: import metatensor
    and metatomic with the original in place (it is put back afterwards)."""
    patched = torch.index_select
    pyg = sys.modules.get("torch_geometric.hash_tensor")
    original = getattr(pyg, "_old_index_select", None)
    if original is not None:
        torch.index_select = original
    try:
        yield
    finally:
        torch.index_select = patched


with _unpatched_index_select():
    from metatensor.torch import Labels, TensorBlock, TensorMap
    from metatomic.torch import (
        AtomisticModel,
        ModelCapabilities,
        ModelMetadata,
        ModelOutput,
        NeighborListOptions,
        System,
    )

    with contextlib.suppress(ImportError):  # metatomic's ASE calculator, if installed: same import-time scripting
        import metatomic_ase  # noqa: F401


DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: Largest relative difference of energies and forces between the traced model and the Python one, per dtype.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}


class ExportError(RuntimeError):
    """The model cannot be exported faithfully (the message says why)."""


class AtomEnergies(nn.Module):
    """The traced part: positions (N, 3) Å, atomic numbers (N,), edge_index (2, E) (receiver, sender),
    shifts (E, 3) Å, cell (3, 3) Å -> per-atom energies (N,) eV, through the energy model's ``forward``.
    Integer inputs of any width (metatomic's neighbour lists are int32) become int64 for the kernels."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, positions, numbers, edge_index, shifts, cell) -> torch.Tensor:
        graph = SimpleNamespace(
            pos=positions,
            numbers=numbers.to(torch.int64),
            batch=torch.zeros_like(numbers, dtype=torch.int64),
            cell=cell[None],
            edge_index=edge_index.to(torch.int64),
            shifts=shifts,
        )
        return self.model(graph)["energies"]


class EngineSettings(nn.Module):
    """Called by :class:`MetatomicPotential` before each evaluation: nothing (for files on the reference ops)."""

    def forward(self) -> None:
        pass


class UnoptimizedGraphExecutor(EngineSettings):
    """Switches the engine's TorchScript graph executor to running graphs as traced (``sciml::`` op,
    process-wide): its profiling optimisations made E2Former's energy + forces 1.6x slower than eager
    autograd (4096 Cu atoms, 2 threads); unoptimised, the exported file runs at the calculator's speed."""

    def forward(self) -> None:
        torch.ops.sciml.use_unoptimized_graph_executor()


class MetatomicPotential(nn.Module):
    """metatomic's model interface around the traced :class:`AtomEnergies`: outputs ``energy`` per system,
    or per atom (``sample_kind="atom"``), for all atoms or the ``selected_atoms`` (domain decomposition:
    the other atoms still act as neighbours)."""

    def __init__(
        self,
        energies: torch.jit.ScriptModule,
        species: List[int],  # noqa: UP006
        cutoff: float,
        cuda_energies: Optional[torch.jit.ScriptModule] = None,  # noqa: UP045
        settings: Optional[nn.Module] = None,  # noqa: UP045
    ) -> None:
        super().__init__()
        self.settings = EngineSettings() if settings is None else settings
        self.energies = energies
        # on CUDA: the same trace when the CUDA kernels were loaded at export, else the reference-op trace
        self.cuda_energies = energies if cuda_energies is None else cuda_energies
        known = torch.zeros(119, dtype=torch.bool)
        known[torch.tensor(species)] = True
        self.register_buffer("known_numbers", known)
        self.neighbours = NeighborListOptions(cutoff=cutoff, full_list=True, strict=True, requestor="sciml")

    def requested_neighbor_lists(self) -> List[NeighborListOptions]:  # noqa: UP006
        return [self.neighbours]

    def forward(
        self,
        systems: List[System],  # noqa: UP006
        outputs: Dict[str, ModelOutput],  # noqa: UP006
        selected_atoms: Optional[Labels],  # noqa: UP045
    ) -> Dict[str, TensorMap]:  # noqa: UP006
        if "energy" not in outputs:
            return {}
        self.settings()
        per_atom = outputs["energy"].sample_kind == "atom"
        device = self.known_numbers.device
        values: List[torch.Tensor] = []  # noqa: UP006
        samples: List[torch.Tensor] = []  # noqa: UP006
        for index, system in enumerate(systems):
            if not bool(self.known_numbers[system.types].all()):
                raise ValueError("the system holds atomic numbers that the model was not trained on")
            pairs = system.get_neighbor_list(self.neighbours)
            edge_index = torch.stack([pairs.samples.column("first_atom"), pairs.samples.column("second_atom")])
            integer_shifts = torch.stack(
                [pairs.samples.column(f"cell_shift_{axis}") for axis in ("a", "b", "c")], dim=1
            )
            shifts = integer_shifts.to(system.positions.dtype) @ system.cell
            if system.positions.device.type == "cuda":
                atom_energies = self.cuda_energies(system.positions, system.types, edge_index, shifts, system.cell)
            else:
                atom_energies = self.energies(system.positions, system.types, edge_index, shifts, system.cell)
            atoms = torch.arange(atom_energies.shape[0], dtype=torch.int32, device=device)
            if selected_atoms is not None:
                atoms = selected_atoms.values[selected_atoms.column("system") == index][:, 1]
                atom_energies = atom_energies[atoms]
            if per_atom:
                values.append(atom_energies)
                samples.append(torch.stack([torch.full_like(atoms, index), atoms], dim=1))
            else:
                values.append(atom_energies.sum().reshape(1))
                samples.append(torch.tensor([[index]], dtype=torch.int32, device=device))
        names = ["system", "atom"] if per_atom else ["system"]
        block = TensorBlock(
            values=torch.cat(values).reshape(-1, 1),
            samples=Labels(names, torch.cat(samples)),
            components=[],
            properties=Labels(["energy"], torch.tensor([[0]], dtype=torch.int32, device=device)),
        )
        return {"energy": TensorMap(Labels(["_"], torch.tensor([[0]], dtype=torch.int32, device=device)), [block])}


def set_kernels(model: nn.Module, backend: str) -> nn.Module:
    """Every kernel module of ``model`` runs ``backend`` (``"reference"`` or ``"auto"``; in place)."""
    for module in model.modules():
        if isinstance(module, KernelModule):
            module.request(backend)
    return model


def kernel_backends(model: nn.Module) -> set[str]:
    """The backends that ran in ``model``'s kernel modules (after a call)."""
    return {module.backend for module in model.modules() if isinstance(module, KernelModule)}


def follow_input_device(traced: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """Make a trace device-generic, in place: inline its forward and replace every device constant the
    trace recorded (``cpu``) by the device of the first tensor input (positions). Tensor constants the trace
    captured (the kernels' coefficient tables) reach the kernels through ``aten::to(constant, device)``
    and so follow too; a constant of more than 0 dimensions used any other way is refused
    (:class:`ExportError`), as it would stay on the CPU."""
    graph = traced.graph
    torch._C._jit_pass_inline(graph)
    positions = list(graph.inputs())[1]
    device = graph.create("prim::device", [positions])
    device.output().setType(torch._C.DeviceObjType.get())
    device.insertBefore(next(iter(graph.nodes())))
    for node in list(graph.nodes()):
        if node.kind() != "prim::Constant" or node is device:
            continue
        value = node.output().toIValue()
        if isinstance(value, torch.device):
            node.output().replaceAllUsesWith(device.output())
    torch._C._jit_pass_dce(graph)
    for node in graph.nodes():
        value = node.output().toIValue() if node.kind() == "prim::Constant" and node.outputsSize() == 1 else None
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            for use in node.output().uses():
                if use.user.kind() != "aten::to" or device.output() not in list(use.user.inputs()):
                    raise ExportError(
                        f"the trace holds a constant tensor of shape {tuple(value.shape)} used by "
                        f"'{use.user.kind()}' that would stay on the CPU; it cannot run on other devices"
                    )
    torch._C._jit_pass_lint(graph)
    return traced


def trace_energies(model: nn.Module, backend: str, dtype: torch.dtype) -> tuple[torch.jit.ScriptModule, float, str]:
    """Trace :class:`AtomEnergies` of ``model`` with ``backend`` kernels on the probe molecule, make it
    device-generic and check it on the periodic probe: (trace, relative error, backend that ran)."""
    species, cutoff = [int(z) for z in model.species], float(model.cutoff)
    eager = AtomEnergies(set_kernels(model, backend)).eval()
    molecule, periodic = probe_structures(species, cutoff)
    inputs = energy_inputs(molecule, cutoff, dtype)
    eager(*inputs)  # resolve the kernels (building them once) before the trace
    ran = kernel_backends(model)
    for module in model.modules():  # rebuilt inside the trace: constants moved by aten::to(device)
        if isinstance(module, KernelModule):
            for table in module.tables():
                table.clear_cache()
    with warnings.catch_warnings():  # the coefficient tables are constants of the model: as intended
        warnings.filterwarnings("ignore", "torch.tensor results are registered as constants", torch.jit.TracerWarning)
        traced = torch.jit.trace(eager, inputs, check_trace=False)
    follow_input_device(traced)
    error = check_trace(traced, eager, periodic, cutoff, dtype)
    return traced, error, "reference" if ran == {"reference"} else "compiled"


def probe_structures(species: list[int], cutoff: float) -> tuple[Atoms, Atoms]:
    """A molecule of every species (12 atoms on a jittered 1.6 Å grid) to trace on, and a periodic cell of
    another size to check the trace on (16 atoms, a rattled 2 x 2 x 2 bcc cell of edge 0.9 cutoff: atoms
    see their own images)."""
    rng = np.random.default_rng(0)
    numbers = [species[k % len(species)] for k in range(16)]
    grid = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3)
    molecule = Atoms(numbers[:12], positions=1.6 * grid[:12] + rng.normal(0, 0.15, (12, 3)))
    corners = grid[np.all(grid < 2, axis=1)]  # the 8 points of a 2 x 2 x 2 cubic grid
    scaled = np.concatenate([corners, corners + 0.5]) / 2 + rng.normal(0, 0.01, (16, 3))
    periodic = Atoms(numbers, scaled_positions=scaled, cell=np.eye(3) * 0.9 * cutoff, pbc=True)
    return molecule, periodic


def energy_inputs(atoms: Atoms, cutoff: float, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The arguments of :class:`AtomEnergies` for ``atoms`` (positions with ``requires_grad``)."""
    positions = torch.tensor(atoms.positions, dtype=torch.float64)
    cell = torch.tensor(np.asarray(atoms.cell[:]), dtype=torch.float64)
    edge_index, shifts = radius_graph(positions, cell, torch.tensor(atoms.pbc), cutoff)
    positions = positions.to(dtype).requires_grad_(True)
    return positions, torch.tensor(atoms.numbers), edge_index, shifts.to(dtype), cell.to(dtype)


def energies_and_forces(module, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    energies = module(*inputs)
    (gradient,) = torch.autograd.grad(energies.sum(), inputs[0])
    return energies.detach(), -gradient


def check_trace(traced, eager: nn.Module, atoms: Atoms, cutoff: float, dtype: torch.dtype) -> float:
    """Largest relative difference of per-atom energies and forces between the trace and the Python model
    on ``atoms``; raises :class:`ExportError` above :data:`~sciml.interfaces.metatomic.TOLERANCE`."""
    inputs = energy_inputs(atoms, cutoff, dtype)
    expected = energies_and_forces(eager, inputs)
    got = energies_and_forces(traced, inputs)
    error = max(float((b - a).abs().max() / a.abs().max().clamp(min=1e-12)) for a, b in zip(expected, got, strict=True))
    if not error <= TOLERANCE[dtype]:
        raise ExportError(
            f"the traced model differs from the Python model by {error:.2e} (relative) on a {len(atoms)}-atom "
            f"periodic probe (tolerance {TOLERANCE[dtype]:.0e}): its forward has control flow a trace cannot "
            "capture"
        )
    return error


def export_metatomic(
    checkpoint: str | Path,
    out: str | Path,
    dtype: str = "float64",
    use_ema: bool = True,
    overwrite: bool = False,
    kernels: str = "auto",
) -> dict[str, float | str]:
    """Write ``out`` (a metatomic ``AtomisticModel``, TorchScript) from a ``sciml fit`` checkpoint: see
    :func:`write_metatomic`."""
    model = load_model(checkpoint, "cpu", use_ema)
    return write_metatomic(model, out, dtype, kernels, overwrite, source=Path(checkpoint).name)


def write_metatomic(
    model: nn.Module,
    out: str | Path,
    dtype: str = "float64",
    kernels: str = "auto",
    overwrite: bool = False,
    source: str = "a sciml model",
) -> dict[str, float | str]:
    """Write ``out`` (a metatomic ``AtomisticModel``, TorchScript) from an energy model (graph -> per-atom
    energies, with ``species`` and ``cutoff``), atomically (complete or not at all); an existing ``out`` is
    refused unless ``overwrite``. ``kernels``: ``"auto"`` (the compiled ``sciml::`` kernels where they build,
    else the reference ops) or ``"reference"``. ``model`` itself is left as it is (a copy is traced).

    Returns a summary: the kernels the file runs on CPU and on CUDA, the kernel libraries it names (an
    engine loads them), the trace check's relative error, cutoff and species. Raises
    :class:`ExportError` if a trace does not reproduce the model.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got '{dtype}'")
    if kernels not in ("auto", "reference"):
        raise ValueError(f"kernels must be 'auto' or 'reference', got '{kernels}'")
    output = AtomicOutput(out, overwrite, "--overwrite")
    torch_dtype = DTYPES[dtype]
    model = copy.deepcopy(model).to(device="cpu", dtype=torch_dtype).eval()
    species, cutoff = [int(z) for z in model.species], float(model.cutoff)
    traced, error, cpu_kernels = trace_energies(model, kernels, torch_dtype)
    cuda_traced, cuda_kernels = None, cpu_kernels
    if cpu_kernels == "compiled" and not cuda_library_loaded():
        cuda_traced, cuda_error, cuda_kernels = trace_energies(model, "reference", torch_dtype)
        error = max(error, cuda_error)
    capabilities = ModelCapabilities(
        outputs={"energy": ModelOutput(unit="eV", sample_kind="atom")},
        atomic_types=species,
        interaction_range=cutoff,
        length_unit="Angstrom",
        supported_devices=["cpu", "cuda"],
        dtype=dtype,
    )
    metadata = ModelMetadata(
        name=f"sciml {type(model).__name__}",
        description=(
            f"exported by sciml from {source}: energies in eV, cutoff {cutoff:g} Å; kernels: "
            f"{cpu_kernels} on CPU, {cuda_kernels} on CUDA"
        ),
    )
    settings = UnoptimizedGraphExecutor() if cpu_kernels == "compiled" else EngineSettings()
    potential = MetatomicPotential(traced, species, cutoff, cuda_traced, settings).eval()
    exported = AtomisticModel(potential, metadata, capabilities)
    with output as temporary:
        exported.save(str(temporary))
    return {
        "kernels": cpu_kernels,
        "cuda_kernels": cuda_kernels,
        "libraries": " ".join(sorted(torch.ops.loaded_libraries)),
        "trace_error": error,
        "cutoff": cutoff,
        "species": str(species),
    }
