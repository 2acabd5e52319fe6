"""The last-layer (LLPR) uncertainty: the wrapper changes no prediction, its gradient features are dE/d(w, b),
the fit calibrates on the validation split, the checkpoint it writes carries it to the calculator, and it
grows away from the training data (float64 where exactness is asserted)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from sciml.calculators import SciMLCalculator
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.nn.forces import ForceStressOutput
from sciml.testing import graph_batch, random_molecule
from sciml.training.callbacks import FitLastLayerUncertainty
from sciml.uncertainty import LastLayerUncertainty
from sciml.uncertainty.fitting import fit_last_layer_uncertainty
from sciml.uncertainty.last_layer import rigidity_spread
from tests.models.test_e2former import make_e2former


def test_the_wrapper_changes_no_prediction_and_its_features_are_the_last_layer_gradient():
    model = make_e2former()
    batch = graph_batch([random_molecule([6, 1, 1, 8, 1], seed=4), random_molecule([8, 1, 1], seed=5)], 4.0)
    bare = ForceStressOutput(model).eval()(batch)
    outputs = ForceStressOutput(LastLayerUncertainty(model)).eval()(batch)
    for key in ("energy", "energies", "forces"):
        torch.testing.assert_close(outputs[key], bare[key], rtol=0, atol=0)
    last = model.energy_head[-1]
    for structure in range(2):
        weight, bias = torch.autograd.grad(model(batch)["energy"][structure], [last.weight, last.bias])
        expected = torch.cat([weight.flatten(), bias])
        torch.testing.assert_close(outputs["last_layer_gradient"][structure], expected, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def fitted(committee_run):
    """The LLPR of the committee run's first member (a trained E2Former, its EMA weights) with the per-atom
    energy rigidity as the force uncertainty, and the data."""
    module, data, _ = committee_run
    member = copy.deepcopy(module.evaluation_model.members[0])
    wrapped = fit_last_layer_uncertainty(member, data.train_dataloader(), data.val_dataloader(), density_components=0)
    return wrapped, data


def test_the_fit_is_calibrated_on_the_validation_split(fitted):
    wrapped, data = fitted
    assert wrapped.density_components == 0 and wrapped.force_samples == 0
    assert wrapped.calibrated and wrapped.force_uncertainty_scale > 0 and wrapped.energy_uncertainty_scale > 0
    assert 0 < float(wrapped.regulariser) < float("inf")
    squared_errors = predicted = 0.0
    potential = ForceStressOutput(wrapped).eval()
    for batch in data.val_dataloader():
        outputs = potential(batch)
        sigma_e, sigma_f = wrapped.uncertainty(outputs)
        squared_errors += float(((outputs["forces"] - batch.forces) ** 2).sum())
        predicted += float(3 * (sigma_f**2).sum())
    assert predicted == pytest.approx(squared_errors, rel=1e-9)  # the scale's definition, on that split


def test_the_checkpoint_carries_it_to_the_calculator_and_it_grows_away_from_the_data(fitted, tmp_path, molecule_frames):
    wrapped, _ = fitted
    path = write_model_checkpoint(wrapped, tmp_path / "llpr.ckpt")
    calculator = SciMLCalculator.from_checkpoint(path, dtype="float64")
    assert calculator.reports_uncertainty
    atoms = molecule_frames[0].copy()
    atoms.calc = calculator
    energy = atoms.get_potential_energy()
    batch = graph_batch([atoms], wrapped.cutoff)
    outputs = ForceStressOutput(wrapped).eval()(batch)
    sigma_e, sigma_f = wrapped.uncertainty(outputs)
    assert energy == pytest.approx(float(outputs["energy"][0]), rel=1e-12)
    assert calculator.results["energy_uncertainty"] == pytest.approx(float(sigma_e[0]), rel=1e-9)
    np.testing.assert_allclose(calculator.results["forces_uncertainty"], sigma_f.detach().numpy(), rtol=1e-9)
    squeezed = atoms.copy()  # bonds 25 % shorter than any training frame's
    squeezed.positions = atoms.positions.mean(0) + 0.75 * (atoms.positions - atoms.positions.mean(0))
    squeezed.calc = calculator
    squeezed.get_potential_energy()
    # 1.2x here (a 2-epoch model of 12 frames, nine last-layer weights): the direction is what is asserted
    assert calculator.results["energy_uncertainty"] > 1.1 * float(sigma_e[0])


def test_the_ensemble_forces_are_the_force_jacobian_along_the_sampled_weights_and_change_no_prediction():
    """float64: forces of the k = 5 ensemble members minus the model's = J (L z_s) with J = dF/d(w, b) from
    D separate backward passes, to 1e-10; energies, forces and stress as without the ensemble."""
    from sciml.uncertainty.fitting import force_jacobian

    model = make_e2former()
    batch = graph_batch([random_molecule([6, 1, 1, 8, 1], seed=4), random_molecule([8, 1, 1], seed=5)], 4.0)
    wrapped = LastLayerUncertainty(model, force_samples=5).eval()
    torch.manual_seed(1)
    size = wrapped.rigidity_factor.shape[0]
    wrapped.rigidity_factor.copy_(torch.linalg.cholesky(torch.eye(size, dtype=torch.float64) + 0.1))
    wrapped.energy_uncertainty_scale.fill_(2.0)
    wrapped.force_uncertainty_scale.fill_(3.0)
    bare = ForceStressOutput(LastLayerUncertainty(model)).eval()(batch)
    outputs = ForceStressOutput(wrapped).eval()(batch)
    for key in ("energy", "forces"):
        torch.testing.assert_close(outputs[key], bare[key], rtol=1e-12, atol=1e-12)
    ensemble = outputs["last_layer_ensemble_forces"]
    assert ensemble.shape == (5, 8, 3) and float(ensemble.abs().max()) > 0
    jacobian = torch.stack([torch.stack([-torch.autograd.grad(
        LastLayerUncertainty.forward(wrapped, moved)["last_layer_gradient"].sum(0)[d], moved.pos)[0]
        for d in range(size)], dim=-1) for moved in [_with_positions_requiring_grad(batch)]])[0]  # fmt: skip
    torch.testing.assert_close(force_jacobian(wrapped, batch), jacobian, rtol=1e-10, atol=1e-12)
    expected = torch.einsum("nad,dk->kna", jacobian, wrapped.rigidity_factor @ wrapped.probes())
    torch.testing.assert_close(ensemble, expected, rtol=1e-10, atol=1e-12)
    sigma_e, sigma_f = wrapped.uncertainty(outputs)
    torch.testing.assert_close(sigma_f, 3.0 * expected.pow(2).mean(dim=(0, 2)).sqrt(), rtol=1e-12, atol=0)
    torch.testing.assert_close(sigma_e, 2.0 * rigidity_spread(bare, wrapped.rigidity_factor)[0], rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="force_samples must be 0"):
        LastLayerUncertainty(model, force_samples=-1)
    with pytest.raises(ValueError, match="force_samples must be 0"):
        FitLastLayerUncertainty(force_samples=-1)


def _with_positions_requiring_grad(batch):
    moved = batch.clone()
    moved.pos = batch.pos.detach().clone().requires_grad_(True)
    return moved


def test_the_ensemble_fit_is_calibrated_and_the_checkpoint_keeps_the_ensemble(committee_run, tmp_path):
    module, data, _ = committee_run
    member = copy.deepcopy(module.evaluation_model.members[0])
    wrapped = fit_last_layer_uncertainty(member, data.train_dataloader(), data.val_dataloader(), force_samples=4)
    assert wrapped.calibrated and wrapped.force_samples == 4
    squared_errors = predicted = 0.0
    potential = ForceStressOutput(wrapped).eval()
    for batch in data.val_dataloader():
        outputs = potential(batch)
        sigma_f = wrapped.uncertainty(outputs)[1]
        squared_errors += float(((outputs["forces"] - batch.forces) ** 2).sum())
        predicted += float(3 * (sigma_f**2).sum())
    assert predicted == pytest.approx(squared_errors, rel=1e-9)  # fitted on the ensemble the model computes
    calculator = SciMLCalculator.from_checkpoint(write_model_checkpoint(wrapped, tmp_path / "e.ckpt"), dtype="float64")
    assert calculator.model.force_samples == 4
    batch = next(iter(data.val_dataloader()))
    frame = batch.get_example(0)
    from ase import Atoms

    atoms = Atoms(numbers=frame.numbers.numpy(), positions=frame.pos.numpy())
    atoms.calc = calculator
    atoms.get_forces()
    single = graph_batch([atoms], wrapped.cutoff)
    expected = wrapped.uncertainty(potential(single))[1].detach().numpy()
    np.testing.assert_allclose(calculator.results["forces_uncertainty"], expected, rtol=1e-9)
