"""Uncertainty-biased exploration (sciml.uncertainty.biased): E - tau sigma_E, its forces, and where it leads."""

from __future__ import annotations

import copy

import pytest
import torch
from ase.build import molecule

from sciml.active.exploration import ExplorationSettings, explore
from sciml.nn.forces import ForceStressOutput
from sciml.testing import graph_batch
from sciml.uncertainty.biased import UncertaintyBiased
from sciml.uncertainty.fitting import fit_last_layer_uncertainty
from tests.uncertainty.test_posterior_samples import MOLECULES, last_layer_model


def test_the_biased_energy_is_lowered_by_tau_sigma_and_its_forces_are_its_gradient():
    """float64: E_biased = E - 2 sigma_E with sigma_E the model's calibrated energy uncertainty (1e-12); forces
    -dE_biased/dx by central differences (1e-6); the watched force uncertainty is the model's."""
    model = last_layer_model()
    biased = UncertaintyBiased(model, strength=2.0)
    batch = graph_batch(MOLECULES, 4.0)
    plain, drawn = ForceStressOutput(model)(batch), ForceStressOutput(biased)(batch)
    sigma_e, sigma_f = model.uncertainty(plain)
    torch.testing.assert_close(drawn["energy"].detach(), (plain["energy"] - 2.0 * sigma_e).detach(), rtol=0,
                               atol=1e-12)  # fmt: skip
    torch.testing.assert_close(biased.uncertainty(drawn)[1], sigma_f, rtol=1e-12, atol=0)
    position, step = batch.pos.detach().clone(), 1e-4
    for atom, axis in ((0, 0), (3, 2), (7, 1)):
        energies = []
        for sign in (1, -1):
            moved = batch.clone()
            moved.pos = position.clone()
            moved.pos[atom, axis] += sign * step
            with torch.no_grad():
                energies.append(float(biased(moved)["energy"].sum()))
        assert abs((energies[1] - energies[0]) / (2 * step) - float(drawn["forces"][atom, axis].detach())) < 1e-6
    with pytest.raises(ValueError, match="last-layer model"):
        UncertaintyBiased(copy.deepcopy(model.model), 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        UncertaintyBiased(model, -1.0)
    with pytest.raises(ValueError, match="uncertainty_bias must be >= 0"):
        ExplorationSettings(uncertainty_bias=-0.5)


def test_biased_exploration_goes_where_the_model_is_less_sure(committee_run):
    """A trained model (two epochs on rattled ethanol) explores from the same start with the same velocities:
    the larger tau, the larger its frames' energy uncertainty on average over the run (0.1 ps at 300 K)."""
    module, data, _ = committee_run
    member = copy.deepcopy(module.evaluation_model.members[0])
    model = fit_last_layer_uncertainty(member, data.train_dataloader(), data.val_dataloader(), density_components=0)
    start = molecule("CH3CH2OH")
    start.center(vacuum=3.0)
    means = {}
    for tau in (0.0, 3.0, 20.0):
        settings = ExplorationSettings(temperature=300, start_temperature=300, ramp_ps=0.0, hold_ps=0.1,
                                       threshold=1e3, uncertainty_bias=tau)  # fmt: skip
        (run,) = explore(start, copy.deepcopy(model).eval(), settings, seed=0, sample_every=5)
        with torch.no_grad():  # the energy uncertainty the bias climbs, of each sampled frame
            sigma_e = model.uncertainty(ForceStressOutput(model)(graph_batch(run.samples, model.cutoff)))[0]
        means[tau] = float(sigma_e.mean())
    assert means[20.0] > 1.03 * means[3.0] > 1.03**2 * means[0.0], means  # measured 0.76, 0.73, 0.69 eV
