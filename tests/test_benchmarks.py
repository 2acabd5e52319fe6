"""Every benchmark script runs in its ``--smoke`` mode (tiny sizes, the same code path) and writes its results
files with provenance, so a broken script, or a printed command that no longer works, fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, subprocess_threads

SCRIPTS = ROOT / "scripts"
# script -> (results file stem, extra arguments); each gets --smoke --results <tmp> (and its work folder in tmp)
SMOKE = {
    "bench_kernels.py": ("kernels", []),
    "bench_layers.py": ("layers", []),
    "bench_e2former.py": ("attention_layer", []),
    "bench_precision.py": ("precision", []),
    "bench_data.py": ("data", ["--workdir", "{tmp}/work"]),
    "bench_md.py": ("md_engines", []),
    "bench_speed.py": ("speed", []),
    "bench_koopman.py": ("koopman", []),
    "bench_presets.py": ("presets", ["--presets", "small", "--out", "{tmp}/work"]),
    "bench_accuracy.py": ("accuracy_vs_mace_40min_smoke", ["--out", "{tmp}/work"]),
    "bench_active.py": ("active", ["--out", "{tmp}/work"]),
    "bench_committee.py": ("committee_data", ["--out", "{tmp}/work"]),
    "bench_llpr.py": ("llpr", ["--out", "{tmp}/work"]),
    "bench_replicas.py": ("replicas", []),
    "bench_lag.py": ("lag_choice", []),
    "bench_exploration.py": ("exploration", ["--work", "{tmp}/work"]),
    "bench_kinetics.py": ("kinetics", ["--work", "{tmp}/work"]),
    "bench_dft.py": ("dft_routes_water_smoke", ["--work", "{tmp}/work"]),
}
# smoke runs of minutes, in their own test file so that `pytest -n 2 --dist loadfile` gives them the other worker
ELSEWHERE = {"bench_dft.py": "tests/test_benchmark_routes.py"}


def test_every_benchmark_script_has_a_smoke_run():
    assert sorted(p.name for p in SCRIPTS.glob("bench_*.py")) == sorted(SMOKE)


HERE = sorted(set(SMOKE) - set(ELSEWHERE))


@pytest.mark.parametrize("script", HERE, ids=[s.removesuffix(".py") for s in HERE])
def test_benchmark_smoke_run_writes_results_with_provenance(script, tmp_path):
    smoke_run(script, tmp_path)


def smoke_run(script: str, tmp_path) -> dict:
    """Run ``script --smoke`` and check its results files; returns the JSON record."""
    stem, extra = SMOKE[script]
    command = [sys.executable, str(SCRIPTS / script), "--smoke", "--results", str(tmp_path)]
    command += [argument.format(tmp=tmp_path) for argument in extra]
    environment = {**os.environ, "OMP_NUM_THREADS": subprocess_threads(), "MPLBACKEND": "Agg"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert result.stdout.strip().splitlines()[-1].startswith("RESULT "), result.stdout[-2000:]
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    provenance = record["provenance"]
    assert script in provenance["command"].split()[0] and "--smoke" in provenance["command"]
    assert provenance["commit"] and provenance["machine"]["cores"]
    assert provenance["packages"]["torch"] and provenance["wall_seconds"] > 0
    assert record["result"], "no RESULT values recorded"
    markdown = (tmp_path / f"{stem}.md").read_text()
    assert markdown.startswith("# ") and "| --- |" in markdown.replace("---:", "---") and "`RESULT " in markdown
    return record


def test_accuracy_rows_are_compared_at_the_shortest_rows_training_time():
    """bench_accuracy's equal-time figure: each curve interpolated at the shortest run's last validation."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        from bench_accuracy import curve_at, epochs_trained, equal_time_validation
    finally:
        sys.path.remove(str(SCRIPTS))
    curve = [{"minutes": m, "force_mae_mev_per_a": y} for m, y in [(1.0, 50.0), (3.0, 30.0), (5.0, 20.0)]]
    assert curve_at(curve, 2.0) == pytest.approx(40.0) and curve_at(curve, 5.0) == 20.0
    assert curve_at(curve, 0.5) != curve_at(curve, 0.5)  # before the first validation: NaN
    short = {"training": {"curve": curve[:2]}}
    minutes, at = equal_time_validation({"long": {"training": {"curve": curve}}, "short": short})
    assert minutes == 3.0 and at == {"long": 30.0, "short": 30.0}
    assert epochs_trained({"epochs": 3, "curve": curve}) == "3"  # a run cut by max_time says so
    assert epochs_trained({"epochs": 4, "curve": curve}) == "3 of 4"


