"""The benchmarks whose smoke runs take minutes (a DFT oracle, several trainings and learning runs), in their own
file so that `pytest -n 2 --dist loadfile` runs them beside tests/test_benchmarks.py, not after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, subprocess_threads
from tests.test_benchmarks import ELSEWHERE, SCRIPTS, smoke_run


def test_the_dft_benchmark_runs_both_stages_in_its_smoke_mode(tmp_path):
    """bench_dft.py --smoke: the oracle stage (water, STO-3G) and the routes (water's DFT sets made, a passive
    model, a difference model and its distillation, both two-level learning runs, the composite of GFN2-xTB and
    the difference run's final difference model), each route's record and the oracle's file."""
    assert ELSEWHERE["bench_dft.py"] == "tests/test_benchmark_routes.py"
    record = smoke_run("bench_dft.py", tmp_path)
    routes = record["results"]["routes"]
    assert sorted(routes) == ["delta_8", "distill_8", "passive_8", "two_level", "two_level_composite",
                              "two_level_difference"]  # fmt: skip
    assert routes["two_level"]["dft_calls"] > 0 and routes["two_level"]["curve"]
    difference = routes["two_level_difference"]
    assert difference["dft_calls"] > 0 and difference["held_out_check"]["frames"] >= 2
    composite = routes["two_level_composite"]
    assert composite["dft_calls"] == difference["dft_calls"] and composite["held_out_check"]["frames"] >= 2
    assert composite["model"].endswith("composite.ckpt")
    assert routes["distill_8"]["dft_calls"] == 8
    assert all(len(route["test"]) == 2 for route in routes.values())
    assert json.loads((tmp_path / "dft_oracle.json").read_text())["result"]["oracle_speedup_vs_plain_pyscf"] > 0


def test_the_accuracy_benchmark_over_molecules_runs_in_its_smoke_mode(tmp_path):
    """``bench_accuracy.py --molecules``: data made with aspirin's recipe for another molecule (ethanol, short
    runs), the defaults trained on it, the table and the ratios' RESULT line (NaN without MACE)."""
    command = [sys.executable, str(SCRIPTS / "bench_accuracy.py"), "--smoke", "--molecules", "--results",
               str(tmp_path), "--out", str(tmp_path / "work")]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": subprocess_threads(), "MPLBACKEND": "Agg"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert result.stdout.strip().splitlines()[-1].startswith("RESULT force_mae_ratio_vs_mace_mean=")
    record = json.loads((tmp_path / "accuracy_molecules_40min_smoke.json").read_text())
    run = record["results"]["ethanol"]["e2former_seed0"]
    assert run["epochs"] == 1 and len(run["test"]) == 2 and record["result"]["systems"] == 1
    assert all(half["frames"] > 0 and half["force_mae_mev_per_a"] > 0 for half in run["test"].values())
