"""`sciml export`: a metatomic AtomisticModel (TorchScript) that metatomic's ASE calculator runs with the same
energies, forces and stress as SciMLCalculator (float64, 1e-9 relative), per system and per atom, with
selected atoms, on the compiled sciml:: kernels (and on the reference ops); a fresh process without sciml
loads and runs it; its graph holds no CPU device; a model a trace cannot capture is refused."""

from __future__ import annotations

import json
import subprocess
import sys

import ase.io
import numpy as np
import pytest
import torch
from ase.calculators.calculator import all_changes

from sciml.calculators import SciMLCalculator
from sciml.cli import main
from sciml.commands.export import main as export_main
from tests.conftest import ROOT

pytest.importorskip("sciml.interfaces.metatomic")  # first: it imports metatomic past PyG's index_select patch
from metatensor.torch import Labels  # noqa: E402
from metatomic.torch import ModelOutput  # noqa: E402
from metatomic_ase import MetatomicCalculator  # noqa: E402

from sciml.interfaces.metatomic import (  # noqa: E402
    AtomEnergies,
    ExportError,
    check_trace,
    energy_inputs,
    probe_structures,
)


@pytest.fixture(scope="module")
def exported(quickstart_run, tmp_path_factory):
    """(checkpoint, exported file) of the quickstart model."""
    _, checkpoint = quickstart_run
    out = tmp_path_factory.mktemp("export") / "model.pt"
    summary = export_main(["--checkpoint", str(checkpoint), "--output", str(out), "--dtype", "float64"])
    assert summary["kernels"] == "compiled" and summary["trace_error"] < 1e-12
    assert summary["cuda_kernels"] == ("compiled" if torch.cuda.is_available() else "reference")
    assert "sciml_kernels_cpu" in summary["libraries"]
    return checkpoint, out


def structures():
    molecule = ase.io.read(ROOT / "configs/md/ethanol.xyz")
    periodic = molecule.copy()
    periodic.cell, periodic.pbc = [6.0, 6.5, 7.0], True  # neighbours across the boundary
    periodic.center()
    periodic.rattle(0.05, seed=1)
    return molecule, periodic


def assert_same_as_calculator(checkpoint, model_file, atoms, device="cpu"):
    properties = ["energy", "energies", "forces"] + (["stress"] if atoms.pbc.any() else [])
    results = []
    for calculator in (
        SciMLCalculator.from_checkpoint(checkpoint, dtype="float64"),
        MetatomicCalculator(str(model_file), check_consistency=True, device=device),
    ):
        calculator.calculate(atoms.copy(), properties, all_changes)
        results.append(calculator.results)
    for name in properties:
        expected, got = np.asarray(results[0][name]), np.asarray(results[1][name])
        assert np.abs(got - expected).max() <= 1e-9 * np.abs(expected).max(), name


@pytest.mark.parametrize("periodic", [False, True], ids=["molecule", "periodic"])
def test_exported_model_matches_sciml_calculator(exported, periodic):
    assert_same_as_calculator(*exported, structures()[periodic])


def test_reference_kernel_export_matches_sciml_calculator(exported, tmp_path):
    checkpoint, _ = exported
    summary = export_main(["--checkpoint", str(checkpoint), "--output", str(tmp_path / "reference.pt"),
                           "--kernels", "reference", "--dtype", "float64"])  # fmt: skip
    assert summary["kernels"] == summary["cuda_kernels"] == "reference"
    assert_same_as_calculator(checkpoint, tmp_path / "reference.pt", structures()[1])


def test_exported_graph_follows_the_input_device(exported):
    """No device constant is left in the energies' graph: the file runs where its inputs are (CPU, CUDA)."""
    _, model_file = exported
    loaded = torch.jit.load(str(model_file))
    assert loaded.capabilities().supported_devices == ["cpu", "cuda"]
    for energies in (loaded.module.energies, loaded.module.cuda_energies):
        nodes = list(energies.graph.nodes())
        assert not [n for n in nodes if n.kind() == "prim::Constant" and n.output().type().kind() == "DeviceObjType"]
        assert any(n.kind() == "prim::device" for n in nodes)
    assert any(n.kind() == "sciml::cg_contract" for n in loaded.module.energies.graph.nodes())


