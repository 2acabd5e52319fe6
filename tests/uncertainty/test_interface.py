"""The one interface of a model with an uncertainty: the scale rule against a hand computation, a committee and
a last-layer model behind the same calls, refits that refuse nonsense, and the moved classes still loading."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from sciml.calculators import load_model
from sciml.models import E2Former
from sciml.nn.checkpoint import module_spec, write_model_checkpoint
from sciml.testing import graph_batch, random_molecule, randomise_output_head
from sciml.uncertainty import (
    Committee,
    LastLayerUncertainty,
    UncertaintyModel,
    has_uncertainty,
    scale_factor,
    scale_from_sums,
)

SPECIES = [1, 6, 8]


def member(seed: int = 0) -> E2Former:
    torch.manual_seed(seed)
    model = E2Former(SPECIES, cutoff=3.0, channels=8, lmax=1, layers=1, heads=2, radial_basis=8)
    return randomise_output_head(model, seed).double().eval()


def test_the_scale_rule_is_sqrt_of_summed_squares_and_broadcasts_per_atom_spreads_over_components():
    errors = np.array([[0.3, -0.4, 0.0], [1.0, 0.0, 0.0]])  # sum e^2 = 0.25 + 1 = 1.25
    spreads = np.array([[0.5], [0.25]])  # each counts for three components: 3 (0.25 + 0.0625) = 0.9375
    assert scale_factor(errors, spreads) == pytest.approx(np.sqrt(1.25 / 0.9375), rel=1e-12)
    assert scale_factor(torch.tensor([2.0, 2.0]), torch.tensor([1.0, 1.0])) == pytest.approx(2.0)
    assert np.isnan(scale_from_sums(1.0, 0.0)) and np.isnan(scale_factor(np.ones(3), np.zeros(3)))


@pytest.mark.parametrize("kind", ["committee", "last_layer"])
def test_both_estimates_stand_behind_one_interface(kind):
    model = Committee(member(), size=2) if kind == "committee" else LastLayerUncertainty(member())
    assert isinstance(model, UncertaintyModel) and has_uncertainty(model) and not has_uncertainty(member())
    assert model.species == SPECIES and model.cutoff == 3.0 and not model.calibrated
    from sciml.nn.forces import ForceStressOutput

    batch = graph_batch([random_molecule([6, 1, 1, 8, 1], seed=2)], 3.0, torch.float64)
    outputs = ForceStressOutput(model.double().eval())(batch)
    energy, forces = model.spread(outputs)
    assert energy.shape == (1,) and forces.shape == (5,)
    sigma_e, sigma_f = model.uncertainty(outputs)
    if kind == "committee":  # before calibration: the members' raw spread
        assert torch.equal(sigma_f, forces) and forces.max() > 0
    else:  # a last-layer estimate means nothing before it is fitted
        assert torch.isnan(sigma_f).all()
    model.set_scales(2.0, 3.0)
    model.rescale(0.5, 2.0)
    sigma_e, sigma_f = model.uncertainty(outputs)
    assert model.calibrated and torch.allclose(sigma_e, 1.0 * energy) and torch.allclose(sigma_f, 6.0 * forces)
    with pytest.raises(ValueError, match="the force uncertainty factor -1.0 is not a positive number"):
        model.rescale(1.0, -1.0)


def test_checkpoints_that_name_the_old_class_paths_still_load_and_the_old_names_warn(tmp_path):
    committee = Committee(member(), size=2)
    path = write_model_checkpoint(committee, tmp_path / "new.ckpt")
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint["sciml_model"] == module_spec(committee)
    checkpoint["sciml_model"]["class_path"] = "sciml.models.committee.Committee"  # written before the move
    torch.save(checkpoint, tmp_path / "old.ckpt")
    loaded = load_model(tmp_path / "old.ckpt")
    assert isinstance(loaded, Committee) and len(loaded.members) == 2
    with pytest.warns(DeprecationWarning, match="sciml.models.Committee moved to sciml.uncertainty.Committee"):
        from sciml.models import Committee as OldName
    assert OldName is Committee
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from sciml.models import E2Former as current  # noqa: F401
