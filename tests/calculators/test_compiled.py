"""Compiled E2Former layers and fixed-capacity neighbour buffers in the ASE calculator (CPU).

The same trajectory with and without them: float64, energies, forces and stress; compilations counted with
dynamo's own counter (aot_eager: the forward and backward graphs of AOTAutograd without code generation),
and one run through inductor, the code generator ``SciMLCalculator(compile=True)`` uses.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import units
from ase.build import bulk
from ase.md.velocitydistribution import thermalize_momenta
from ase.md.verlet import VelocityVerlet
from torch._dynamo.utils import counters

from sciml.calculators import SciMLCalculator
from sciml.models import E2Former
from sciml.testing import random_molecule, randomise_output_head

CUTOFF = 3.0


def small_model() -> E2Former:
    torch.manual_seed(0)
    model = E2Former([1, 6, 8, 29], CUTOFF, channels=8, lmax=2, layers=1, heads=2, radial_basis=8)
    return randomise_output_head(model).eval()


def systems():
    crystal = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))  # atoms on the cell's faces
    crystal.rattle(0.05, seed=1)
    molecule = random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1)
    return [crystal, molecule]


def trajectory(calculator: SciMLCalculator, atoms, steps: int = 12) -> list[tuple]:
    """Energies, forces and (periodic) stress along a velocity-Verlet run that rebuilds the neighbour list."""
    atoms = atoms.copy()
    thermalize_momenta(atoms, temperature_K=3000, rng=np.random.default_rng(0))
    atoms.calc = calculator
    frames = []
    dynamics = VelocityVerlet(atoms, 2.0 * units.fs)
    for _ in range(steps):
        dynamics.run(1)
        stress = atoms.get_stress() if atoms.pbc.all() else np.zeros(6)
        frames.append((atoms.get_potential_energy(), atoms.get_forces().copy(), stress.copy()))
    return frames


def assert_same(frames, reference, tolerance: float) -> None:
    for (energy, forces, stress), (energy0, forces0, stress0) in zip(frames, reference, strict=True):
        assert abs(energy - energy0) <= tolerance * max(1.0, abs(energy0))
        assert np.abs(forces - forces0).max() <= tolerance * np.abs(forces0).max()
        assert np.abs(stress - stress0).max() <= tolerance * max(np.abs(stress0).max(), 1e-12)


@pytest.mark.parametrize("index", [0, 1], ids=["crystal", "molecule"])
def test_fixed_capacity_buffers_give_the_same_trajectory_with_fixed_shapes(index):
    atoms = systems()[index]
    reference_calculator = SciMLCalculator(small_model(), dtype="float64", skin=0.3)
    reference = trajectory(reference_calculator, atoms)
    assert reference_calculator.rebuilds > 1  # the run crosses rebuilds
    model = small_model()
    edge_counts = []
    layers = model.layers
    model.layers = lambda context, types: edge_counts.append(context.graph.row.shape[0]) or layers(context, types)
    static = SciMLCalculator(model, dtype="float64", skin=0.3, static_shapes=True)
    frames = trajectory(static, atoms)
    assert static.rebuilds == reference_calculator.rebuilds
    # padded: the shape changes only when the capacity grows (at most once in this hot, short run)
    assert edge_counts == sorted(edge_counts) and edge_counts[-1] == static.edge_capacity
    assert len(set(edge_counts)) <= 2 < static.rebuilds
    assert_same(frames, reference, 1e-12)


@pytest.mark.parametrize("static_shapes", [False, True])
def test_compiled_layers_match_eager_without_recompiling(static_shapes):
    """``dynamic=True``: edge and image counts change at every step, one graph. Static shapes with
    ``dynamic=False`` (what CUDA graphs need): padded images and edges, one graph. No graph breaks."""
    atoms = systems()[0]
    reference = trajectory(SciMLCalculator(small_model(), dtype="float64", skin=0.3), atoms)
    model = small_model()
    model.compile_layers(static_shapes=static_shapes, backend="aot_eager")
    calculator = SciMLCalculator(model, dtype="float64", skin=0.3, static_shapes=static_shapes)
    counters.clear()
    assert_same(trajectory(calculator, atoms), reference, 1e-12)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert (model._image_capacity is not None) == static_shapes


@pytest.mark.slow  # 80 s on 2 cores (inductor's C++ compile); the compiled graphs are checked above
def test_inductor_compiled_calculator_matches_eager():
    """``SciMLCalculator(compile=True)``: generated C++ for the layers (about 30 s to compile here)."""
    atoms = systems()[0]
    reference = trajectory(SciMLCalculator(small_model(), dtype="float64", skin=0.3), atoms, steps=3)
    compiled = SciMLCalculator(small_model(), dtype="float64", skin=0.3, compile=True)
    assert_same(trajectory(compiled, atoms, steps=3), reference, 1e-10)


def test_compiled_model_trains_eagerly():
    """Training mode runs the eager layers: force training needs a double backward."""
    model = small_model().double().train()
    model.compile_layers(backend="aot_eager")
    from sciml.nn.forces import ForceStressOutput
    from sciml.testing import graph_batch

    batch = graph_batch(systems()[1:], CUTOFF)
    forces = ForceStressOutput(model)(batch)["forces"]
    forces.pow(2).sum().backward()  # a double backward: would fail through a compiled graph
    assert model.atom_embedding.weight.grad.abs().max() > 0


@pytest.mark.parametrize("wrapper", ["committee", "last_layer"])
def test_calculator_compiles_every_model_sciml_learn_writes(tmp_path, wrapper):
    """``SciMLCalculator.from_checkpoint(..., compile=True)`` on a committee's or a last-layer model's checkpoint
    (what ``sciml learn`` writes) compiles the E2Former(s) inside; compiled results equal eager ones (float64)."""
    from sciml.nn.checkpoint import write_model_checkpoint
    from sciml.nn.compilation import compile_for_inference
    from sciml.uncertainty import Committee, LastLayerUncertainty

    torch.manual_seed(1)
    model = Committee(small_model(), size=2) if wrapper == "committee" else LastLayerUncertainty(small_model())
    path = write_model_checkpoint(model.eval(), tmp_path / "model.ckpt")
    calculator = SciMLCalculator.from_checkpoint(path, dtype="float64", skin=0.3, compile=True, uncertainty=False)
    inner = [module for module in calculator.model.modules() if isinstance(module, E2Former)]
    assert len(inner) == (2 if wrapper == "committee" else 1) and all(m.layers_compiled for m in inner)
    atoms = systems()[1]
    reference = trajectory(SciMLCalculator.from_checkpoint(path, dtype="float64", skin=0.3), atoms, steps=4)
    eager_compiled = SciMLCalculator.from_checkpoint(path, dtype="float64", skin=0.3)
    assert compile_for_inference(eager_compiled.model, backend="aot_eager") == len(inner)
    assert_same(trajectory(eager_compiled, atoms, steps=4), reference, 1e-12)


def test_a_model_without_compilable_layers_is_refused_by_name():
    from sciml.nn.compilation import compile_for_inference

    with pytest.raises(ValueError, match="Linear model has no layers to compile"):
        compile_for_inference(torch.nn.Linear(2, 2))
