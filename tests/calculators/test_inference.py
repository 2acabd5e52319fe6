"""The ahead-of-time program of an E2Former's energy and forces (``compile="aot"``, the default path).

One program (built once for this module, in a temporary cache: about a minute on 2 cores) serves every step
of an MD run whose edge count changes, other molecules, and a batch of replicas, with float64 results equal to
the eager model's to 1e-10 relative; a model it cannot serve falls back with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import units
from ase.md.velocitydistribution import thermalize_momenta
from ase.md.verlet import VelocityVerlet
from scipy.spatial.distance import pdist

from sciml.calculators import SciMLCalculator
from sciml.calculators.inference import plan_inference
from sciml.calculators.replicas import BatchedPotential
from sciml.testing import random_molecule
from sciml.uncertainty import Committee, LastLayerUncertainty
from tests.calculators.test_compiled import CUTOFF, small_model

RELATIVE = 1e-10  # float64, program against eager


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The package cache of this module, with the program built on a first molecule."""
    folder = tmp_path_factory.mktemp("inference")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCIML_INFERENCE_CACHE", str(folder))
        calculator = SciMLCalculator(small_model(), dtype="float64", compile="aot")
        atoms = random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1)
        atoms.calc = calculator
        atoms.get_forces()
        assert calculator.inference.program.compilations == 1 and calculator.inference.compile_seconds > 0
        yield folder


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def test_one_program_serves_a_run_whose_edges_change_exactly(cache, monkeypatch):
    monkeypatch.setenv("SCIML_INFERENCE_CACHE", str(cache))
    model = small_model()
    program = SciMLCalculator(model, dtype="float64", compile="aot")
    eager = SciMLCalculator(model, dtype="float64", compile="eager")
    atoms = random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1)
    thermalize_momenta(atoms, temperature_K=1500, rng=np.random.default_rng(0))
    atoms.calc = program
    dynamics, edge_counts = VelocityVerlet(atoms, 1.0 * units.fs), set()
    for step in range(1000):
        dynamics.run(1)
        edge_counts.add(int((pdist(atoms.positions) < CUTOFF).sum()))
        if step % 100 == 0:
            reference = atoms.copy()
            reference.calc = eager
            assert relative(atoms.get_forces(), reference.get_forces()) < RELATIVE
            energy, expected = atoms.get_potential_energy(), reference.get_potential_energy()
            assert abs(energy - expected) <= RELATIVE * abs(expected)
    assert len(edge_counts) > 3, edge_counts  # the edge count changed along the run
    assert program.inference.plan.mode == "aot" and program.inference.program.compilations == 0  # from the cache
    assert program.inference.compile_seconds == 0.0


def test_the_program_serves_other_molecules_and_a_batch_of_replicas(cache, monkeypatch):
    monkeypatch.setenv("SCIML_INFERENCE_CACHE", str(cache))
    model = small_model()
    larger = random_molecule([8, 6, 1, 1, 6, 1, 8, 1, 1, 6, 1], seed=4)
    batched = BatchedPotential(model, larger.numbers, dtype="float64", compile="aot")
    eager = BatchedPotential(model, larger.numbers, dtype="float64", compile="eager")
    positions = torch.tensor(np.stack([larger.positions + 0.05 * r for r in range(3)]))
    positions[1, 0] += 0.3
    energy, forces = batched(positions)
    energy0, forces0 = eager(positions)
    assert batched.inference.program.compilations == 0
    assert relative(forces.numpy(), forces0.numpy()) < RELATIVE
    assert relative(energy.numpy(), energy0.numpy()) < RELATIVE and len(set(energy.tolist())) == 3


