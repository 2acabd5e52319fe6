"""``SciMLCalculator``: a trained sciml potential as an ASE calculator (units: Å, eV, eV/Å, eV/Å^3)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from ase import Atoms
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.data import chemical_symbols
from ase.stress import full_3x3_to_voigt_6_stress
from torch import nn
from torch_geometric.data import Data

from sciml.calculators.baseline import baseline_calculator
from sciml.calculators.checkpoint import load_model_and_baseline
from sciml.calculators.inference import ModelInference, plan_inference
from sciml.data.neighbours import radius_graph
from sciml.equivariant.graph import grown_capacity
from sciml.nn.compilation import compile_for_inference
from sciml.nn.forces import ForceStressOutput
from sciml.uncertainty import has_uncertainty

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def model_on(
    model: nn.Module, device: str, dtype: str
) -> tuple[torch.device, torch.dtype, nn.Module, ForceStressOutput]:
    """``(device, torch dtype, model moved there in that dtype, its energy/forces/stress wrapper)``; ``dtype`` is
    ``"float32"`` or ``"float64"``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got '{dtype}'")
    model = model.to(device=torch.device(device), dtype=DTYPES[dtype])
    return torch.device(device), DTYPES[dtype], model, ForceStressOutput(model)


class SciMLCalculator(Calculator):
    """Energy, free energy, per-atom energies, forces and (periodic cells) stress from an energy model.

    The neighbour list is built with ``cutoff + skin`` and reused until an atom moves more than skin / 2
    (or the cell, pbc or atoms change); the edges used are always those within the cutoff at the current
    positions, so results never go stale.

    Args:
        model: an energy model in eval mode (``model.species``, ``model.cutoff``); training mode is refused.
        device: torch device. dtype: ``"float32"`` or ``"float64"``. skin: neighbour-list skin in Å.
        uncertainty: ``None``: report ``energy_uncertainty`` (eV) and ``forces_uncertainty`` (N,) (eV/Å, per
            force component of each atom) when the model carries an estimate (an
            :class:`~sciml.uncertainty.UncertaintyModel`: a committee, a last-layer model); ``True``: require
            one (a clear error otherwise); ``False``: never report them. source: where ``model`` came from (a
            checkpoint path), named in errors.
        compile: the inference path (:mod:`sciml.calculators.inference`): ``"auto"`` (default) the
            ahead-of-time program of the model's energy and forces where it serves (built on the first call and
            cached per model: about 100 s once for the medium model on 2 cores), else eager, the reason in
            ``inference.plan.reason``; ``"aot"`` the same or an error; ``"layers"`` (or ``True``)
            ``torch.compile`` of the layers of every E2Former in the model (a committee's members, the model
            inside a last-layer uncertainty; :func:`~sciml.nn.compilation.compile_for_inference`); ``"eager"``
            (or ``False``). expected_calls: the run's length where known (MD steps): with ``"auto"``, a run too
            short to repay building the program stays eager (:class:`~sciml.calculators.inference.ModelInference`).
        baseline: an ASE calculator whose energy, per-atom energies, forces and stress are added to the model's (the
            model then learned the difference to it: :mod:`sciml.calculators.baseline`); ``from_checkpoint`` sets
            it from a checkpoint that names one. The uncertainty is the model's: the baseline is exact by
            definition.
        static_shapes: fixed-capacity neighbour buffers: every pair within cutoff + skin is kept until the next
            rebuild (the model's smooth cutoff makes the ones beyond the cutoff contribute exactly nothing)
            and the list is padded to a capacity that only grows (``grown_capacity``) with pairs
            farther apart than the cutoff. Edge counts then stay fixed for the whole run or most of it. With
            ``compile`` on a CUDA device the compiled layers run as CUDA graphs (``mode="reduce-overhead"``).

    The neighbour list is computed on ``device`` (vesin runs on CUDA as well as on the CPU).
    """

    implemented_properties = [
        "energy",
        "free_energy",
        "energies",
        "forces",
        "stress",
        "energy_uncertainty",
        "forces_uncertainty",
    ]

    def __init__(
        self,
        model: nn.Module,
        device: str = "cpu",
        dtype: str = "float32",
        skin: float = 0.5,
        compile: bool | str = "auto",
        static_shapes: bool = False,
        uncertainty: bool | None = None,
        source: str | None = None,
        expected_calls: int | None = None,
        baseline: Calculator | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.baseline = baseline
        self.reports_uncertainty = has_uncertainty(model) if uncertainty is None else bool(uncertainty)
        if self.reports_uncertainty and not has_uncertainty(model):
            where = f"checkpoint '{source}'" if source else f"the {type(model).__name__} model"
            raise ValueError(
                f"{where} carries no uncertainty estimate (a sciml.uncertainty model: a committee or a last-layer "
                "uncertainty), but uncertainty=True asked for it"
            )
        if self.reports_uncertainty and not model.calibrated:
            warnings.warn(
                f"{source or type(model).__name__}: the uncertainty is not calibrated (no validation split in "
                "training): energy_uncertainty and forces_uncertainty are the members' raw spread",
                stacklevel=2,
            )
        self.device, self.dtype, self.model, self.potential = model_on(model, device, dtype)
        self.skin, self.cutoff = float(skin), float(model.cutoff)
        self.species = set(int(z) for z in model.species)
        self.rebuilds, self.static_shapes, self.edge_capacity = 0, bool(static_shapes), 0
        self._neighbours: dict | None = None
        self._list_on_cpu = False
        plan = plan_inference(self.model, compile, self.device)
        if plan.mode == "layers":
            cuda_graphs = {"mode": "reduce-overhead"} if static_shapes and self.device.type == "cuda" else {}
            compile_for_inference(self.model, static_shapes=self.static_shapes, **cuda_graphs)
        self.inference = ModelInference(self.potential, plan, expected_calls)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str = "cpu",
        dtype: str = "float32",
        skin: float = 0.5,
        use_ema: bool = True,
        **kwargs,
    ) -> SciMLCalculator:
        """Load a ``sciml fit`` checkpoint with ``torch.load(weights_only=True)`` (see ``load_model``); a checkpoint
        that names a baseline method (a difference model, :mod:`sciml.calculators.baseline`) gets that method's
        calculator as ``baseline``."""
        model, baseline = load_model_and_baseline(path, device, use_ema)
        if baseline is not None:
            kwargs.setdefault("baseline", baseline_calculator(baseline))
        return cls(model, device=device, dtype=dtype, skin=skin, source=str(path), **kwargs)

    def calculate(self, atoms: Atoms | None = None, properties=("energy",), system_changes=all_changes) -> None:
        super().calculate(atoms, properties, system_changes)
        if self.model.training:
            raise RuntimeError("SciMLCalculator refuses a model in training mode; call model.eval() first")
        atoms = self.atoms
        unknown = sorted(set(atoms.numbers.tolist()) - self.species)
        if unknown:
            raise ValueError(
                f"elements {[chemical_symbols[z] for z in unknown]} are not among the model's species "
                f"{[chemical_symbols[z] for z in sorted(self.species)]}"
            )
        want_stress = "stress" in properties
        if want_stress and not atoms.pbc.all():
            raise PropertyNotImplementedError("stress needs a cell periodic in all three directions")
        data = self._graph(atoms)
        # a periodic cell's stress comes with every eager call (it costs little there); the ahead-of-time program
        # has none, so with it stress is computed (eager) only when asked for
        eager = self.inference.plan.mode != "aot"
        outputs = self.inference(data, stress=want_stress or bool(atoms.pbc.all() and eager))
        self.results["energy"] = self.results["free_energy"] = float(outputs["energy"][0].detach())
        self.results["energies"] = outputs["energies"].detach().cpu().double().numpy()
        self.results["forces"] = outputs["forces"].detach().cpu().double().numpy()
        if "stress" in outputs:
            self.results["stress"] = full_3x3_to_voigt_6_stress(outputs["stress"][0].detach().cpu().double().numpy())
        if self.baseline is not None:
            self._add_baseline(atoms, want_stress)
        if self.reports_uncertainty:
            energy, forces = self.model.uncertainty(outputs)
            self.results["energy_uncertainty"] = float(energy[0].detach())
            self.results["forces_uncertainty"] = forces.detach().cpu().double().numpy()

    def _add_baseline(self, atoms: Atoms, want_stress: bool) -> None:
        """The baseline method's energy, per-atom energies, forces (and stress when asked) added to the results."""
        frame = Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc)
        frame.calc = self.baseline
        energy = float(frame.get_potential_energy())
        self.results["energy"] += energy
        self.results["free_energy"] += energy
        self.results["forces"] = self.results["forces"] + frame.get_forces()
        try:
            self.results["energies"] = self.results["energies"] + frame.get_potential_energies()
        except PropertyNotImplementedError:  # a method without per-atom energies: its share spread evenly
            self.results["energies"] = self.results["energies"] + energy / len(atoms)
        if "stress" in self.results:
            if want_stress:
                self.results["stress"] = self.results["stress"] + frame.get_stress()
            else:  # an eager periodic call's stress came unasked: without the baseline's it would be wrong
                del self.results["stress"]

    def _graph(self, atoms: Atoms) -> Data:
        # periodic directions wrapped into the cell: MD engines do not wrap, and atoms that have travelled
        # several cells (a liquid over a long run) would otherwise spread the model's local frames and the
        # neighbour shifts over many cells (a random-weight model's MD ran 2x slower after 16 fs); energies,
        # forces and stress do not depend on it. The wrap is fixed at each rebuild and kept until the next, so
        # an atom that crosses the cell's face meanwhile moves on continuously (no rebuild for it: in a crystal
        # built by ASE the atoms sit on the faces, and re-wrapping every step rebuilt the list at every step)
        cell = torch.tensor(np.asarray(atoms.cell[:]), dtype=self.dtype, device=self.device)
        pbc = torch.tensor(atoms.pbc, device=self.device)
        if self._needs_rebuild(atoms, atoms.positions):
            wrapped = atoms.get_positions(wrap=True) if atoms.pbc.any() else atoms.positions
            positions = torch.tensor(wrapped, dtype=torch.float64, device=self.device)
            edge_index, shifts = self._neighbour_list(positions, cell.double(), pbc)
            integer = (shifts @ torch.linalg.pinv(cell.double())).round() if pbc.any() else shifts * 0
            self._neighbours = {
                "edge_index": edge_index,
                "integer_shifts": integer.to(self.dtype),
                "wrap": wrapped - atoms.positions,
                "positions": atoms.positions.copy(),
                "cell": np.array(atoms.cell[:]),
                "pbc": atoms.pbc.copy(),
                "numbers": atoms.numbers.copy(),
            }
            self.rebuilds += 1
        wrapped = atoms.positions + self._neighbours["wrap"]
        positions = torch.tensor(wrapped, dtype=self.dtype, device=self.device)
        edge_index = self._neighbours["edge_index"]
        shifts = self._neighbours["integer_shifts"] @ cell
        if self.static_shapes:
            edge_index, shifts = self._padded(edge_index, shifts, wrapped)
        else:
            vectors = positions[edge_index[1]] + shifts - positions[edge_index[0]]
            inside = vectors.norm(dim=1) < self.cutoff
            edge_index, shifts = edge_index[:, inside], shifts[inside]
        return Data(
            pos=positions,
            numbers=torch.tensor(atoms.numbers, device=self.device),
            cell=cell[None],
            pbc=pbc[None],
            edge_index=edge_index,
            shifts=shifts,
            batch=torch.zeros(len(atoms), dtype=torch.int64, device=self.device),
            natoms=torch.tensor([len(atoms)], device=self.device),
        )

    def _neighbour_list(self, positions, cell, pbc) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs within cutoff + skin on the calculator's device; on a GPU where vesin's CUDA path fails, on
        the CPU (with a warning, once)."""
        if not self._list_on_cpu:
            try:
                return radius_graph(positions, cell, pbc, self.cutoff + self.skin)
            except RuntimeError as error:
                if positions.device.type == "cpu":
                    raise
                warnings.warn(f"neighbour list on {positions.device} failed ({error}); using the CPU", stacklevel=2)
                self._list_on_cpu = True
        edge_index, shifts = radius_graph(positions.cpu(), cell.cpu(), pbc.cpu(), self.cutoff + self.skin)
        return edge_index.to(self.device), shifts.to(self.device)

    def _padded(
        self, edge_index: torch.Tensor, shifts: torch.Tensor, positions: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cached pairs plus padding pairs up to ``edge_capacity``: receivers spread over the atoms, all
        from atom 0 shifted along x beyond every atom by more than the cutoff (before the next rebuild too)."""
        self.edge_capacity = grown_capacity(edge_index.shape[1], self.edge_capacity)
        padding = self.edge_capacity - edge_index.shape[1]
        receivers = torch.arange(padding, device=self.device) % len(positions)
        pairs = torch.stack([receivers, torch.zeros_like(receivers)])
        reach = float(np.linalg.norm(np.ptp(positions, axis=0))) + self.cutoff + self.skin + 1.0
        far = shifts.new_zeros(padding, 3)
        far[:, 0] = 2.0 * reach
        return torch.cat([edge_index, pairs], dim=1), torch.cat([shifts, far])

    def _needs_rebuild(self, atoms: Atoms, positions: np.ndarray) -> bool:
        cached = self._neighbours
        if cached is None or len(atoms) != len(cached["numbers"]) or np.any(atoms.numbers != cached["numbers"]):
            return True
        if np.any(atoms.pbc != cached["pbc"]) or not np.allclose(atoms.cell[:], cached["cell"], rtol=0, atol=1e-12):
            return True
        # positions as the engine gives them: an engine that wraps them moves an atom by a lattice vector, a rebuild
        displacement = np.linalg.norm(positions - cached["positions"], axis=1).max()
        return displacement > self.skin / 2
