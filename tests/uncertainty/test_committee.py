"""The committee: the shared energy-model tests, each member's own conservative forces, its spread as the
uncertainty, the spec it is rebuilt from, training each member on its own loss, and calibration on the
validation split (float64 where exactness is asserted)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sciml.calculators import SciMLCalculator
from sciml.models import E2Former
from sciml.nn.checkpoint import build_module, module_spec
from sciml.nn.forces import ForceStressOutput
from sciml.testing import EnergyModelTests, graph_batch, random_crystal, random_molecule, randomise_output_head
from sciml.training import PotentialModule
from sciml.uncertainty import Committee
from sciml.uncertainty.committee import committee_spread, member_outputs
from sciml.uncertainty.fitting import UncertaintyCalibration

SPECIES = [1, 6, 8, 29]


def make_committee(dtype=torch.float64, size: int = 3) -> Committee:
    torch.manual_seed(0)
    member = E2Former(SPECIES, cutoff=4.0, channels=8, lmax=2, layers=1, heads=2, radial_basis=8, avg_neighbours=4.0)
    committee = Committee(member, size=size)
    for seed, member in enumerate(committee.members):  # a fresh E2Former's head is zero: constant energies
        randomise_output_head(member, seed)
    return committee.to(dtype).eval()


class TestCommittee(EnergyModelTests):
    def make_model(self, dtype):
        return make_committee(dtype)


def test_each_member_has_its_own_conservative_forces_and_the_committee_their_mean():
    committee = make_committee()
    batch = graph_batch([random_molecule([6, 1, 1, 8, 1], seed=4), random_crystal([29, 29], seed=5)], 4.0)
    outputs = ForceStressOutput(committee).eval()(batch, stress=True)
    assert outputs["member_forces"].shape == (3, batch.num_nodes, 3)
    for member, own in zip(committee.members, member_outputs(outputs), strict=True):
        alone = ForceStressOutput(member).eval()(batch, stress=True)
        for key in ("energy", "forces", "stress"):
            torch.testing.assert_close(own[key], alone[key], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(outputs["forces"], outputs["member_forces"].mean(0), rtol=0, atol=1e-14)
    torch.testing.assert_close(outputs["energy"], outputs["member_energy"].mean(0), rtol=0, atol=1e-14)
    energy_spread, force_spread = committee_spread(outputs)
    by_hand = outputs["member_forces"].std(0, unbiased=False).pow(2).mean(-1).sqrt()
    torch.testing.assert_close(force_spread, by_hand, rtol=1e-12, atol=0)
    assert energy_spread.shape == (2,) and (force_spread > 0).all()


def test_members_are_initialised_independently_and_the_spec_rebuilds_the_committee():
    committee = make_committee(size=2)
    first, second = (dict(member.named_parameters()) for member in committee.members)
    drawn = [name for name, value in first.items() if value.numel() > 1 and value.std() > 0]  # not ones or zeros
    assert len(drawn) > 20 and all(not torch.equal(first[name], second[name]) for name in drawn)
    spec = module_spec(committee)
    assert spec["init_args"]["size"] == 2 and spec["init_args"]["member"]["class_path"].endswith("E2Former")
    rebuilt = build_module(spec, "test").to(torch.float64)
    rebuilt.load_state_dict(committee.state_dict())
    batch = graph_batch([random_molecule([6, 1, 8, 1], seed=6)], 4.0)
    torch.testing.assert_close(rebuilt.eval()(batch)["member_energy"], committee(batch)["member_energy"])
    with pytest.raises(ValueError, match="at least 2 members"):
        Committee(committee.members[0], size=1)


def test_each_member_is_trained_on_its_own_loss(committee_run):
    _, data, _ = committee_run
    torch.manual_seed(0)
    member = E2Former(data.species, data.cutoff, channels=8, lmax=1, layers=1, heads=2, radial_basis=8)
    module = PotentialModule(Committee(member, size=2).double(), ema_decay=None)
    batch = next(iter(data.train_dataloader()))
    outputs = module._predict(batch, use_ema=False)
    by_member = [module._label_terms(batch, own) for own in member_outputs(outputs)]
    loss = module._loss(batch, outputs)
    torch.testing.assert_close(loss, sum(sum(terms.values()) for terms in by_member) / 2)
    loss.backward()  # the mean of the members' losses: each member's gradient is half its own loss's
    own = module._label_terms(batch, member_outputs(module._predict(batch, use_ema=False))[1])
    expected = torch.autograd.grad(sum(own.values()) / 2, list(module.model.members[1].parameters()), allow_unused=True)
    for parameter, gradient in zip(module.model.members[1].parameters(), expected, strict=True):
        if gradient is not None:
            torch.testing.assert_close(parameter.grad, gradient, rtol=1e-9, atol=1e-12)


def test_training_calibrates_the_uncertainty_on_the_validation_split(committee_run, molecule_frames):
    module, data, checkpoint = committee_run
    model = module.evaluation_model
    assert model.calibrated and model.force_uncertainty_scale > 0 and model.energy_uncertainty_scale > 0
    calibration = UncertaintyCalibration()  # the same sums by hand, over the validation split
    for batch in data.val_dataloader():
        calibration.update(batch, ForceStressOutput(model).eval()(batch))
    energy_scale, force_scale = calibration.scales()
    assert float(model.energy_uncertainty_scale) == pytest.approx(energy_scale, rel=1e-9)
    assert float(model.force_uncertainty_scale) == pytest.approx(force_scale, rel=1e-9)
    assert module.trainer_metrics["val/force_uncertainty_scale"] == pytest.approx(force_scale, rel=1e-6)

    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    atoms = molecule_frames[0].copy()
    atoms.calc = calculator
    forces = atoms.get_forces()
    sigma_f = calculator.results["forces_uncertainty"]
    assert sigma_f.shape == (len(atoms),) and np.all(sigma_f > 0) and forces.shape == (len(atoms), 3)
    assert calculator.get_property("energy_uncertainty", atoms) > 0
    assert float(calculator.model.force_uncertainty_scale) == pytest.approx(force_scale, rel=1e-9)  # the EMA's


def test_asking_for_an_uncertainty_a_model_does_not_carry_names_it(quickstart_run):
    _, checkpoint = quickstart_run
    with pytest.raises(ValueError, match=f"checkpoint '{checkpoint}' carries no uncertainty estimate"):
        SciMLCalculator.from_checkpoint(checkpoint, uncertainty=True)
    plain = SciMLCalculator.from_checkpoint(checkpoint)
    assert not plain.reports_uncertainty