def test_models_the_program_cannot_serve_fall_back_with_the_reason(monkeypatch):
    monkeypatch.delenv("SCIML_COMPILE", raising=False)  # the suite's eager default (conftest) off
    model = small_model()
    cpu = torch.device("cpu")
    assert plan_inference(model, "auto", cpu).mode == "aot"
    committee = Committee(model, size=2)
    plan = plan_inference(committee, "auto", cpu)
    assert plan.mode == "aot" and plan.backbones == tuple(committee.members) and plan.wrapper is committee
    plan = plan_inference(LastLayerUncertainty(model, force_samples=4), "auto", cpu)
    assert plan.mode == "eager" and "force samples" in plan.reason
    with pytest.raises(ValueError, match="compile='aot' cannot serve this model: a last-layer model with force"):
        plan_inference(LastLayerUncertainty(model, force_samples=4), "aot", cpu)
    plan = plan_inference(LastLayerUncertainty(model, density_components=2), "auto", cpu)
    assert plan.mode == "aot" and plan.backbones == (model,) and plan.wrapper is not None
    assert plan_inference(model, True, cpu).mode == "layers" and plan_inference(model, False, cpu).mode == "eager"
    monkeypatch.setenv("SCIML_COMPILE", "0")
    assert plan_inference(model, "auto", cpu).reason == "SCIML_COMPILE=0"
    assert plan_inference(model, "aot", cpu).mode == "aot"  # asked for by name: the variable does not apply
    with pytest.raises(ValueError, match="compile must be one of"):
        plan_inference(model, "fast", cpu)


def test_a_last_layer_model_gets_its_uncertainty_inputs_from_the_program(cache, monkeypatch):
    """What ``sciml learn`` writes (a last-layer model with a feature density): the program's energy, forces and
    last-layer features complete to the eager model's outputs, so its uncertainty is the eager one."""
    monkeypatch.setenv("SCIML_INFERENCE_CACHE", str(cache))
    model = LastLayerUncertainty(small_model(), density_components=2).eval()
    atoms = random_molecule([8, 6, 1, 1, 6, 1, 8, 1, 1, 6, 1], seed=4)
    program = BatchedPotential(model, atoms.numbers, dtype="float64", compile="aot")
    eager = BatchedPotential(model, atoms.numbers, dtype="float64", compile="eager")
    positions = torch.tensor(atoms.positions)[None]
    program(positions), eager(positions)
    assert program.inference.program is not None and program.inference.program.compilations == 0
    for key in ("energy", "forces", "last_layer_features", "last_layer_gradient", "atom_last_layer_gradient"):
        assert relative(program.last_outputs[key].numpy(), eager.last_outputs[key].detach().numpy()) < RELATIVE, key
    distance, expected = program.last_outputs["feature_distance"], eager.last_outputs["feature_distance"]
    assert torch.equal(torch.isinf(distance), torch.isinf(expected))  # no density fitted yet: inf for every atom


def test_auto_leaves_a_run_too_short_to_repay_the_build_eager(tmp_path, monkeypatch):
    monkeypatch.delenv("SCIML_COMPILE", raising=False)
    monkeypatch.setenv("SCIML_INFERENCE_CACHE", str(tmp_path))  # empty: no program cached
    atoms = random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1)
    potential = BatchedPotential(small_model(), atoms.numbers, dtype="float64", expected_calls=20)
    for _ in range(4):
        potential(torch.tensor(atoms.positions)[None])
    assert potential.inference.plan.mode == "aot" and potential.inference.program is None
    assert "less than building 1 program(s)" in potential.inference.describe() and not list(tmp_path.iterdir())


def test_a_committee_runs_one_program_per_member(cache, monkeypatch):
    """Members with the module's weights (so their programs are the cached one): the committee's energy, forces
    and members' forces equal the eager committee's, and so does its uncertainty's input."""
    monkeypatch.setenv("SCIML_INFERENCE_CACHE", str(cache))
    committee = Committee(small_model(), size=2).eval()
    for member in committee.members:
        member.load_state_dict(small_model().state_dict())
    atoms = random_molecule([8, 6, 1, 1, 6, 1, 8, 1, 1, 6, 1], seed=4)
    program = BatchedPotential(committee, atoms.numbers, dtype="float64", compile="aot")
    eager = BatchedPotential(committee, atoms.numbers, dtype="float64", compile="eager")
    positions = torch.tensor(np.stack([atoms.positions, atoms.positions + 0.05]))
    program(positions), eager(positions)
    assert len(program.inference.programs) == 2 and program.inference.compile_seconds == 0.0
    for key in ("energy", "forces", "member_energy", "member_forces"):
        assert relative(program.last_outputs[key].numpy(), eager.last_outputs[key].detach().numpy()) < RELATIVE, key
