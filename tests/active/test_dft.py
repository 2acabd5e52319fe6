"""The DFT oracle at its best (density fitting, the nearest frame's density as the guess, dispersion), the label
cache and labelling on an executor: each gives the label the plain call gives, within the stated tolerance."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from ase import Atoms, units

from sciml.active import DFTLevel, LabelCache, LabelStore, Oracle, OracleFailure, gfn2_xtb, pyscf_dft
from sciml.active.dft import PySCFCalculator
from sciml.active.labelling import Labeller
from sciml.active.picks import Pick
from sciml.active.state import RunState

pytest.importorskip("pyscf")
WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])
HARTREE = units.Hartree


def labelled(calculator: PySCFCalculator, atoms: Atoms) -> tuple[float, np.ndarray]:
    atoms = atoms.copy()
    atoms.calc = calculator
    return atoms.get_potential_energy(), atoms.get_forces()


def minus_gradient(level: DFTLevel, atoms: Atoms, atom: int, axis: int, step: float = 1e-3) -> float:
    energies = []
    for sign in (1, -1):
        displaced = atoms.copy()
        displaced.positions[atom, axis] += sign * step
        energies.append(labelled(PySCFCalculator(level, reuse_density=False), displaced)[0])
    return -(energies[0] - energies[1]) / (2 * step)


def test_density_fitting_moves_the_energy_by_about_1e_4_hartree_and_its_forces_are_its_gradient():
    fitted, exact = DFTLevel(), DFTLevel(density_fit=False)
    energy_fitted, forces_fitted = labelled(PySCFCalculator(fitted), WATER)
    energy_exact, forces_exact = labelled(PySCFCalculator(exact), WATER)
    assert abs(energy_fitted - energy_exact) / HARTREE < 1e-3  # the fit's error, not a different method
    assert abs(energy_fitted - energy_exact) / HARTREE > 1e-7  # the fit is really used
    assert np.abs(forces_fitted - forces_exact).max() < 5e-3  # eV/Å
    # the fitted forces are the fitted energy's own gradient (5 meV/Å: the grid's noise)
    assert forces_fitted[1, 0] == pytest.approx(minus_gradient(fitted, WATER, 1, 0), abs=5e-3)
    assert fitted.name == "PySCF PBE/def2-SVP (density fitting)" and exact.name == "PySCF PBE/def2-SVP"


def test_the_nearest_frames_density_as_guess_saves_cycles_and_changes_nothing():
    moved = WATER.copy()
    moved.positions[1, 0] += 0.03
    calculator = PySCFCalculator(DFTLevel())
    labelled(calculator, WATER)
    assert calculator.results["guess"] == "minao"
    energy, forces = labelled(calculator, moved)
    assert calculator.results["guess"] == "nearest frame"
    guessed_cycles = calculator.results["scf_cycles"]
    fresh = PySCFCalculator(DFTLevel(), reuse_density=False)
    fresh_energy, fresh_forces = labelled(fresh, moved)
    assert guessed_cycles < fresh.results["scf_cycles"]
    assert abs(energy - fresh_energy) / HARTREE < 1e-8  # conv_tol 1e-9 Ha
    assert np.abs(forces - fresh_forces).max() < 1e-4
    other = Atoms("NH3", positions=[[0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    assert calculator.nearest_density(other) is None  # other atoms: no guess


def test_d3bj_dispersion_is_in_the_energy_and_in_its_gradient():
    pytest.importorskip("pyscf.dispersion")
    level = DFTLevel(dispersion="d3bj")
    energy, forces = labelled(PySCFCalculator(level), WATER)
    plain, _ = labelled(PySCFCalculator(DFTLevel()), WATER)
    from pyscf import gto
    from pyscf.dispersion import dftd3

    molecule = gto.M(atom=[(s, tuple(p)) for s, p in zip(WATER.get_chemical_symbols(), WATER.positions, strict=True)],
                     basis="def2-SVP", unit="Angstrom", verbose=0)  # fmt: skip
    d3 = dftd3.DFTD3Dispersion(molecule, xc="PBE", version="d3bj").get_dispersion()["energy"]
    assert (energy - plain) / HARTREE == pytest.approx(d3, abs=1e-8) and d3 < 0
    assert forces[1, 0] == pytest.approx(minus_gradient(level, WATER, 1, 0), abs=5e-3)
    assert level.name == "PySCF PBE-D3(BJ)/def2-SVP (density fitting)"
    with pytest.raises(ValueError, match="dispersion must be one of"):
        DFTLevel(dispersion="d2")


class Counting:
    """A factory of GFN2-xTB calculators that counts the calculations."""

    calls = 0

    def __call__(self):
        from tblite.ase import TBLite

        Counting.calls += 1
        return TBLite(method="GFN2-xTB", verbosity=0)


def test_the_label_cache_returns_a_label_at_the_same_geometry_and_level_only(tmp_path):
    pytest.importorskip("tblite")
    cache = LabelCache(tmp_path / "cache")
    oracle = Oracle("GFN2-xTB", Counting(), fresh=True, cache=cache)
    Counting.calls = 0
    first = oracle.label(WATER)
    again = Oracle("GFN2-xTB", Counting(), fresh=True, cache=LabelCache(tmp_path / "cache")).label(WATER.copy())
    assert Counting.calls == 1 and len(cache) == 1  # another oracle, another run: read back
    assert again.get_potential_energy() == first.get_potential_energy()
    assert np.array_equal(again.get_forces(), first.get_forces())
    moved = WATER.copy()
    moved.positions[0, 2] += 1e-4
    oracle.label(moved)
    Oracle("GFN2-xTB, tight", Counting(), fresh=True, cache=cache).label(WATER)  # another level
    assert Counting.calls == 3 and len(cache) == 3
    broken = cache.path(WATER, "GFN2-xTB")
    broken.write_bytes(b"not a label")
    with pytest.raises(ValueError, match="label cache file .* does not read"):
        oracle.label(WATER)


@contextlib.contextmanager
def two_workers(kind: str):
    """An executor of two worker processes: a local process pool, or a local Dask cluster's
    ``Client.get_executor()`` (what a user with a cluster passes)."""
    if kind == "process pool":
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as executor:
            yield executor
        return
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client.get_executor()


@pytest.mark.parametrize("kind", ["process pool", "dask"])
def test_labels_on_an_executor_enter_the_store_in_the_picks_order_with_failures_recorded(tmp_path, kind):
    pytest.importorskip("tblite")
    store = LabelStore(tmp_path / "run")
    state = RunState.load(tmp_path / "run" / "state.json", "test", "GFN2-xTB")
    rng = np.random.default_rng(0)
    picks = []
    for index in range(5):
        atoms = WATER.copy()
        atoms.positions += rng.normal(0, 0.05, atoms.positions.shape)
        picks.append(Pick(f"pick-{index}", atoms, 0.1 * index, "test"))
    fused = WATER.copy()
    fused.positions[1] = fused.positions[0]  # two atoms on one point: the oracle fails
    picks.insert(2, Pick("fused", fused, math.nan, "test"))
    lines = []
    with two_workers(kind) as executor:
        Labeller(gfn2_xtb(), store, state, lines.append, executor).label(picks, 1)
    assert [r.key for r in store.labelled_records] == [f"pick-{i}" for i in range(5)]
    assert [r.key for r in store.failed_records] == ["fused"] and "oracle failed on fused" in lines[0]
    alone = gfn2_xtb().label(picks[3].atoms)
    assert store.labelled[2].get_potential_energy() == pytest.approx(alone.get_potential_energy(), abs=1e-8)
    assert state.seconds["oracle"] > 0


def test_an_unconverged_density_fitted_scf_is_a_failure():
    with pytest.raises(OracleFailure, match="SCF not converged in 2 cycles"):
        pyscf_dft(max_cycle=2).label(WATER)


def test_sciml_learn_passes_the_dft_level_the_label_cache_and_the_workers_on(tmp_path):
    from sciml.commands.learn import learning_loop, parse

    options = parse(["--smiles", "O", "--oracle", "pyscf", "--dispersion", "d4", "--no-density-fit",
                     "--label-cache", str(tmp_path / "cache"), "--label-workers", "2",
                     "--output", str(tmp_path / "run"), "--no-progress"])  # fmt: skip
    loop, starts, _, bar = learning_loop(options)
    bar.close()
    assert loop.oracle.name == "PySCF PBE-D4/def2-SVP" and loop.oracle.cache.directory == tmp_path / "cache"
    assert isinstance(loop.labeller.executor, ProcessPoolExecutor)
    loop.labeller.executor.shutdown()
    assert starts[0].get_chemical_formula() == "H2O"
    default = parse(["--smiles", "O", "--oracle", "pyscf", "--output", str(tmp_path / "run"), "--no-progress"])
    loop, _, _, bar = learning_loop(default)  # PySCF: one one-thread worker per core unless told otherwise
    bar.close()
    cores = os.cpu_count() or 1
    assert (loop.labeller.executor is None) if cores == 1 else (loop.labeller.executor._max_workers == cores)
    if loop.labeller.executor is not None:
        loop.labeller.executor.shutdown()
    xtb = parse(["--smiles", "O", "--output", str(tmp_path / "xtb"), "--no-progress"])
    loop, _, _, bar = learning_loop(xtb)
    bar.close()
    assert loop.labeller.executor is None  # GFN2-xTB: milliseconds a label, labelled here


def test_a_local_pools_workers_share_the_cores_blas_and_openmp_included():
    """Two workers on this machine's cores: each limits its BLAS (loaded before the initializer, by the spawned
    worker's imports) and OpenMP to cores // 2 threads."""
    from threadpoolctl import threadpool_info

    from sciml.active import local_pool

    expected = max(1, (os.cpu_count() or 1) // 2)
    with local_pool(2) as pool:
        environment = pool.submit(os.getenv, "OMP_NUM_THREADS").result()
        libraries = pool.submit(threadpool_info).result()
    assert environment == str(expected)
    blas = [library for library in libraries if library["user_api"] == "blas"]
    assert blas and all(library["num_threads"] == expected for library in blas)
    with pytest.raises(ValueError, match="at least one worker"):
        local_pool(0)


class ShiftedXTB(Oracle):
    """An 'expensive level' for the test: GFN2-xTB with its energy shifted by 0.5 eV per atom (another
    reference, as DFT's is) and its calls counted."""

    def __init__(self) -> None:
        xtb = gfn2_xtb()
        super().__init__("shifted GFN2-xTB", xtb.factory)
        self.calls = 0

    def compute(self, atoms: Atoms) -> Atoms:
        self.calls += 1
        from ase.calculators.singlepoint import SinglePointCalculator

        labelled = super().compute(atoms)
        energy, forces = labelled.get_potential_energy() + 0.5 * len(atoms), labelled.get_forces()
        labelled.calc = SinglePointCalculator(labelled, energy=energy, forces=forces)
        return labelled


def test_two_levels_fine_tune_the_cheap_levels_model_on_frames_spread_over_its_store(tmp_path):
    """Level 2 seeds from level 1's store (farthest-point spread, no rattled copies), its round 1 continues
    level 1's final model, and two_level.json has both levels' oracle calls and clocks."""
    pytest.importorskip("tblite")
    from sciml.active import ActiveLearning
    from sciml.active.picks import spread_frames
    from sciml.active.training import train_round
    from sciml.active.two_level import learn_on_two_levels
    from tests.active.test_loop import tiny_settings

    given = []

    def trainer(frames, directory, settings, round, previous=None, epochs=None, max_seconds=None):
        given.append((directory.parent.name, directory.name, previous is not None, epochs))
        return train_round(frames, directory, settings, round, previous, epochs, max_seconds)

    expensive = ShiftedXTB()
    settings = tiny_settings(rounds=1, uncertainty="last-layer")
    settings.seed_frames = 4
    model = learn_on_two_levels(
        tmp_path,
        lambda folder: ActiveLearning(folder, gfn2_xtb(), tiny_settings(rounds=1, uncertainty="last-layer"),
                                      report=lambda line: None, trainer=trainer),
        lambda folder, spent: ActiveLearning(folder, expensive, settings, report=lambda line: None, trainer=trainer),
        WATER, report=lambda line: None,
    )  # fmt: skip
    assert model == tmp_path / "model.ckpt" and (tmp_path / "pretrain" / "model.ckpt").exists()
    cheap_store, store = LabelStore(tmp_path / "pretrain"), LabelStore(tmp_path)
    seeds = [frame for frame, record in zip(store.labelled, store.labelled_records, strict=True) if record.round == 0]
    assert [r.key for r in store.labelled_records[:4]] == [f"seed-frame{k}" for k in range(4)]
    chosen = spread_frames(cheap_store.labelled, 4)
    assert len(set(chosen)) == 4
    for seed, index in zip(seeds, chosen, strict=True):  # the cheap level's frames, relabelled
        assert np.allclose(seed.positions, cheap_store.labelled[index].positions)
        assert seed.get_potential_energy() != pytest.approx(cheap_store.labelled[index].get_potential_energy())
    # level 1 trains anew in round 1; level 2's round 1 continues level 1's final model, with round 1's epochs
    assert given[0] == ("pretrain", "round1", False, 2) and (tmp_path.name, "round1", True, 2) in given
    record = json.loads((tmp_path / "two_level.json").read_text())
    assert [level["oracle"] for level in record["levels"]] == ["GFN2-xTB", "shifted GFN2-xTB"]
    assert record["levels"][1]["oracle_calls"] == expensive.calls == 4 + 3  # the seeds and round 1's cap
    assert record["levels"][0]["seconds"]["training"] > 0


def test_spread_frames_starts_at_the_lowest_energy_and_takes_the_farthest_next():
    from ase.calculators.singlepoint import SinglePointCalculator

    from sciml.active.picks import spread_frames

    frames = []
    for stretch, energy in ((0.0, 1.0), (0.01, 0.0), (0.3, 2.0), (0.02, 3.0)):
        frame = WATER.copy()
        frame.positions[1, 0] += stretch
        frame.calc = SinglePointCalculator(frame, energy=energy)
        frames.append(frame)
    assert spread_frames(frames, 2) == [1, 2] and spread_frames(frames, 9) == [0, 1, 2, 3]


def test_sciml_learn_pretrain_runs_both_levels_and_reports_the_split(tmp_path):
    pytest.importorskip("tblite")
    from sciml.commands.learn import main

    summary = main(["--smiles", "O", "--pretrain", "gfn2-xtb", "--oracle", "gfn2-xtb", "--rounds", "1",
                    "--seed-frames", "4", "--epochs", "1", "--epochs-per-round", "1", "--final-epochs", "1",
                    "--ramp-ps", "0.005", "--hold-ps", "0.005", "--threshold", "1e-4", "--cap", "2",
                    "--confirmations", "0", "--calibration-frames", "0", "--no-progress",
                    "--output", str(tmp_path)])  # fmt: skip
    assert summary["model"] == str(tmp_path / "model.ckpt") and (tmp_path / "pretrain" / "model.ckpt").exists()
    assert [level["oracle_calls"] for level in summary["levels"]] == [4 + 1, 4 + 1]  # seeds, one pick (spacing)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_one_time_budget_covers_both_levels(tmp_path, monkeypatch):
    """--time-budget is the whole run's: the cheap level gets --pretrain-budget (default a third), the expensive
    one what the cheap level left (at least a third); --pretrain none turns a config's pretraining off."""
    from sciml.active import two_level
    from sciml.commands import learn

    built = {}

    def capture(directory, cheap, expensive, start, report):
        built["cheap"] = cheap(tmp_path / "pretrain").settings.time_budget_min
        built["expensive"] = expensive(tmp_path, 25.0).settings.time_budget_min
        built["overrun"] = expensive(tmp_path / "late", 50.0).settings.time_budget_min
        (tmp_path / "two_level.json").write_text("{}")

    monkeypatch.setattr(two_level, "learn_on_two_levels", capture)
    base = ["--smiles", "O", "--pretrain", "gfn2-xtb", "--oracle", "gfn2-xtb", "--no-progress", "--output",
            str(tmp_path), "--time-budget", "60"]  # fmt: skip
    learn.main(base)
    assert built == {"cheap": 20.0, "expensive": 35.0, "overrun": 20.0}
    learn.main([*base, "--pretrain-budget", "15"])
    assert built["cheap"] == 15.0
    with pytest.raises(SystemExit, match="--pretrain-budget must be between 0 and --time-budget"):
        learn.main([*base, "--pretrain-budget", "60"])
    assert learn.parse(["--smiles", "O", "--pretrain", "none"]).pretrain is None
