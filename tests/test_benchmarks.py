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
    "bench_kinetics.py": ("kinetics", ["--work", "{tmp}/work"]),
    "bench_dft.py": ("dft_oracle", ["--work", "{tmp}/work"]),
}


def test_every_benchmark_script_has_a_smoke_run():
    assert sorted(p.name for p in SCRIPTS.glob("bench_*.py")) == sorted(SMOKE)


@pytest.mark.parametrize("script", sorted(SMOKE), ids=[s.removesuffix(".py") for s in sorted(SMOKE)])
def test_benchmark_smoke_run_writes_results_with_provenance(script, tmp_path):
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
