"""E2Former: the shared energy-model tests (float32 and float64), exactness of the factorised layer
against the dense per-edge product and the independent e3nn baseline (also under PBC with small cells)."""

from __future__ import annotations

import copy

import pytest
import torch

from sciml.equivariant.so3 import random_rotation, wigner_d
from sciml.models import E2Former
from sciml.models.baselines import use_edge_convolutions
from sciml.models.e2former.model import PRESETS
from sciml.nn.forces import ForceStressOutput
from sciml.nn.radial import BesselBasis, GaussianBasis
from sciml.nn.so3_layers import S2FeedForward
from sciml.testing import (
    EnergyModelTests,
    graph_batch,
    moved,
    random_crystal,
    random_molecule,
    randomise_output_head,
    relative,
)

SPECIES = [1, 6, 8, 29]


def make_e2former(dtype=torch.float64, order: int = 1, **kwargs) -> E2Former:
    torch.manual_seed(0)
    settings = {"channels": 8, **kwargs}
    model = E2Former(
        SPECIES,
        cutoff=4.0,
        lmax=2,
        layers=2,
        heads=2,
        order=order,
        radial_basis=8,
        avg_neighbours=4.0,
        **settings,
    )
    return randomise_output_head(model).to(dtype).eval()


class TestE2Former(EnergyModelTests):
    def make_model(self, dtype):
        return make_e2former(dtype)


@pytest.mark.parametrize("name", sorted(PRESETS))
class TestE2FormerPresets(EnergyModelTests):
    """Every named size at its full width (``medium`` is ``E2Former(species)`` with no other argument)."""

    @pytest.fixture(autouse=True)
    def _preset(self, name):
        self.name = name

    def make_model(self, dtype):
        torch.manual_seed(0)
        model = E2Former.preset(self.name, SPECIES, cutoff=4.0, avg_neighbours=4.0)
        return randomise_output_head(model).to(dtype).eval()


def test_medium_preset_is_the_defaults_and_unknown_presets_are_refused():
    assert E2Former.preset("medium", SPECIES).config == E2Former(SPECIES).config
    assert E2Former.preset("small", SPECIES, cutoff=4.5).config["cutoff"] == 4.5
    with pytest.raises(ValueError, match="unknown E2Former preset 'huge'; the presets are"):
        E2Former.preset("huge", SPECIES)


def test_so3_only_model_breaks_mirror_symmetry():
    """parity=False (every SO(3) path, e.g. 1 ⊗ 1 -> 1) gives a mirror image another energy: the reflection
    test of the shared mixins can fail."""
    potential = ForceStressOutput(make_e2former(parity=False))
    batch = graph_batch(STRUCTURES["molecule"](), 4.0)
    mirror = torch.diag(torch.tensor([-1.0, 1.0, 1.0], dtype=torch.float64))
    assert relative(potential(moved(batch, mirror))["energy"], potential(batch)["energy"]) > 1e-8


class TestE2FormerAllOrders(EnergyModelTests):
    """Orders 0, 1, 2 at widths C, C/2, C/4, gated (the paper's all-order attention)."""

    def make_model(self, dtype):
        return make_e2former(dtype, order="all", channels=16)


class TestE2FormerS2FeedForward(EnergyModelTests):
    """The grid feed-forward at a resolution where aliasing is below the 1e-10 tolerance (8e-13 at 36)."""

    def make_model(self, dtype):
        return make_e2former(dtype, feed_forward="s2", s2_resolution=36)


class TestE2FormerJointNorm(EnergyModelTests):
    """The joint norm (the default before the centred one): checkpoints of format version 1 may use it."""

    def make_model(self, dtype):
        return make_e2former(dtype, norm="joint")


class TestE2FormerSeparableNorm(EnergyModelTests):
    """Checkpoints of format version 1 rebuild with EquiformerV2's separable norm: every test passes except the
    symmetric sites, where it must fail (rounding noise turned into forces)."""

    exact_at_symmetric_sites = False

    def make_model(self, dtype):
        return make_e2former(dtype, norm="separable", edge_degree_scaling="mean")


class TestE2FormerSecondOrder(EnergyModelTests):
    def make_model(self, dtype):
        return make_e2former(dtype, order=2)


STRUCTURES = {
    "molecule": lambda: [random_molecule([6, 1, 1, 8, 1, 6, 1], seed=1)],
    "small_cell": lambda: [random_crystal([29, 29], seed=4, cell_length=2.6)],  # cell < cutoff: self-images
    "mixed_batch": lambda: [random_crystal([29, 29, 29], seed=2), random_molecule([8, 1, 1], seed=3)],
}


