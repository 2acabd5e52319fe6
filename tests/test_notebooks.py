"""The notebooks run top to bottom in quick mode (``SCIML_QUICK=1``) through nbmake, asserting the numbers
they show; they are stored without outputs."""

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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


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
