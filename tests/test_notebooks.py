"""The notebooks run top to bottom in quick mode (``SCIML_QUICK=1``) through nbmake, asserting the numbers
they show; they are stored with the outputs of a run of their current sources (``scripts/run_notebooks.py``,
full or quick mode, recorded in the notebook), which the documentation renders."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


def check_stored_outputs(*notebooks) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "run_notebooks.py"), "--check", *map(str, notebooks)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


def test_notebooks_are_stored_with_the_outputs_of_a_run_of_their_sources():
    result = check_stored_outputs()
    assert result.returncode == 0, result.stdout + result.stderr
    for notebook in NOTEBOOKS:
        stamp = json.loads(notebook.read_text())["metadata"]["sciml"]
        assert stamp["mode"].split()[0] in ("full", "quick") and stamp["commit"] and stamp["machine"]["cpu"]


def test_an_edited_or_unrun_notebook_fails_the_check(tmp_path):
    notebook = json.loads(NOTEBOOKS[0].read_text())
    edited = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    edited["source"] = ["print('changed after the run')\n"]
    (tmp_path / "edited.ipynb").write_text(json.dumps(notebook))
    del notebook["metadata"]["sciml"]
    (tmp_path / "unrun.ipynb").write_text(json.dumps(notebook))
    result = check_stored_outputs(tmp_path / "edited.ipynb", tmp_path / "unrun.ipynb")
    assert result.returncode == 1
    assert "edited.ipynb: edited after its stored run" in result.stdout
    assert "unrun.ipynb: no stored run" in result.stdout


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_notebook_runs_in_quick_mode(notebook):
    # one OpenMP thread: small models gain nothing from more, and a busy-waiting pool inside the kernel
    # slowed training 30x on a loaded 2-core machine
    env = {**os.environ, "SCIML_QUICK": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbmake"]
    result = subprocess.run(
        [*command, "--nbmake-timeout=300", str(notebook)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-6000:]