FRESH_PROCESS = """
import json, sys
import ase.io, numpy as np, torch
from metatomic_ase import MetatomicCalculator
atoms = ase.io.read(sys.argv[2])
calculator = MetatomicCalculator(sys.argv[1])
result = {"energy": calculator.get_potential_energy(atoms), "forces": calculator.get_forces(atoms).tolist()}
result["sciml_imported"] = any(name == "sciml" or name.startswith("sciml.") for name in sys.modules)
result["executor_optimize"] = torch._C._get_graph_executor_optimize()
print(json.dumps(result))
"""


def test_a_process_without_sciml_loads_and_runs_the_export(exported, tmp_path):
    """The kernels' library, named in the file, is all an engine needs: no sciml import, no Python autograd."""
    checkpoint, model_file = exported
    ase.io.write(tmp_path / "probe.xyz", structures()[1])
    atoms = ase.io.read(tmp_path / "probe.xyz")  # the positions the other process reads (text rounds them)
    process = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(model_file), str(tmp_path / "probe.xyz")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert not result["sciml_imported"]
    assert not result["executor_optimize"]  # the file switched TorchScript to running its graph as traced
    reference = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    forces = reference.get_forces(atoms.copy())
    assert abs(result["energy"] - reference.results["energy"]) <= 1e-9 * abs(reference.results["energy"])
    assert np.abs(np.asarray(result["forces"]) - forces).max() <= 1e-9 * np.abs(forces).max()


@pytest.mark.cuda
def test_exported_model_on_cuda_matches_sciml_calculator(exported):
    assert_same_as_calculator(*exported, structures()[1], device="cuda")


def test_several_systems_and_selected_atoms(exported):
    checkpoint, model_file = exported
    molecule, periodic = structures()
    reference = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    per_atom = [reference.get_property("energies", atoms.copy()) for atoms in (molecule, periodic)]
    calculator = MetatomicCalculator(str(model_file))
    totals = calculator.run_model([molecule, periodic], {"energy": ModelOutput(unit="eV", sample_kind="system")})
    np.testing.assert_allclose(totals["energy"].block().values[:, 0].numpy(), [e.sum() for e in per_atom], rtol=1e-12)
    chosen = Labels(["system", "atom"], torch.tensor([[0, 1], [0, 4], [1, 0], [1, 8]], dtype=torch.int32))
    block = calculator.run_model(
        [molecule, periodic], {"energy": ModelOutput(unit="eV", sample_kind="atom")}, selected_atoms=chosen
    )["energy"].block()
    assert block.samples == chosen
    expected = [per_atom[0][1], per_atom[0][4], per_atom[1][0], per_atom[1][8]]
    np.testing.assert_allclose(block.values[:, 0].numpy(), expected, rtol=1e-12)


def test_unknown_element_and_existing_output_are_refused(exported):
    _, model_file = exported
    atoms = structures()[0]
    atoms.numbers[0] = 7  # nitrogen: not among the quickstart species
    with pytest.raises(Exception, match="does not support the atomic type '7'"):  # metatomic checks first
        MetatomicCalculator(str(model_file)).get_potential_energy(atoms)
    with pytest.raises(SystemExit, match="exists; pass --overwrite"):
        main(["export", "--checkpoint", "unused.ckpt", "--output", str(model_file)])


class SizeDependent(torch.nn.Module):
    """An energy model whose Python control flow depends on the number of atoms: a trace bakes in one branch."""

    def forward(self, graph) -> dict[str, torch.Tensor]:
        squared = (graph.pos**2).sum(1)
        return {"energies": squared if graph.pos.shape[0] < 13 else 2.0 * squared}


def test_trace_that_misses_control_flow_is_refused():
    molecule, periodic = probe_structures([1, 6], 5.0)
    eager = AtomEnergies(SizeDependent())
    traced = torch.jit.trace(eager, energy_inputs(molecule, 5.0, torch.float64), check_trace=False)
    assert check_trace(traced, eager, molecule, 5.0, torch.float64) < 1e-15  # the traced size is right
    with pytest.raises(ExportError, match="control flow a trace cannot capture"):
        check_trace(traced, eager, periodic, 5.0, torch.float64)
