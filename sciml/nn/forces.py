"""Conservative forces and stress from any energy model, by autograd (never inside the backbone).

forces = -dE/dpositions (eV/Å); stress = (1/V) dE/d(strain) (eV/Å^3, ASE's sign convention), with the
symmetric strain applied to positions, cell and periodic shifts alike.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class ForceStressOutput(nn.Module):
    """Wraps an energy model ``model(batch) -> {"energy": (B,), "energies": (N,)}``.

    Args:
        model: the energy model (a plain ``nn.Module``).
        direct_forces: take ``forces`` from the model's ``direct_forces`` output instead of -dE/dx (a
            direct-force head: faster, not conservative). Stress is always a strain derivative.

    Returns from ``forward(batch, forces=True, stress=False)``: the model's outputs plus ``forces (N, 3)``
    and, with ``stress``, ``stress (B, 3, 3)``. In training mode the derivatives keep their graph
    (``create_graph``) so force losses can be trained; in eval mode they do not (inference: less memory and
    time). The wrapper starts in the mode of ``model`` (a wrapper around an eval-mode model is in eval mode).
    """

    def __init__(self, model: nn.Module, direct_forces: bool = False) -> None:
        super().__init__()
        self.model, self.direct_forces = model, direct_forces
        self.train(model.training)

    def forward(self, batch, forces: bool = True, stress: bool = False) -> dict[str, torch.Tensor]:
        if self.direct_forces and not stress:
            outputs = dict(self.model(batch))
            if "direct_forces" not in outputs:
                raise ValueError("direct_forces=True needs a model with a direct-force head (direct_forces output)")
            outputs["forces"] = outputs["direct_forces"]
            return outputs
        if not (forces or stress):
            return self.model(batch)
        batch = copy.copy(batch)
        with torch.enable_grad():
            positions = batch.pos.detach().clone().requires_grad_(forces or stress)
            inputs = [positions]
            if stress:
                strain = torch.zeros_like(batch.cell, requires_grad=True)  # (B, 3, 3)
                symmetric = 0.5 * (strain + strain.transpose(1, 2))
                positions = positions + torch.einsum("ni,nij->nj", positions, symmetric[batch.batch])
                edge_structure = batch.batch[batch.edge_index[0]]
                batch.shifts = batch.shifts + torch.einsum("ei,eij->ej", batch.shifts, symmetric[edge_structure])
                batch.cell = batch.cell + batch.cell @ symmetric
                inputs.append(strain)
            batch.pos = positions
            outputs = dict(self.model(batch))
            if "member_energy" in outputs:  # a committee: each member's derivatives, then their mean
                return self._committee_derivatives(outputs, inputs, batch, stress)
            if "last_layer_ensemble_energy" in outputs:  # an LLPR ensemble: its forces in the same pass
                return self._ensemble_derivatives(outputs, inputs, batch, stress)
            grads = torch.autograd.grad(outputs["energy"].sum(), inputs, create_graph=self.training)
        outputs["forces"] = outputs["direct_forces"] if self.direct_forces else -grads[0]
        if stress:
            outputs["stress"] = grads[1] / torch.linalg.det(batch.cell).abs()[:, None, None]
        return outputs

    def _ensemble_derivatives(self, outputs: dict, inputs: list, batch, stress: bool) -> dict[str, torch.Tensor]:
        """``forces`` (and ``stress``) with the ensemble's force perturbations ``last_layer_ensemble_forces``
        (k, N, 3), the gradients of the energy and of the k ensemble energies in one batched backward pass."""
        ensemble = outputs["last_layer_ensemble_energy"]  # (k, B)
        scalars = torch.cat([outputs["energy"].sum()[None], ensemble.sum(dim=1)])
        cotangents = torch.eye(len(scalars), dtype=scalars.dtype, device=scalars.device)
        with torch.enable_grad():
            grads = torch.autograd.grad(scalars, inputs, cotangents, create_graph=self.training, is_grads_batched=True)
        outputs["forces"], outputs["last_layer_ensemble_forces"] = -grads[0][0], -grads[0][1:]
        if stress:
            outputs["stress"] = grads[1][0] / torch.linalg.det(batch.cell).abs()[:, None, None]
        return outputs

    def _committee_derivatives(self, outputs: dict, inputs: list, batch, stress: bool) -> dict[str, torch.Tensor]:
        """``member_forces`` (M, N, 3) and, with ``stress``, ``member_stress`` (M, B, 3, 3), one backward pass
        per member; ``forces`` and ``stress`` are their means (= the derivatives of the mean energy)."""
        if self.direct_forces:
            raise ValueError("direct_forces is not supported for a committee (its forces are -dE/dx per member)")
        member_energy = outputs["member_energy"]
        # one member's pass keeps the graph for the next; compiled layers (inference) refuse that when their
        # backward donates its saved buffers, a memory saving that only the last pass could use
        with torch.enable_grad(), torch._functorch.config.patch(donated_buffer=False):
            grads = [
                torch.autograd.grad(energy.sum(), inputs, create_graph=self.training, retain_graph=True)
                for energy in member_energy
            ]
        outputs["member_forces"] = -torch.stack([grad[0] for grad in grads])
        outputs["forces"] = outputs["member_forces"].mean(0)
        if stress:
            volume = torch.linalg.det(batch.cell).abs()[:, None, None]
            outputs["member_stress"] = torch.stack([grad[1] for grad in grads]) / volume
            outputs["stress"] = outputs["member_stress"].mean(0)
        return outputs
