"""`sciml md` on the engine and on ASE's integrators: NVE, Langevin and NPT runs, outputs refused or continued,
clean stops, exact restarts."""

from __future__ import annotations

import ase.io
import numpy as np
import pytest
from ase.build import molecule

from sciml.calculators import SciMLCalculator
from sciml.cli import main
from sciml.md import MDSettings, run_ase_md

ETHANOL = "data/ethanol_gfn2.extxyz"


@pytest.fixture
def md_args(quickstart_run, tmp_path, monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    _, checkpoint = quickstart_run
    trajectory = tmp_path / "md.traj"
    return ["md", "--checkpoint", str(checkpoint), "--structure", ETHANOL, "--dtype", "float64",
            "--output", str(trajectory), "--interval", "5", "--no-progress", "--engine", "ase"]  # fmt: skip


def test_engine_nve_writes_trajectory_and_log_refuses_to_overwrite_and_restarts_exactly(md_args, tmp_path, capsys):
    engine_args = [*md_args[:7], "--output", str(tmp_path / "md"), "--interval", "5", "--no-progress"]
    main([*engine_args, "--steps", "20"])
    out = capsys.readouterr().out
    assert "sciml engine" in out and "steps/s" in out and "ns/day" in out and "energy drift" in out
    frames = ase.io.read(tmp_path / "md" / "replica_000.extxyz", index=":")
    assert [f.info["step"] for f in frames] == [0, 5, 10, 15, 20]
    log = (tmp_path / "md" / "md.log").read_text().splitlines()
    assert log[0].split()[:3] == ["#", "step", "time[ps]"] and len(log) == 6
    with pytest.raises(FileExistsError, match="already holds replica trajectories"):
        main([*engine_args, "--steps", "20"])
    main([*engine_args, "--steps", "20", "--restart"])
    continued = ase.io.read(tmp_path / "md" / "replica_000.extxyz", index=":")
    assert [f.info["step"] for f in continued] == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    assert len((tmp_path / "md" / "md.log").read_text().splitlines()) == 10  # appended, no second header
    main([*engine_args[:5], "--output", str(tmp_path / "straight"), "--no-progress", "--interval", "5",
          "--steps", "40"])  # fmt: skip
    straight = ase.io.read(tmp_path / "straight" / "replica_000.extxyz", index=-1)
    # velocity Verlet in float64; the restart went through the extxyz text (8 decimals)
    assert np.abs(straight.positions - continued[-1].positions).max() < 1e-6
    main([*engine_args, "--steps", "5", "--overwrite"])
    assert len(ase.io.read(tmp_path / "md" / "replica_000.extxyz", index=":")) == 2


def test_ase_nve_writes_trajectory_and_log_refuses_to_overwrite_and_restarts_exactly(md_args, tmp_path, capsys):
    main([*md_args, "--steps", "20"])
    out = capsys.readouterr().out
    assert "steps/s" in out and "ns/day" in out and "energy drift" in out
    frames = ase.io.read(tmp_path / "md.traj", index=":")
    assert [f.info["md_step"] for f in frames] == [0, 5, 10, 15, 20]
    log = (tmp_path / "md.log").read_text().splitlines()
    assert log[0].split()[:2] == ["Time[ps]", "Etot/N[eV]"] and len(log) == 6
    with pytest.raises(FileExistsError, match="md.traj' already exists"):
        main([*md_args, "--steps", "20"])
    main([*md_args, "--steps", "20", "--restart"])
    continued = ase.io.read(tmp_path / "md.traj", index=":")
    assert [f.info["md_step"] for f in continued] == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    main([*md_args[:7], "--output", str(tmp_path / "straight.traj"), "--interval", "5", "--no-progress",
          "--engine", "ase", "--steps", "40"])  # fmt: skip
    straight = ase.io.read(tmp_path / "straight.traj", index=-1)
    assert np.abs(straight.positions - continued[-1].positions).max() < 1e-10  # velocity Verlet, float64
    assert len((tmp_path / "md.log").read_text().splitlines()) == 11  # appended


def test_static_shapes_option_runs_the_same_trajectory(md_args, tmp_path):
    """``--static-shapes``: fixed-capacity neighbour buffers (padding pairs beyond the cutoff), same MD."""
    main([*md_args, "--steps", "10"])
    main([*md_args[:7], "--output", str(tmp_path / "static.traj"), "--interval", "5", "--no-progress",
          "--engine", "ase", "--steps", "10", "--static-shapes"])  # fmt: skip
    plain, static = ase.io.read(tmp_path / "md.traj", index=-1), ase.io.read(tmp_path / "static.traj", index=-1)
    assert np.abs(plain.positions - static.positions).max() < 1e-12


def test_a_stopped_run_keeps_its_frames(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    atoms = ase.io.read(ETHANOL)
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")

    def stop_at_ten(state):
        if state["step"] == 10:
            raise KeyboardInterrupt

    settings = MDSettings("nvt-langevin", steps=100, interval=5)
    result = run_ase_md(atoms, calculator, settings, tmp_path / "md.traj", on_record=stop_at_ten)
    assert result["stopped"] == "interrupted"
    assert [f.info["md_step"] for f in ase.io.read(tmp_path / "md.traj", index=":")] == [0, 5, 10]
    assert not list(tmp_path.glob(".*partial*"))


def test_npt_changes_the_volume_of_a_periodic_box_and_needs_one(quickstart_run, tmp_path):
    _, checkpoint = quickstart_run
    calculator = SciMLCalculator.from_checkpoint(checkpoint, dtype="float64")
    box = molecule("CH3CH2OH")
    box.center(vacuum=2.5)
    box.pbc = True
    start = box.get_volume()
    run_ase_md(box, calculator, MDSettings("npt", steps=30, timestep=0.5, pressure=1e4, pdamp=20.0))
    assert box.get_volume() != pytest.approx(start, rel=1e-6) and np.isfinite(box.get_volume())
    with pytest.raises(ValueError, match="npt needs a cell periodic in all three directions"):
        run_ase_md(ase.io.read(ETHANOL), calculator, MDSettings("npt", steps=1))
    with pytest.raises(ValueError, match="unknown ensemble 'nvt'"):
        MDSettings("nvt")


def test_replicas_run_together_write_one_trajectory_each_and_resume(md_args, tmp_path, capsys):
    folder = tmp_path / "replicas"
    replica_args = [*md_args[:7], "--output", str(folder), "--interval", "5", "--no-progress", "--replicas", "3",
                    "--ensemble", "nvt-langevin", "--temperature", "300"]  # fmt: skip
    main([*replica_args, "--steps", "10"])
    assert "3 replicas of 9 atoms, 10 steps" in capsys.readouterr().out and (folder / "md.log").exists()
    frames = [ase.io.read(folder / f"replica_{r:03d}.extxyz", index=":") for r in range(3)]
    assert [[f.info["step"] for f in replica] for replica in frames] == [[0, 5, 10]] * 3
    assert not np.allclose(frames[0][-1].positions, frames[1][-1].positions)  # independent noise
    # each frame's energy is the model's at its positions (the batched call against the ASE calculator)
    calculator = SciMLCalculator.from_checkpoint(md_args[2], dtype="float64")
    check = frames[2][-1].copy()
    check.calc = calculator
    assert check.get_potential_energy() == pytest.approx(frames[2][-1].get_potential_energy(), abs=1e-6)
    with pytest.raises(FileExistsError, match="already holds replica trajectories"):
        main([*replica_args, "--steps", "10"])
    main([*replica_args, "--steps", "5", "--restart"])
    assert [f.info["step"] for f in ase.io.read(folder / "replica_001.extxyz", index=":")] == [0, 5, 10, 15]
    with pytest.raises(SystemExit, match="--replicas runs on the engine"):
        main([*replica_args[:-4], "--ensemble", "npt", "--steps", "5"])
    with pytest.raises(SystemExit, match="the engine runs nve or nvt-langevin; --engine ase runs npt"):
        main([*replica_args[:-4], "--ensemble", "npt", "--engine", "sciml", "--steps", "5"])
