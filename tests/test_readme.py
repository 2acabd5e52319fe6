"""The README's Python examples run as printed (from the repository root, in a fresh process) and do what they
say; the README stays a landing page."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, subprocess_threads

README = (ROOT / "README.md").read_text()
CHECKS = {  # appended to each example: what it claims, checked on its own variables
    "potential": (
        "import numpy as np\n"
        "frames = read('data/ethanol_gfn2.extxyz', index='460:500')  # test split: the last 10 %\n"
        "errors = []\n"
        "for frame in frames:\n"
        "    reference = frame.get_forces()\n"
        "    frame.calc = atoms.calc\n"
        "    errors.append(np.abs(frame.get_forces() - reference).mean())\n"
        "print('FORCE_MAE', float(np.mean(errors)), 'MEAN_ABS_FORCE', float(np.abs(reference).mean()))\n"
        "assert np.isfinite(atoms.get_potential_energy()) and atoms.get_forces().shape == (9, 3)\n"
    ),
    "koopman": (
        "import numpy as np\n"
        "exact = system.singular_values(lagtime=5, k=4)\n"
        "assert np.abs(np.asarray(estimator.singular_values)[:3] - exact[:3]).max() < 0.05, estimator.singular_values\n"
        "assert abs(float(estimator.timescales(time_step=0.1)[1]) - 1.0) < 0.15\n"
    ),
}


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", README, re.S)
    assert match, f"no example '{name}' in the README"
    return match.group(1)


def test_readme_is_a_landing_page():
    assert len(README.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#]+)[^)]*\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_readme_example_runs_and_does_what_it_says(name):
    code = example(name) + CHECKS[name]
    environment = {**os.environ, "OMP_NUM_THREADS": subprocess_threads()}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900, env=environment
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    if name == "potential":  # trained: the force error is well below the forces themselves
        mae, mean_force = (float(x) for x in re.search(r"FORCE_MAE (\S+) MEAN_ABS_FORCE (\S+)", result.stdout).groups())
        assert mae < 0.35 * mean_force, result.stdout[-2000:]