def test_dft_routes_compare_the_two_level_route_with_the_largest_passive_set_and_mace_on_it(tmp_path):
    """bench_dft's RESULT: the two-level route over the largest passive set (calls and force error), E2Former
    over MACE on that set; a difference label is DFT - GFN2-xTB; a route the results file holds is not rerun."""
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator

    sys.path.insert(0, str(SCRIPTS))
    try:
        from _dft_routes import Routes, difference, result_line, route_rows
    finally:
        sys.path.remove(str(SCRIPTS))

    def record(calls: int, force_400: float, force_600: float) -> dict:
        halves = {"test_400K.extxyz": (force_400, 100), "test_600K.extxyz": (force_600, 300)}
        test = {name: {"force_mae_mev_per_a": f, "frames": n} for name, (f, n) in halves.items()}
        return {"dft_calls": calls, "test": test, "minutes": {"oracle": 3.0, "training": 10.0, "pretrain_md": 2.0}}

    records = {"passive_100": record(100, 40, 40), "passive_1000": record(1000, 20, 30),
               "mace_1000": record(1000, 25, 35), "two_level_difference": record(90, 21, 29),
               "two_level": record(200, 50, 60)}  # fmt: skip
    result = result_line(records, 2.5, "two_level_difference")  # the route the learn config takes
    assert result["dft_calls_ratio_vs_passive"] == pytest.approx(0.09)
    assert result["force_mae_ratio_vs_passive"] == pytest.approx((21 + 3 * 29) / (20 + 3 * 30))
    assert result["force_mae_ratio_vs_mace_same_labels"] == pytest.approx((20 + 3 * 30) / (25 + 3 * 35))
    assert result["minutes_to_dft_model"] == 15.0 and result["oracle_speedup_vs_plain_pyscf"] == 2.5
    assert "force_mae_ratio_vs_passive_composite" not in result
    assert result_line(records, 2.5, "two_level")["dft_calls_ratio_vs_passive"] == pytest.approx(0.2)
    records["two_level_composite"] = record(90, 19, 25)
    composite = result_line(records, 2.5, "two_level_difference")["force_mae_ratio_vs_passive_composite"]
    assert composite == pytest.approx((19 + 3 * 25) / (20 + 3 * 30))
    lone = result_line({"passive_100": records["passive_100"]}, 1.0, "two_level")
    assert np.isnan(lone["dft_calls_ratio_vs_passive"])
    frame = Atoms("H2", [[0, 0, 0], [0, 0, 0.74]])
    frame.info["xtb_energy"], frame.arrays["xtb_forces"] = -1.0, np.ones((2, 3))
    frame.calc = SinglePointCalculator(frame, energy=-31.0, forces=np.full((2, 3), 3.0))
    delta = difference(frame)
    assert delta.get_potential_energy() == -30.0 and np.allclose(delta.get_forces(), 2.0)
    with pytest.raises(ValueError, match="without xtb_energy"):
        difference(delta)
    old = {**records["passive_1000"], "rotor": {"barrier_gauche_to_trans_mev": 63.0}, "nve": {}}  # before 12-2026
    old["minutes"]["md"] = 0.0
    routes = Routes("ethanol", tmp_path / "data", tmp_path / "work", 60.0, 0.0, tmp_path / "labels",
                    recorded={"passive_1000": old})  # fmt: skip
    assert routes.stage("passive_1000") == old  # taken from the results file: nothing trained
    assert json.loads((tmp_path / "work" / "passive_1000" / "stage.json").read_text()) == old
    old["test"] = {f"test_{t}K.extxyz": {"force_mae_mev_per_a": 20.0, "energy_mae_mev_per_atom": 0.3}
                   for t in (400, 600)}  # fmt: skip
    assert route_rows({"passive_1000": old}, 4.0)[0][10] == "63"  # the barrier under its old name


