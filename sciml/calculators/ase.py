"""``SciMLCalculator``: a trained sciml potential as an ASE calculator (units: Å, eV, eV/Å, eV/Å^3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ase import Atoms
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.data import chemical_symbols
from ase.stress import full_3x3_to_voigt_6_stress
from torch import nn
from torch_geometric.data import Data

from sciml.calculators.checkpoint import load_model
from sciml.data.neighbours import radius_graph
from sciml.nn.forces import ForceStressOutput

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class SciMLCalculator(Calculator):
    """Energy, free energy, per-atom energies, forces and (periodic cells) stress from an energy model.

    The neighbour list is built with ``cutoff + skin`` and reused until an atom moves more than skin / 2
    (or the cell, pbc or atoms change); the edges used are always those within the cutoff at the current
    positions, so results never go stale.

    Args:
        model: an energy model in eval mode (``model.species``, ``model.cutoff``); training mode is refused.
        device: torch device. dtype: ``"float32"`` or ``"float64"``. skin: neighbour-list skin in Å.
    """

    implemented_properties = ["energy", "free_energy", "energies", "forces", "stress"]

    def __init__(
        self, model: nn.Module, device: str = "cpu", dtype: str = "float32", skin: float = 0.5, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got '{dtype}'")
        self.device, self.dtype, self.skin = torch.device(device), DTYPES[dtype], float(skin)
        self.model = model.to(device=self.device, dtype=self.dtype)
        self.potential = ForceStressOutput(self.model)
        self.cutoff = float(model.cutoff)
        self.species = set(int(z) for z in model.species)
        self.rebuilds = 0
        self._neighbours: dict | None = None

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
        """Load a ``sciml fit`` checkpoint with ``torch.load(weights_only=True)`` (see ``load_model``)."""
        return cls(load_model(path, device, use_ema), device=device, dtype=dtype, skin=skin, **kwargs)

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
        outputs = self.potential(data, forces=True, stress=bool(atoms.pbc.all()))
        self.results["energy"] = self.results["free_energy"] = float(outputs["energy"][0].detach())
        self.results["energies"] = outputs["energies"].detach().cpu().double().numpy()
        self.results["forces"] = outputs["forces"].detach().cpu().double().numpy()
        if "stress" in outputs:
            self.results["stress"] = full_3x3_to_voigt_6_stress(outputs["stress"][0].detach().cpu().double().numpy())

    def _graph(self, atoms: Atoms) -> Data:
        # periodic directions wrapped into the cell: MD engines do not wrap, and atoms that have travelled
        # several cells (a liquid over a long run) would otherwise spread the model's local frames and the
        # neighbour shifts over many cells (a random-weight model's MD ran 2x slower after 16 fs); energies,
        # forces and stress do not depend on it
        wrapped = atoms.get_positions(wrap=True) if atoms.pbc.any() else atoms.positions
        positions = torch.tensor(wrapped, dtype=self.dtype, device=self.device)
        cell = torch.tensor(np.asarray(atoms.cell[:]), dtype=self.dtype, device=self.device)
        pbc = torch.tensor(atoms.pbc, device=self.device)
        if self._needs_rebuild(atoms, wrapped):
            edge_index, shifts = radius_graph(
                positions.double().cpu(), cell.double().cpu(), pbc.cpu(), self.cutoff + self.skin
            )
            integer = (shifts @ torch.linalg.pinv(cell.double().cpu())).round() if pbc.any() else shifts * 0
            self._neighbours = {
                "edge_index": edge_index.to(self.device),
                "integer_shifts": integer.to(self.dtype).to(self.device),
                "positions": wrapped.copy(),
                "cell": np.array(atoms.cell[:]),
                "pbc": atoms.pbc.copy(),
                "numbers": atoms.numbers.copy(),
            }
            self.rebuilds += 1
        edge_index = self._neighbours["edge_index"]
        shifts = self._neighbours["integer_shifts"] @ cell
        vectors = positions[edge_index[1]] + shifts - positions[edge_index[0]]
        inside = vectors.norm(dim=1) < self.cutoff
        return Data(
            pos=positions,
            numbers=torch.tensor(atoms.numbers, device=self.device),
            cell=cell[None],
            pbc=pbc[None],
            edge_index=edge_index[:, inside],
            shifts=shifts[inside],
            batch=torch.zeros(len(atoms), dtype=torch.int64, device=self.device),
            natoms=torch.tensor([len(atoms)], device=self.device),
        )

    def _needs_rebuild(self, atoms: Atoms, positions: np.ndarray) -> bool:
        cached = self._neighbours
        if cached is None or len(atoms) != len(cached["numbers"]) or np.any(atoms.numbers != cached["numbers"]):
            return True
        if np.any(atoms.pbc != cached["pbc"]) or not np.allclose(atoms.cell[:], cached["cell"], rtol=0, atol=1e-12):
            return True
        displacement = np.linalg.norm(positions - cached["positions"], axis=1).max()  # a wrap is a rebuild
        return displacement > self.skin / 2