@pytest.mark.parametrize("parity", [True, False])
@pytest.mark.parametrize("order", [0, 1, 2, "all"])
@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_factorised_equals_dense_and_e3nn_edge_products(name, order, parity):
    """With parity the e3nn baseline carries real parities (0e, 1o, 2e), so e3nn checks every path too."""
    batch = graph_batch(STRUCTURES[name](), 4.0)
    stress = name == "small_cell"
    factorised = make_e2former(order=order, parity=parity)
    dense = make_e2former(order=order, dense=True, parity=parity)
    dense.load_state_dict(factorised.state_dict())
    baseline = use_edge_convolutions(copy.deepcopy(factorised))
    reference = ForceStressOutput(factorised)(batch, stress=stress)
    for other in (dense, baseline):
        outputs = ForceStressOutput(other)(batch, stress=stress)
        for key in ("energy", "forces") + (("stress",) if stress else ()):
            assert relative(reference[key], outputs[key]) < 1e-10, key


def test_backends_agree_and_keep_the_state_dict():
    batch = graph_batch(STRUCTURES["mixed_batch"](), 4.0)
    reference = make_e2former(backend="reference")
    compiled = make_e2former(backend="cpu")
    assert reference.state_dict().keys() == compiled.state_dict().keys()
    compiled.load_state_dict(reference.state_dict())
    a, b = ForceStressOutput(reference)(batch), ForceStressOutput(compiled)(batch)
    assert relative(a["forces"], b["forces"]) < 1e-12 and relative(a["energy"], b["energy"]) < 1e-12


def test_unknown_species_is_refused():
    batch = graph_batch([random_molecule([6, 7], seed=0)], 4.0)
    with pytest.raises(ValueError, match=r"atomic numbers \[7\] are not among the model's species"):
        make_e2former()(batch)


def test_energy_reference_and_scale_are_applied():
    model = make_e2former(energy_reference=[-13.6, -1029.0, -2041.0, -1.0], energy_scale=0.0)
    assert torch.all(E2Former(SPECIES).energy_head[-1].weight == 0)  # untrained models start at the reference
    batch = graph_batch([random_molecule([6, 1, 1, 8], seed=0)], 4.0)
    assert float(model(batch)["energy"]) == pytest.approx(-1029.0 - 2 * 13.6 - 2041.0)


def test_direct_force_head_is_equivariant_and_trains():
    from sciml.equivariant.so3 import random_rotation
    from sciml.testing import moved
    from sciml.training import PotentialModule

    model = make_e2former(direct_force_head=True)
    torch.nn.init.normal_(model.force_head.weight)
    batch = graph_batch(STRUCTURES["mixed_batch"](), 4.0)
    direct = ForceStressOutput(model, direct_forces=True)
    forces = direct(batch)["forces"]
    assert forces.abs().max() > 1e-6
    assert relative(forces, ForceStressOutput(model)(batch)["forces"]) > 1e-3  # not the conservative forces
    rotation = random_rotation(generator=torch.Generator().manual_seed(7))
    assert relative(direct(moved(batch, rotation))["forces"], forces @ rotation.T) < 1e-10
    assert make_e2former().force_head is None  # off by default
    module = PotentialModule(model.train(), direct_forces=True)
    batch.energy, batch.forces = torch.zeros(batch.num_graphs, dtype=torch.float64), torch.zeros_like(batch.pos)
    loss = module.training_step(batch, 0)
    loss.backward()
    assert model.force_head.weight.grad.abs().sum() > 0


