"""`sciml serve` as an i-PI client, driven by the real `i-pi` server (dev extra): NVE conserves energy like
ASE's velocity Verlet does, and a 4-bead path-integral NVT run completes. Every process is bounded by a
timeout and killed, and its socket removed, whatever happens."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import ase.io
import numpy as np
import pytest

from sciml.calculators import SciMLCalculator
from sciml.md import MDSettings, run_ase_md
from tests.conftest import ROOT

pytest.importorskip("ipi")
CONFIGS = ROOT / "configs" / "md"


def run_ipi(config: str, folder: Path, checkpoint: Path, steps: int) -> np.ndarray:
    """Run i-PI on ``configs/md/<config>`` (socket and step count changed) with `sciml serve` as its client;
    returns the rows of simulation.out."""
    name = f"sciml_test_{os.getpid()}_{config.split('.')[0]}"
    text = (CONFIGS / config).read_text().replace("<address> sciml </address>", f"<address> {name} </address>")
    text = text.replace("<total_steps> 200 </total_steps>", f"<total_steps> {steps} </total_steps>")
    text = text.replace("<total_steps> 100 </total_steps>", f"<total_steps> {steps} </total_steps>")
    (folder / "input.xml").write_text(text)
    shutil.copy(CONFIGS / "ethanol.xyz", folder / "ethanol.xyz")
    server = subprocess.Popen([shutil.which("i-pi") or "i-pi", "input.xml"], cwd=folder, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        client = subprocess.run(
            [sys.executable, "-m", "sciml", "serve", "--checkpoint", str(checkpoint), "--structure", "ethanol.xyz",
             "--ipi", f"unix:{name}", "--wait", "60"],
            cwd=folder, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        log, _ = server.communicate(timeout=60)
    finally:
        server.kill()
        Path(f"/tmp/ipi_{name}").unlink(missing_ok=True)
    assert client.returncode == 0, client.stderr[-2000:]
    assert "Exiting cleanly" in log, log[-2000:]
    return np.loadtxt(folder / "simulation.out", ndmin=2)


def test_ipi_nve_conserves_energy_like_ase(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    rows = run_ipi("ipi_nve.xml", tmp_path, checkpoint, steps=100)
    assert rows[-1, 0] == 100
    atoms = ase.io.read(CONFIGS / "ethanol.xyz")
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    atoms.calc = calculator
    # eV through atomic units and back (i-PI and ASE use different CODATA constants; 9 digits printed)
    assert rows[0, 4] == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
    conserved = rows[:, 2] / len(atoms)
    ase_run = run_ase_md(atoms, calculator, MDSettings("nve", timestep=0.5, steps=100, interval=5))
    ase_conserved = ase_run["total_energy"] / len(atoms)
    ipi_excursion = np.abs(conserved - conserved[0]).max()
    ase_excursion = np.abs(ase_conserved - ase_conserved[0]).max()
    assert ipi_excursion < 3 * ase_excursion + 2e-5, (ipi_excursion, ase_excursion)
    assert ipi_excursion < 1e-3  # eV/atom over 50 fs


def test_ipi_path_integral_nvt_with_four_beads(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    rows = run_ipi("ipi_pimd.xml", tmp_path, checkpoint, steps=20)
    assert rows[-1, 0] == 20 and np.all(np.isfinite(rows))
    assert len(list(tmp_path.glob("simulation.pos_*.xyz"))) == 4  # one trajectory per bead
