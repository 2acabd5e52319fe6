"""Shared fixtures: small labelled trajectories written by ASE itself (EMT energies, forces, stress)."""

from __future__ import annotations

import os
from pathlib import Path

# every calculator of the suite runs eager (each test's fresh random model would otherwise build its own
# ahead-of-time program, ~75 s); tests/calculators/test_inference.py asks for the program explicitly
os.environ.setdefault("SCIML_COMPILE", "0")
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of pytest -n N's workers: one thread each, subprocesses too
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = "1"

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

ROOT = Path(__file__).resolve().parents[1]


def subprocess_threads(threads: int = 2) -> str:
    """OMP_NUM_THREADS for a test's subprocess: ``threads``, or 1 under pytest -n (each worker has a core)."""
    return "1" if os.environ.get("PYTEST_XDIST_WORKER") else str(threads)


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
        return
    # the kernels built once here, on every core, before pytest -n's workers start: otherwise the first worker
    # builds them on one thread while the other waits for it (~90 s each on 2 cores)
    from sciml.equivariant.kernels import build

    try:
        build.load_library()
    except build.KernelUnavailable:
        pass  # the tests that need them say why


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` skip themselves on machines without an NVIDIA GPU."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def labelled(atoms: Atoms) -> Atoms:
    """A copy of ``atoms`` carrying EMT energy, forces and (if periodic) stress as a single-point calc."""
    frame = atoms.copy()
    atoms = atoms.copy()
    atoms.calc = EMT()
    results = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
    if atoms.pbc.all():
        results["stress"] = atoms.get_stress()
    frame.calc = SinglePointCalculator(frame, **results)
    return frame


def rattled_frames(base: Atoms, n: int, seed: int, amplitude: float = 0.05) -> list[Atoms]:
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(n):
        atoms = base.copy()
        atoms.positions += rng.normal(scale=amplitude, size=atoms.positions.shape)
        frames.append(labelled(atoms))
    return frames


@pytest.fixture
def cu_frames() -> list[Atoms]:
    return rattled_frames(bulk("Cu", "fcc", a=3.6, cubic=True), 6, seed=0)


@pytest.fixture
def molecule_frames() -> list[Atoms]:
    base = molecule("CH3CH2OH")
    base.center(vacuum=3.0)
    base.pbc = False
    return rattled_frames(base, 5, seed=1)


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory):
    """Train the README quickstart once per session: (callback metrics, checkpoint path)."""
    import os
    import sys

    from sciml.cli import run

    folder = tmp_path_factory.mktemp("quickstart")
    previous_argv, previous_cwd = sys.argv, os.getcwd()
    sys.argv = ["sciml"]
    os.chdir(ROOT)
    try:
        cli = run(
            [
                "fit",
                "--config",
                "configs/e2former/quickstart.yaml",
                f"--trainer.default_root_dir={folder}",
                "--trainer.enable_progress_bar=false",
            ]
        )
    finally:
        sys.argv = previous_argv
        os.chdir(previous_cwd)
    metrics = {k: float(v) for k, v in cli.trainer.callback_metrics.items()}
    return metrics, next(folder.rglob("last.ckpt"))


@pytest.fixture(scope="session")
def committee_run(tmp_path_factory):
    """A committee of three tiny E2Formers trained for two epochs on 20 rattled ethanol frames (EMT labels,
    float64, split 12 / 4 / 4) once per session: (module, data module, path of its last checkpoint)."""
    import ase.io
    import lightning as L
    import torch

    from sciml.data import AtomsDataModule
    from sciml.models import E2Former
    from sciml.training import PotentialModule
    from sciml.training.callbacks import RunCheckpoints
    from sciml.uncertainty import Committee

    folder = tmp_path_factory.mktemp("committee")
    base = molecule("CH3CH2OH")
    base.center(vacuum=3.0)
    ase.io.write(folder / "frames.extxyz", rattled_frames(base, 20, seed=1))
    data = AtomsDataModule(
        paths=str(folder / "frames.extxyz"), cutoff=3.0, split=(0.6, 0.2, 0.2), batch_size=2, dtype="float64"
    )
    data.setup("fit")
    torch.manual_seed(0)
    member = E2Former(data.species, data.cutoff, channels=8, lmax=1, layers=1, heads=2, radial_basis=8)
    module = PotentialModule(Committee(member, size=3).double())
    trainer = L.Trainer(
        max_epochs=2, logger=False, default_root_dir=folder, enable_progress_bar=False, accelerator="cpu",
        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[RunCheckpoints()],
    )  # fmt: skip
    trainer.fit(module, data)
    module.trainer_metrics = {key: float(value) for key, value in trainer.callback_metrics.items()}
    return module, data, folder / "checkpoints" / "last.ckpt"
