"""Energy surfaces drawn from a potential's uncertainty (sciml.uncertainty.PosteriorSamples), one per replica."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sciml.calculators.replicas import BatchedPotential
from sciml.nn.forces import ForceStressOutput
from sciml.testing import graph_batch, random_molecule
from sciml.uncertainty import LastLayerUncertainty, PosteriorSamples
from sciml.uncertainty.last_layer import rigidity_spread
from tests.models.test_e2former import make_e2former
from tests.uncertainty.test_committee import make_committee

MOLECULES = [random_molecule([6, 1, 1, 8, 1], seed=4), random_molecule([8, 1, 1], seed=5)]


def last_layer_model() -> LastLayerUncertainty:
    """A last-layer model with a made-up posterior factor and scales (alpha_E = 2, alpha_F = 3)."""
    wrapped = LastLayerUncertainty(make_e2former()).eval()
    size = wrapped.rigidity_factor.shape[0]
    wrapped.rigidity_factor.copy_(torch.linalg.cholesky(torch.eye(size, dtype=torch.float64) + 0.1))
    wrapped.set_scales(2.0, 3.0)
    return wrapped


def test_last_layer_draws_spread_as_the_calibrated_energy_uncertainty_and_their_forces_are_conservative():
    """float64. Over 4000 draws, each structure's energies have mean E and std sigma_E = alpha_E |L^T g| (to the
    sampling error of 4000 draws, 5 %); a draw's forces are -dE_s/dx (central differences, 1e-6)."""
    model = last_layer_model()
    samples = PosteriorSamples(model, samples=4000).double()
    batch = graph_batch(MOLECULES, 4.0)
    plain = ForceStressOutput(model)(batch)
    sigma_e = 2.0 * rigidity_spread(plain, model.rigidity_factor)[0]
    energies = []
    for structure in range(2):
        draws = torch.arange(4000)
        one = graph_batch([MOLECULES[structure]] * 4000, 4.0)
        samples.assign(draws)
        with torch.no_grad():
            energies.append(samples(one)["energy"])
    energies = torch.stack(energies)  # (2, 4000)
    torch.testing.assert_close(energies.mean(1), plain["energy"].detach(), rtol=0, atol=float(0.1 * sigma_e.max()))
    assert torch.allclose(energies.std(1), sigma_e.detach(), rtol=0.05), (energies.std(1), sigma_e)

    samples.assign([7, 123])
    drawn = ForceStressOutput(samples)(batch)
    assert not torch.allclose(drawn["forces"], plain["forces"])
    position = batch.pos.detach().clone()
    step = 1e-4
    for atom, axis in ((0, 0), (2, 1), (6, 2)):
        energies_at = []
        for sign in (1, -1):
            moved = batch.clone()
            moved.pos = position.clone()
            moved.pos[atom, axis] += sign * step
            with torch.no_grad():
                energies_at.append(samples(moved)["energy"].sum())
        derivative = float(energies_at[0] - energies_at[1]) / (2 * step)
        assert abs(-derivative - float(drawn["forces"][atom, axis].detach())) < 1e-6


def test_committee_draws_are_members_stretched_by_the_force_scale():
    committee = make_committee(size=3)
    committee.set_scales(1.0, 1.5)
    samples = PosteriorSamples(committee, samples=5).double()
    batch = graph_batch(MOLECULES, 4.0)
    outputs = ForceStressOutput(committee)(batch)
    samples.assign([4, 2])  # draw 4 is member 1
    drawn = ForceStressOutput(samples)(batch)
    members, mean = outputs["member_energy"], outputs["energy"]
    expected = torch.stack([mean[0] + 1.5 * (members[1, 0] - mean[0]), mean[1] + 1.5 * (members[2, 1] - mean[1])])
    torch.testing.assert_close(drawn["energy"], expected.detach(), rtol=1e-12, atol=1e-12)
    atoms = len(MOLECULES[0])
    member_forces = outputs["member_forces"][1, :atoms]
    torch.testing.assert_close(drawn["forces"][:atoms], (outputs["forces"][:atoms] + 1.5 * (
        member_forces - outputs["forces"][:atoms])).detach(), rtol=1e-10, atol=1e-10)  # fmt: skip


def test_replicas_keep_their_draw_when_others_stop_and_refusals_name_the_problem():
    model = last_layer_model()
    molecule = MOLECULES[0]
    potential = BatchedPotential(PosteriorSamples(model, samples=2), molecule.numbers, dtype="float64", compile="eager")
    positions = torch.tensor(np.stack([molecule.positions] * 3))
    energy, _ = potential(positions)
    assert potential.draws.tolist() == [0, 1, 0]
    assert float(energy[0]) == pytest.approx(float(energy[2]), abs=1e-12) and float(energy[0] - energy[1]) != 0
    potential.keep([1, 2])
    energy_kept, _ = potential(positions[1:])
    assert potential.draws.tolist() == [1, 0]
    torch.testing.assert_close(energy_kept, energy[1:], rtol=1e-12, atol=1e-12)

    unfitted = LastLayerUncertainty(make_e2former()).eval()
    with pytest.raises(ValueError, match="calibrated"):
        PosteriorSamples(unfitted, samples=2)
    with pytest.raises(ValueError, match="last-layer or committee"):
        PosteriorSamples(make_e2former(), samples=2)
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
        PosteriorSamples(model, samples=2).assign([0, 2])
