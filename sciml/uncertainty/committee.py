"""``Committee``: independently initialised energy models of one architecture, trained and evaluated together;
their spread is the prediction's uncertainty (the field's standard: DP-GEN, MACE's committee calculator).

The committee predicts the members' mean. Its uncertainty is the members' standard deviation times one
scale per quantity fitted on the validation split (:mod:`sciml.uncertainty.fitting`, by the rule of
:mod:`sciml.uncertainty.scales`), so that predicted variances match the observed squared errors there:

- per structure: sigma_E = s_E * std_m(E_m) (eV);
- per atom: sigma_F,i = s_F * sqrt(mean over x, y, z of var_m(F_m,i)) (eV/Å): the uncertainty of one force
  component of atom i, so that |F_i,a - F_ref,i,a| <= 2 sigma_F,i holds for ~95 % of components when
  calibrated.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from sciml.nn.checkpoint import build_module, fresh_instance, module_spec
from sciml.uncertainty.base import UncertaintyModel


class Committee(UncertaintyModel):
    """``size`` independently initialised copies of ``member``'s architecture (``member`` is the first).

    Args:
        member: an energy model (e.g. :class:`~sciml.models.E2Former`) whose constructor arguments are recorded
            (``member.config``), or its ``{"class_path", "init_args"}`` spec (what checkpoints store).
        size: number of members (at least 2; DP-GEN uses 4).

    ``forward(batch)`` returns the members' mean ``energy`` (B,) and ``energies`` (N,) and every member's,
    ``member_energy`` (M, B) and ``member_energies`` (M, N), in eV. :class:`~sciml.nn.forces.ForceStressOutput`
    differentiates each member (``member_forces`` (M, N, 3), eV/Å) and averages them into ``forces``.
    The calibration scales are buffers (``energy_uncertainty_scale``, ``force_uncertainty_scale``; NaN until
    calibrated), so they travel with the state dict; until then the uncertainty is the members' raw spread.
    """

    UNFITTED_SCALE = 1.0
    linked_from_data: ClassVar[dict[str, str]] = {}  # the member's own links apply (the CLI follows nesting)

    def __init__(self, member: nn.Module | dict, size: int = 4) -> None:
        if size < 2:
            raise ValueError(f"a committee needs at least 2 members, got size={size}")
        if isinstance(member, dict):
            member = build_module(member, "committee member spec")
        spec = module_spec(member)  # refuses a member that cannot be rebuilt
        super().__init__(next(member.parameters()).dtype)
        self.members = nn.ModuleList([member, *(fresh_instance(member) for _ in range(size - 1))])
        self.config = {"member": spec, "size": size}

    def energy_models(self) -> list[nn.Module]:
        """The members."""
        return list(self.members)

    def spread(self, outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The members' spread (:func:`~sciml.uncertainty.committee.committee_spread`): std_m(E_m) (B,) eV and
        sqrt(mean_xyz var_m(F_m)) (N,) eV/Å."""
        return committee_spread(outputs)

    def forward(self, batch) -> dict[str, torch.Tensor]:
        return self.combine([member(batch) for member in self.members])

    @staticmethod
    def combine(outputs: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """The committee's outputs from its members' (in order): ``energy``/``energies`` their means and
        ``member_energy`` (M, B) / ``member_energies`` (M, N) stacked; members' ``forces`` (already
        differentiated, e.g. by an ahead-of-time program) likewise give ``forces`` and ``member_forces`` (M, N, 3)."""
        combined = {}
        for key in ("energy", "energies", "forces"):
            if key in outputs[0]:
                stacked = torch.stack([output[key] for output in outputs])
                combined[key], combined[f"member_{key}"] = stacked.mean(0), stacked
        return combined


def member_outputs(outputs: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Each member's own ``energy``, ``forces`` (and ``stress``) from a committee's differentiated outputs."""
    keys = {"energy": "member_energy", "energies": "member_energies", "forces": "member_forces"}
    if "member_stress" in outputs:
        keys["stress"] = "member_stress"
    size = outputs["member_energy"].shape[0]
    return [{key: outputs[member_key][m] for key, member_key in keys.items()} for m in range(size)]


def committee_spread(outputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Uncalibrated spreads of a committee's outputs (with ``member_forces``): per structure std_m(E_m) (B,)
    in eV and per atom sqrt(mean_xyz var_m(F_m)) (N,) in eV/Å (population variances over the M members)."""
    energy = outputs["member_energy"].var(0, unbiased=False).sqrt()
    forces = outputs["member_forces"].var(0, unbiased=False).mean(-1).sqrt()
    return energy, forces
