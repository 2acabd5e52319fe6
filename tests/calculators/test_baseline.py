"""A checkpoint that names a baseline method (sciml.calculators.baseline): SciMLCalculator adds the method's energy
and forces to the model's; the paths that run the model alone refuse it."""

from __future__ import annotations

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.test import gradient_test

from sciml.calculators import CheckpointError, SciMLCalculator, load_model
from sciml.calculators.baseline import baseline_calculator, baseline_spec, write_baseline
from sciml.nn.checkpoint import write_model_checkpoint
from tests.calculators.test_ase_calculator import small_model


@pytest.fixture
def difference_checkpoint(tmp_path):
    pytest.importorskip("tblite")
    path = write_model_checkpoint(small_model(), tmp_path / "difference.ckpt")
    return write_baseline(path, baseline_spec("GFN2-xTB", electronic_temperature=500.0))


def water():
    atoms = molecule("H2O")
    atoms.rattle(0.03, seed=3)
    return atoms


def test_the_calculator_adds_the_baseline_to_the_model_and_its_forces_stay_the_gradient(difference_checkpoint):
    """Energy, per-atom energies and forces of the composite equal GFN2-xTB's (tblite, 500 K electronic
    temperature as stored) plus the model's alone, to 1e-10 in float64; the composite's forces pass ASE's
    finite-difference test (1e-5 eV/Å: tblite's SCF converges to about that)."""
    composite = SciMLCalculator.from_checkpoint(difference_checkpoint, dtype="float64", compile="eager")
    model_alone = SciMLCalculator(small_model(), dtype="float64", compile="eager")
    xtb = baseline_calculator({"method": "GFN2-xTB", "accuracy": 1.0, "electronic_temperature": 500.0})
    parts = []
    for calculator in (composite, model_alone, xtb):
        atoms = water()
        atoms.calc = calculator
        parts.append((atoms.get_potential_energy(), atoms.get_potential_energies(), atoms.get_forces()))
    (energy, energies, forces), model, reference = parts
    assert abs(model[0]) > 1e-3 and np.abs(model[2]).max() > 1e-3  # the model's share is not nothing
    assert energy == pytest.approx(model[0] + reference[0], abs=1e-10)
    np.testing.assert_allclose(energies, model[1] + reference[1], atol=1e-10)
    np.testing.assert_allclose(forces, model[2] + reference[2], atol=1e-10)
    atoms = water()
    atoms.calc = composite
    analytic, numeric = gradient_test(atoms)
    np.testing.assert_allclose(analytic, numeric, atol=1e-5)


def test_the_model_alone_is_refused_where_the_baseline_cannot_come_along(difference_checkpoint):
    with pytest.raises(CheckpointError, match="models the difference to GFN2-xTB"):
        load_model(difference_checkpoint)


def test_baseline_specs_refuse_unknown_methods_and_options(tmp_path):
    with pytest.raises(ValueError, match="unknown baseline method 'GFN1-xTB'"):
        baseline_spec("GFN1-xTB")
    with pytest.raises(ValueError, match=r"unknown options \['solvent'\]"):
        baseline_spec("GFN2-xTB", solvent="water")
    with pytest.raises(CheckpointError, match="'PM7' is not one sciml can run"):
        baseline_calculator({"method": "PM7"})