def test_s2_feed_forward_rotation_error_is_aliasing_only():
    """At the paper's resolution 18 the grid activation is equivariant to ~1e-7 under rotations (aliasing,
    shrinking with the grid: ~1e-12 at 36) and exactly under inversion (the grid is symmetric under n -> -n)."""
    rotation = random_rotation(generator=torch.Generator().manual_seed(1))
    rotate = torch.block_diag(*[wigner_d(l, rotation) for l in range(3)])
    invert = torch.diag(torch.tensor([(-1.0) ** l for l in range(3) for _ in range(2 * l + 1)], dtype=torch.float64))
    x = torch.randn(6, 9, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    errors = {}
    for resolution in (18, 36):
        torch.manual_seed(0)
        layer = S2FeedForward(2, 8, 16, resolution).double()
        with torch.no_grad():
            for name, matrix in (("rotation", rotate), ("inversion", invert)):
                moved_in = layer(torch.einsum("ij,njc->nic", matrix, x))
                moved_out = torch.einsum("ij,njc->nic", matrix, layer(x))
                errors[name, resolution] = relative(moved_in, moved_out)
    assert 1e-10 < errors["rotation", 18] < 1e-6
    assert errors["rotation", 36] < 1e-11
    assert errors["inversion", 18] < 1e-13 and errors["inversion", 36] < 1e-13


def test_state_dict_carries_species_cutoff_and_energy_scale_and_refuses_other_data():
    from sciml.nn.checkpoint import CheckpointError

    def model(species=(1, 6, 8), cutoff=4.0, energy_scale=1.5):
        torch.manual_seed(0)
        return E2Former(list(species), cutoff, channels=8, lmax=1, layers=1, heads=2, energy_scale=energy_scale)

    state = model().state_dict()
    assert state["species_numbers"].tolist() == [1, 6, 8] and float(state["cutoff_radius"]) == 4.0
    model().load_state_dict(state)  # same data: fine
    with pytest.raises(
        CheckpointError, match=r"species_numbers = \[1, 6, 8\], but this run builds it with .*\[1, 6, 8, 9\]"
    ):
        model(species=(1, 6, 8, 9)).load_state_dict(state)
    with pytest.raises(CheckpointError, match="cutoff_radius = 4.0, but this run builds it with cutoff_radius = 5.0"):
        model(cutoff=5.0).load_state_dict(state)
    with pytest.raises(CheckpointError, match="energy_scale_value = 1.5, .* energy_scale_value = 0.9"):
        model(energy_scale=0.9).load_state_dict(state)
    older = {k: v for k, v in state.items() if k not in E2Former.IDENTITY_BUFFERS}  # before these buffers
    model().load_state_dict(older)  # strict, and accepted
    scale = 1.1604759964221383  # float32 rounding of the scale is not a mismatch
    single = model(energy_scale=scale).float().state_dict()
    assert float(single["energy_scale_value"]) != scale
    model(energy_scale=scale).load_state_dict(single)


def test_checkpoints_of_every_format_version_rebuild_the_model_they_were_trained_with(tmp_path):
    """Checkpoints record every constructor argument and a format version. Version 1 (no version key) predates
    ``norm`` and ``edge_degree_scaling``: such a spec rebuilds the separable norm and mean scaling it was
    trained with; version 2 rebuilds as recorded; a newer version than this sciml's is refused, both named."""
    from sciml.calculators.checkpoint import load_model
    from sciml.nn.checkpoint import FORMAT_VERSION, VERSION_KEY, CheckpointError, build_module, module_spec

    assert FORMAT_VERSION == 3
    model = E2Former([1, 6, 8], 4.0, channels=8, lmax=1, layers=1, heads=2, avg_neighbours=16.0, norm="joint")
    spec = module_spec(model)
    assert spec["init_args"]["norm"] == "joint"
    assert build_module(spec, "new.ckpt").final_norm.kind == "joint"
    version_one = copy.deepcopy(spec)
    del version_one["init_args"]["norm"], version_one["init_args"]["edge_degree_scaling"]
    state = {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}
    torch.save({**state, "sciml_model": version_one}, tmp_path / "v1.ckpt")
    torch.save({**state, "sciml_model": spec, VERSION_KEY: 2}, tmp_path / "v2.ckpt")
    older, newer = load_model(tmp_path / "v1.ckpt"), load_model(tmp_path / "v2.ckpt")
    assert {older.final_norm.kind, older.blocks[0].attention_norm.kind, older.blocks[0].feed_forward_norm.kind} == {
        "separable"
    }
    assert older.edge_degree.degree_scales == [1 / 16.0] * 2  # every degree averaged (avg_neighbours 16)
    assert newer.final_norm.kind == "joint" and newer.edge_degree.degree_scales == [1 / 16.0, 1 / 4.0]
    torch.save({**state, "sciml_model": spec, VERSION_KEY: 4}, tmp_path / "v4.ckpt")
    with pytest.raises(CheckpointError, match=r"v4.ckpt' has format version 4, but this sciml reads versions up to 3"):
        load_model(tmp_path / "v4.ckpt")
    # a MolecularEncoder of version 1 and 2 took its backbone's settings as its own arguments
    encoder = {"class_path": "sciml.koopman.molecular.MolecularEncoder",
               "init_args": {"species": [1, 6, 8], "cutoff": 4.0, "output_dim": 2, "channels": 8, "lmax": 1,
                             "layers": 1, "heads": 2}}  # fmt: skip
    old = build_module(encoder, "old_koopman.ckpt", version=1).backbone
    assert old.final_norm.kind == "separable" and len(old.blocks) == 1 and old.lmax == 1
    two = build_module({**encoder, "init_args": {**encoder["init_args"], "norm": "joint"}}, "v2_koopman.ckpt", 2)
    assert two.backbone.final_norm.kind == "joint" and two.config["backbone"]["channels"] == 8
    assert module_spec(two)["init_args"]["backbone"] == {"channels": 8, "lmax": 1, "layers": 1, "heads": 2,
                                                         "norm": "joint"}  # fmt: skip
    minimal = build_module({"class_path": spec["class_path"], "init_args": {"species": [1], "cutoff": 4.0}}, "v1", 1)
    assert (len(minimal.blocks), minimal.radial_basis.size, minimal.edge_trunk) == (4, 32, None)
    assert isinstance(minimal.radial_basis, GaussianBasis)
    today = build_module({"class_path": spec["class_path"], "init_args": {"species": [1], "cutoff": 4.0}}, "v2")
    assert (len(today.blocks), today.radial_basis.size, today.edge_trunk is not None) == (3, 8, True)
    assert isinstance(today.radial_basis, BesselBasis)
    with pytest.raises(ValueError, match="norm must be one of"):
        E2Former([1], 4.0, channels=8, lmax=1, layers=1, heads=2, norm="batch")
