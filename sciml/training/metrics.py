"""Error metrics of a potential on a batch (eV/atom, eV/Å, eV/Å^3)."""

from __future__ import annotations

import torch


def potential_errors(batch, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Energy MAE per atom, force MAE and RMSE (per component), stress MAE, for the labels present."""
    errors = {}
    if hasattr(batch, "energy"):
        atoms = batch.natoms.to(outputs["energy"].dtype)
        errors["energy_mae_per_atom"] = ((outputs["energy"] - batch.energy) / atoms).abs().mean()
    if hasattr(batch, "forces"):
        difference = outputs["forces"] - batch.forces
        errors["force_mae"] = difference.abs().mean()
        errors["force_rmse"] = difference.pow(2).mean().sqrt()
    if hasattr(batch, "stress") and "stress" in outputs:
        errors["stress_mae"] = (outputs["stress"] - batch.stress).abs().mean()
    return errors
