"""Exploration with replicas in one batched call: each replica follows the single run's rules, one replica and
several run the same integrator, an ended replica leaves the batch while the others go on, the thermostat
reaches its temperature, picks are spaced per run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms, units

from sciml.active import Candidate, ExplorationSettings, explore, select_frames
from sciml.uncertainty import UncertaintyModel

WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])


class Springs(UncertaintyModel):
    """Harmonic springs (k eV/Å^2) between all atoms of a structure at the start's distances, and a per-atom force
    uncertainty of ``slope`` times the atom's distance from the origin (eV/Å) plus ``per_call`` times the calls
    so far: an uncertainty the test controls through where a replica sits and when."""

    species = (1, 8)
    cutoff = 4.0

    def __init__(self, reference: Atoms, k: float = 20.0, slope: float = 0.0, per_call: float = 0.0) -> None:
        super().__init__(torch.float64)
        self.register_buffer("lengths", torch.tensor(reference.get_all_distances()))
        self.k, self.slope, self.per_call, self.calls = k, slope, per_call, 0
        self.set_scales(1.0, 1.0)

    def forward(self, batch) -> dict[str, torch.Tensor]:
        self.calls += 1
        positions = batch.pos.reshape(len(batch.natoms), -1, 3)
        distances = (positions[:, :, None] - positions[:, None]).norm(dim=-1)
        stretch = distances - self.lengths.to(distances.dtype)
        energy = 0.25 * self.k * (stretch**2).sum(dim=(1, 2))
        energies = (energy / positions.shape[1]).repeat_interleave(positions.shape[1])
        sigma = self.slope * batch.pos.detach().norm(dim=1) + self.per_call * self.calls
        return {"energy": energy, "energies": energies, "sigma": sigma}

    def spread(self, outputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros_like(outputs["energy"]), outputs["sigma"]


def test_replicas_follow_the_single_runs_rules_step_for_step():
    settings = ExplorationSettings(temperature=50, start_temperature=10, ramp_ps=0.01, hold_ps=0.1, timestep=1.0,
                                   threshold=0.105, stop_factor=3.0, patience_fs=5.0)  # fmt: skip
    model = Springs(WATER, per_call=0.01).eval()  # sigma = 0.01 x calls, the same for every replica
    found = explore(WATER, model, settings, seed=0, replicas=3)
    (single,) = explore(WATER, Springs(WATER, per_call=0.01).eval(), settings)
    # step k is call k + 1 (the first is the start): sigma 0.01 (k + 1) is above 0.105 from step 10, above the
    # upper level 0.315 from step 31, and 5 fs later the run ends
    assert [c.step for c in single.candidates] == list(range(10, 37)) and single.steps == 36
    for replica, run in enumerate(found):  # the same candidates, the same end, each replica's own frames
        assert [c.step for c in run.candidates] == [c.step for c in single.candidates]
        assert run.stopped and not run.broken and run.steps == single.steps
        assert run.max_uncertainty == pytest.approx(single.max_uncertainty)
        assert {c.run for c in run.candidates} == {replica} and run.candidates[0].atoms.calc is None
    assert not np.allclose(found[0].candidates[-1].atoms.positions, found[1].candidates[-1].atoms.positions)


def test_one_replica_runs_the_integrator_of_several_step_for_step():
    """``--exploration-replicas 1`` against 3: replica 0 follows the same trajectory (each replica draws its own
    noise), so the replica count changes how many runs go together, never the dynamics."""
    settings = ExplorationSettings(temperature=300, start_temperature=100, ramp_ps=0.01, hold_ps=0.02, timestep=0.5,
                                   threshold=1.0)  # fmt: skip
    paths = []

    class Recording(Springs):
        def forward(self, batch):
            paths[-1].append(batch.pos.detach().reshape(len(batch.natoms), -1, 3)[0].clone())
            return super().forward(batch)

    for replicas in (1, 3):
        paths.append([])
        explore(WATER, Recording(WATER, k=5.0).eval(), settings, seed=4, replicas=replicas)
    alone, among = torch.stack(paths[0]), torch.stack(paths[1])
    assert alone.shape == among.shape == (settings.steps + 1, 3, 3)
    assert (alone[-1] - alone[0]).abs().max() > 1e-3  # it moved
    assert torch.allclose(alone, among, atol=1e-5)  # float32 model calls, float64 integration


def test_an_ended_replica_leaves_the_batch_and_the_others_run_to_the_end():
    far = WATER.copy()
    far.positions += [30.0, 0.0, 0.0]  # sigma 0.03 eV/Å: above 3 x the threshold from the first step
    settings = ExplorationSettings(temperature=300, start_temperature=300, ramp_ps=0.0, hold_ps=0.05, timestep=0.5,
                                   threshold=0.005, stop_factor=3.0, patience_fs=5.0)  # fmt: skip
    model = Springs(WATER, slope=1e-3).eval()
    near, away, near_again = explore([WATER, far], model, settings, seed=1, replicas=3)
    assert away.stopped and not away.broken and away.steps == 11 and len(away.candidates) == 11
    for run in (near, near_again):  # started next to the origin: sigma about 1e-3, a whole run below
        assert run.below_threshold and run.steps == settings.steps == 100 and 0 < run.max_uncertainty < 0.005
    assert model.calls == 1 + 100  # one batched call per step (and the start), whatever the batch holds


def test_a_broken_replica_ends_without_its_last_frame():
    settings = ExplorationSettings(temperature=300, start_temperature=300, ramp_ps=0.0, hold_ps=0.2, timestep=0.5,
                                   threshold=1e-4, patience_fs=1000.0)  # fmt: skip
    model = Springs(WATER, k=-50.0, slope=1e-3).eval()  # repulsive springs: the molecule flies apart
    (run,) = explore(WATER, model, settings, seed=2, replicas=1)
    assert run.broken and run.stopped and len(run.candidates) == run.steps - 1 < settings.steps


def test_the_replicas_thermostat_holds_the_target_temperature():
    molecule = Atoms("OH2OH2", positions=[[0, 0, 0], [0.97, 0, 0], [-0.25, 0.93, 0],
                                          [3, 0, 0], [3.97, 0, 0], [2.75, 0.93, 0]])  # fmt: skip
    settings = ExplorationSettings(temperature=400, start_temperature=400, ramp_ps=0.0, hold_ps=1.0, timestep=0.5,
                                   friction=0.05, threshold=1.0)  # fmt: skip
    kinetic = []

    class Recording(Springs):
        def forward(self, batch):
            kinetic.append(batch.pos.detach().clone())
            return super().forward(batch)

    explore(molecule, Recording(molecule, k=5.0).eval(), settings, seed=3, replicas=8)
    positions = torch.stack(kinetic[1:]).double()  # (steps, R N, 3)
    masses = torch.tensor(molecule.get_masses()).repeat(8)
    velocities = (positions[1:] - positions[:-1]) / (0.5 * units.fs)  # Å per ASE time unit, between steps
    kinetic_energy = 0.5 * (masses[None, :, None] * velocities**2).sum(dim=(1, 2)) / 8  # per replica, eV
    temperature = 2 * kinetic_energy[len(kinetic_energy) // 2 :].mean() / (3 * 6 - 3) / units.kB
    # velocities from the positions of successive steps (soft springs: a 28 fs period), 8 x 0.5 ps: within 10 %
    assert temperature.item() == pytest.approx(400, rel=0.1)


def test_picks_are_spaced_within_a_run_not_across_runs():
    frame = WATER.copy()
    candidates = [Candidate(10, 5.0, 300.0, 0.5, frame, run=0), Candidate(10, 5.0, 300.0, 0.4, frame, run=1),
                  Candidate(12, 6.0, 300.0, 0.6, frame, run=0)]  # fmt: skip
    picked = select_frames(candidates, cap=5, spacing_fs=2.0)
    assert [(c.run, c.step) for c in picked] == [(0, 12), (1, 10)]  # (0, 10) is 1 fs from the pick at 6 fs


def test_replicas_below_one_are_refused():
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        ExplorationSettings(replicas=0)