def test_kinetics_training_frames_cover_the_rotor():
    """bench_kinetics' training set: half evenly in time, half spread over the C-C-O-H dihedral, so the rare
    barrier frames are all taken; exact count, no repeats; without spreading, exactly the evenly spaced frames."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        from _rotor import ROTOR, dihedrals, spread_over_rotor
    finally:
        sys.path.remove(str(SCRIPTS))
    from sciml.active.structures import molecule_from_smiles

    start = molecule_from_smiles("CCO", 0)
    rng = np.random.default_rng(1)
    angles = np.concatenate([rng.normal(60, 10, 180), rng.normal(-60, 10, 180), [125, 130, 135, 175, 180]])
    frames = []
    for angle in angles:
        frame = start.copy()
        frame.set_dihedral(*ROTOR, angle, indices=[ROTOR[-1]])
        frames.append(frame)
    assert np.allclose(np.abs(dihedrals(frames)), np.abs(np.where(angles > 180, angles - 360, angles)), atol=1e-6)
    chosen = spread_over_rotor(frames, 100, 0.5)
    assert len(chosen) == len(set(chosen)) == 100
    assert {360, 361, 362, 363, 364} <= set(chosen)  # every frame of the rare bins
    even = spread_over_rotor(frames, 60, 0.0)
    assert even == sorted(set(np.linspace(0, len(frames) - 1, 60).round().astype(int).tolist()))


def test_the_amide_torsion_scan_moves_the_methyl_side_and_holds_each_angle():
    """bench_dft's scan of N-methylacetamide (GFN2-xTB, 3 angles): the N-methyl group turns about the C-N bond,
    each relaxed structure keeps its dihedral to 0.01°, trans lies below cis and the barrier between is the
    amide bond's (GFN2-xTB: several hundred meV)."""
    pytest.importorskip("tblite")
    from dataclasses import replace

    sys.path.insert(0, str(SCRIPTS))
    try:
        from _rotor import TORSIONS, moving_side, torsion_scan
    finally:
        sys.path.remove(str(SCRIPTS))
    from sciml.active import gfn2_xtb
    from sciml.active.structures import molecule_from_smiles

    start = molecule_from_smiles("CNC(C)=O", 0)
    torsion = TORSIONS["n_methylacetamide"]
    assert moving_side(start, torsion.atoms) == [0, 5, 6, 7]  # the N-methyl carbon and its hydrogens
    ethanol = molecule_from_smiles("CCO", 0)
    assert moving_side(ethanol, TORSIONS["ethanol"].atoms) == [8]  # the hydroxyl H, as the kinetics scan moves
    assert moving_side(ethanol, TORSIONS["ethanol"].atoms[::-1]) == [0, 3, 4, 5]  # reversed: the methyl
    with pytest.raises(ValueError, match="ring"):
        moving_side(molecule_from_smiles("C1CCCCC1", 0), (0, 1, 2, 3))
    scan = torsion_scan(start, gfn2_xtb().factory(), replace(torsion, angles=(180.0, 100.0, 0.0)), fmax=0.05)
    assert scan["angles"] == [180.0, 100.0, 0.0] and min(scan["energies_mev"]) == 0.0
    off = (np.array(scan["relaxed_dihedrals"]) - scan["angles"] + 180) % 360 - 180
    assert np.abs(off).max() < 0.01, scan["relaxed_dihedrals"]
    assert scan["second_minus_first_mev"] > 0 and scan["energies_mev"][0] == 0.0  # trans is the lower well
    assert 300 < scan["barrier_mev"] < 1500 and scan["barrier_mev"] == scan["energies_mev"][1]
