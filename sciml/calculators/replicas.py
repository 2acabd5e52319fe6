"""``BatchedPotential``: energies and forces of R replicas of one system in one model call.

The R replicas (same atoms, same cell, each its own positions) are one batch of R graphs: a single forward and
backward pass of the model serves them all, where an ASE calculator would make R calls. Each replica keeps its
own neighbour list, built with ``cutoff + skin`` and reused until one of its atoms has moved more than
``skin / 2`` since (then only that replica's list is rebuilt); pairs beyond the cutoff are dropped at each
call, so the result equals a fresh list's. Periodic positions are wrapped into the cell at each rebuild, as
:class:`~sciml.calculators.SciMLCalculator` does. With a :class:`~sciml.uncertainty.PosteriorSamples` model,
replica r moves on the potential's posterior draw r modulo their number, and keeps it when others stop.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data

from sciml.calculators.ase import model_on
from sciml.calculators.inference import ModelInference, plan_inference
from sciml.data.neighbours import radius_graph
from sciml.nn.compilation import compile_for_inference
from sciml.uncertainty import PosteriorSamples, has_uncertainty


class BatchedPotential:
    """The energy model ``model`` (eval mode) for R replicas of one system.

    Args:
        model: a trained energy model (e.g. from :func:`~sciml.calculators.load_model`), with ``cutoff``.
        numbers: (N,) atomic numbers.
        cell: (3, 3) Å, rows are lattice vectors (ignored along non-periodic directions); default none.
        pbc: (3,) periodic directions; default none.
        skin: Å added to the cutoff for the cached neighbour lists.
        dtype: ``"float32"`` or ``"float64"``: the model's arithmetic (positions and forces come back in float64).
        compile: the inference path, as :class:`~sciml.calculators.SciMLCalculator`'s (default ``"auto"``: the
            ahead-of-time program where it serves; :mod:`sciml.calculators.inference`). expected_calls: the run's
            steps where known (a run too short to repay building the program stays eager).

    ``potential(positions)`` with positions (R, N, 3) in Å returns ``(energy (R,) eV, forces (R, N, 3) eV/Å)``,
    float64 tensors on the positions' device.
    """

    def __init__(
        self,
        model: nn.Module,
        numbers,
        cell=None,
        pbc=None,
        skin: float = 0.5,
        device: str = "cpu",
        dtype: str = "float32",
        compile: bool | str = "auto",
        expected_calls: int | None = None,
    ) -> None:
        if model.training:
            raise RuntimeError("BatchedPotential refuses a model in training mode; call model.eval() first")
        self.device, self.dtype, self.model, self.potential = model_on(model, device, dtype)
        self.skin, self.cutoff = float(skin), float(model.cutoff)
        self.numbers = torch.as_tensor(np.asarray(numbers), dtype=torch.int64, device=self.device)
        unknown = sorted(set(self.numbers.tolist()) - {int(z) for z in model.species})
        if unknown:
            raise ValueError(f"atomic numbers {unknown} are not among the model's species {list(model.species)}")
        cell = np.zeros((3, 3)) if cell is None else np.asarray(cell, dtype=float)
        self.cell = torch.tensor(cell, dtype=torch.float64, device=self.device)
        self.pbc = torch.tensor(np.zeros(3, bool) if pbc is None else np.asarray(pbc, bool), device=self.device)
        self.lists: list[dict] = []
        self.rebuilds = 0
        self.last_outputs: dict | None = None
        self.draws: torch.Tensor | None = None  # the posterior draw of each running replica, with PosteriorSamples
        plan = plan_inference(self.model, compile, self.device)
        if plan.mode == "layers":
            compile_for_inference(self.model)
        self.inference = ModelInference(self.potential, plan, expected_calls)

    @property
    def reports_uncertainty(self) -> bool:
        """Whether the model estimates its force uncertainty (:meth:`forces_uncertainty` works)."""
        return has_uncertainty(self.model)

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        replicas, atoms = positions.shape[:2]
        if atoms != len(self.numbers):
            raise ValueError(f"positions hold {atoms} atoms per replica, the system has {len(self.numbers)}")
        positions = positions.to(device=self.device, dtype=torch.float64)
        edges, shifts, wrapped = [], [], []
        for r in range(replicas):
            edge_index, shift, position = self._edges(r, positions[r])
            edges.append(edge_index + r * atoms)
            shifts.append(shift)
            wrapped.append(position)
        batch = Data(
            pos=torch.cat(wrapped).to(self.dtype),
            numbers=self.numbers.repeat(replicas),
            cell=self.cell[None].expand(replicas, 3, 3).to(self.dtype),
            pbc=self.pbc[None].expand(replicas, 3),
            edge_index=torch.cat(edges, dim=1),
            shifts=torch.cat(shifts).to(self.dtype),
            batch=torch.arange(replicas, device=self.device).repeat_interleave(atoms),
            natoms=torch.full((replicas,), atoms, device=self.device),
        )
        if isinstance(self.model, PosteriorSamples):
            if self.draws is None:
                self.draws = torch.arange(replicas) % self.model.samples
            self.model.assign(self.draws)
        outputs = self.inference(batch)
        energy = outputs["energy"].detach().double()
        forces = outputs["forces"].detach().double().reshape(replicas, atoms, 3)
        self.last_outputs = outputs
        return energy, forces

    def forces_uncertainty(self) -> torch.Tensor:
        """(R, N) per-atom force uncertainty (eV/Å) of the latest call, from a model that estimates one
        (an :class:`~sciml.uncertainty.UncertaintyModel`: a last-layer estimate or a committee); an error
        otherwise."""
        if not has_uncertainty(self.model):
            raise ValueError(f"the {type(self.model).__name__} model carries no uncertainty estimate")
        if self.last_outputs is None:
            raise RuntimeError("forces_uncertainty needs a call of the potential first")
        _, forces = self.model.uncertainty(self.last_outputs)
        return forces.detach().double().reshape(-1, len(self.numbers))

    def keep(self, replicas: list[int]) -> None:
        """Go on with only these replicas (indices into the current ones, in order): their neighbour lists stay,
        and the next call takes their positions, (len(replicas), N, 3)."""
        self.lists = [self.lists[r] for r in replicas]
        if self.draws is not None:
            self.draws = self.draws[replicas]

    def _edges(self, replica: int, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(edge_index, shifts, wrapped positions) of one replica, pairs within the cutoff."""
        if replica >= len(self.lists) or self._moved(replica, positions):
            self._rebuild(replica, positions)
        cached = self.lists[replica]
        wrapped = positions + cached["wrap"]
        shifts = cached["integer_shifts"] @ self.cell
        vectors = wrapped[cached["edge_index"][1]] + shifts - wrapped[cached["edge_index"][0]]
        inside = vectors.norm(dim=1) < self.cutoff
        return cached["edge_index"][:, inside], shifts[inside], wrapped

    def _moved(self, replica: int, positions: torch.Tensor) -> bool:
        return bool((positions - self.lists[replica]["positions"]).norm(dim=1).max() > self.skin / 2)

    def _rebuild(self, replica: int, positions: torch.Tensor) -> None:
        if self.pbc.any():
            fractional = positions @ torch.linalg.inv(self.cell)
            fractional = torch.where(self.pbc, fractional - torch.floor(fractional), fractional)
            wrapped = fractional @ self.cell
        else:
            wrapped = positions
        edge_index, shifts = radius_graph(wrapped, self.cell, self.pbc, self.cutoff + self.skin)
        integer = (shifts @ torch.linalg.pinv(self.cell)).round() if self.pbc.any() else shifts * 0
        entry = {"edge_index": edge_index, "integer_shifts": integer, "wrap": wrapped - positions,
                 "positions": positions.clone()}  # fmt: skip
        if replica < len(self.lists):
            self.lists[replica] = entry
        else:
            self.lists.append(entry)
        self.rebuilds += 1
