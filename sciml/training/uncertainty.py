"""Calibration of a committee's uncertainty on a held-out split: one scale per quantity.

With the members' spreads u (per structure for energies, per atom and component for forces, see
:func:`~sciml.models.committee.committee_spread`) and the committee mean's errors e over the split, the
scale is s^2 = sum e^2 / sum u^2: the calibrated variances s^2 u^2 add up to the observed squared errors
(Musil et al., J. Chem. Theory Comput. 15, 906 (2019), fit one such factor per property). Sums are
accumulated batch by batch and added across processes, so the scale is the split's, not a batch mean.
"""

from __future__ import annotations

import torch

from sciml.models.committee import committee_spread

SUMS = ("energy_error_sq", "energy_spread_sq", "force_error_sq", "force_spread_sq", "frames", "components")


class UncertaintyCalibration:
    """Accumulate with :meth:`update`, then read :meth:`scales` (``(s_E, s_F)``, NaN where a label is absent)."""

    def __init__(self) -> None:
        self.sums = torch.zeros(len(SUMS), dtype=torch.float64)

    def update(self, batch, outputs: dict[str, torch.Tensor]) -> None:
        """One evaluated batch: ``outputs`` of a committee with ``member_forces``; labels in eV, eV/Å."""
        energy_spread, force_spread = (value.detach().double() for value in committee_spread(outputs))
        sums = torch.zeros(len(SUMS), dtype=torch.float64, device=energy_spread.device)
        if hasattr(batch, "energy"):
            error = (outputs["energy"].detach() - batch.energy).double()
            sums[0], sums[1], sums[4] = (error**2).sum(), (energy_spread**2).sum(), error.numel()
        if hasattr(batch, "forces"):
            error = (outputs["forces"].detach() - batch.forces).double()
            sums[2], sums[3], sums[5] = (error**2).sum(), 3 * (force_spread**2).sum(), error.numel()
        self.sums += sums.cpu()

    def reduce(self) -> None:
        """Add the sums of every process (all of them must call it); no-op without torch.distributed."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            total = self.sums.clone()
            torch.distributed.all_reduce(total)
            self.sums = total

    def scales(self) -> tuple[float, float]:
        """``(s_E, s_F)``: sqrt(sum e^2 / sum u^2) for energies and forces (NaN without that label)."""
        energy_error, energy_spread, force_error, force_spread, frames, components = self.sums.tolist()
        energy = (energy_error / energy_spread) ** 0.5 if frames and energy_spread > 0 else float("nan")
        forces = (force_error / force_spread) ** 0.5 if components and force_spread > 0 else float("nan")
        return energy, forces
