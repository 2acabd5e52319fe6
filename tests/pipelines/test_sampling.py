"""The pipeline's sampling stage: replicas with an equilibration dropped, resumed where a run stopped."""

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms

from sciml.pipelines import SamplingSettings, sample_replicas

SPRING = 2.0  # eV/Å^2


def harmonic(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A harmonic well around the origin for every atom: energy (R,) eV, forces (R, N, 3) eV/Å."""
    return 0.5 * SPRING * (positions**2).sum(dim=(1, 2)), -SPRING * positions


def _start() -> Atoms:
    return Atoms("H2O", positions=[[0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]])


SETTINGS = SamplingSettings(replicas=2, production_ps=0.2, equilibration_ps=0.05, temperature=300, timestep=1.0,
                            interval=10, seed=3)  # fmt: skip


def test_production_drops_the_equilibration_and_holds_every_frame(tmp_path):
    production = sample_replicas(harmonic, _start(), SETTINGS, tmp_path)
    files = sorted(production.glob("replica_*.extxyz"))
    assert [f.name for f in files] == ["replica_000.extxyz", "replica_001.extxyz"]
    frames = ase.io.read(files[0], index=":")
    times = [float(f.info["time_fs"]) for f in frames]
    assert times[0] == pytest.approx(50.0) and times[-1] == pytest.approx(250.0) and len(frames) == 21
    other = ase.io.read(files[1], index=":")
    assert not np.allclose(frames[-1].positions, other[-1].positions)  # independent replicas


def test_a_stopped_run_continues_to_the_same_trajectory(tmp_path):
    whole = sample_replicas(harmonic, _start(), SETTINGS, tmp_path / "whole")
    short = SamplingSettings(**{**SETTINGS.__dict__, "production_ps": 0.1})
    sample_replicas(harmonic, _start(), short, tmp_path / "stopped")  # a run that stopped part way
    resumed = sample_replicas(harmonic, _start(), SETTINGS, tmp_path / "stopped")
    for name in ("replica_000.extxyz", "replica_001.extxyz"):
        expected, got = ase.io.read(whole / name, index=":"), ase.io.read(resumed / name, index=":")
        assert len(got) == len(expected)
        # extxyz keeps 8 decimals, so the resumed run starts from the state rounded to 1e-8 Å
        np.testing.assert_allclose(got[-1].positions, expected[-1].positions, atol=1e-6)
    before = (resumed / "replica_000.extxyz").read_text()
    sample_replicas(harmonic, _start(), SETTINGS, tmp_path / "stopped")  # finished: nothing more runs
    assert (resumed / "replica_000.extxyz").read_text() == before
    assert len(ase.io.read(tmp_path / "stopped" / "md" / "replica_000.extxyz", index=":")) == 26


def test_fewer_replica_files_than_asked_for_is_an_error(tmp_path):
    sample_replicas(harmonic, _start(), SETTINGS, tmp_path)
    more = SamplingSettings(**{**SETTINGS.__dict__, "replicas": 3})
    with pytest.raises(FileNotFoundError, match="fewer replicas than asked for"):
        sample_replicas(harmonic, _start(), more, tmp_path)


def test_replicas_on_posterior_draws_record_their_draw_and_bad_counts_are_refused(tmp_path):
    drawn = SamplingSettings(**{**SETTINGS.__dict__, "replicas": 3, "posterior_samples": 2})
    production = sample_replicas(harmonic, _start(), drawn, tmp_path)
    for r, draw in enumerate([0, 1, 0]):
        frames = ase.io.read(production / f"replica_{r:03d}.extxyz", index=":")
        assert {f.info["posterior_sample"] for f in frames} == {draw}
    for samples in (1, 4, -1):
        with pytest.raises(ValueError, match="posterior_samples must be 0 or between 2 and the replicas"):
            SamplingSettings(replicas=3, posterior_samples=samples)
