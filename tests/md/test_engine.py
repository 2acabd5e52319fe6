"""The MD engine: NVE energy conservation, the canonical kinetic-energy distribution (3N - 3 degrees of
freedom), exact configurational averages of a harmonic system, reproducible and resumable runs; and the batched
potential against the ASE calculator, replica by replica."""

from __future__ import annotations

import ase.io
import numpy as np
import pytest
import torch
from ase import Atoms, units
from ase.build import bulk, molecule
from scipy import stats

from sciml.calculators import SciMLCalculator
from sciml.calculators.replicas import BatchedPotential
from sciml.md import MDSettings, run_replicas
from sciml.md.integrators import degrees_of_freedom
from sciml.models import E2Former
from sciml.testing import randomise_output_head

SPRING = 2.0  # eV/Å^2


class SpringChain:
    """E = k/2 sum_i |x_{i+1} - x_i - d_i|^2: vector springs between neighbours in a chain, translation
    invariant; the N - 1 spring vectors are independent Gaussians with variance kT/k per component."""

    def __init__(self, start: Atoms) -> None:
        self.rest = torch.tensor(np.diff(start.positions, axis=0))

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        stretch = positions[:, 1:] - positions[:, :-1] - self.rest
        energy = 0.5 * SPRING * (stretch**2).sum(dim=(1, 2))
        forces = torch.zeros_like(positions)
        forces[:, 1:] -= SPRING * stretch
        forces[:, :-1] += SPRING * stretch
        return energy, forces


def chain(atoms: int = 5) -> Atoms:
    return Atoms(f"C{atoms}", positions=[[1.5 * i, 0.0, 0.0] for i in range(atoms)])


def test_velocity_verlet_conserves_energy():
    start = chain()
    run = run_replicas(SpringChain(start), start, 4, MDSettings("nve", timestep=0.5, steps=2000,
                                                                  temperature=300, interval=20))  # fmt: skip
    total = run["total_energy"]
    kT = units.kB * 300
    # 2000 steps of ~1/30 of the fastest period: bounded fluctuation, no drift
    assert np.abs(total - total[0]).max() < 2e-3 * kT
    assert abs(np.polyfit(np.arange(len(total)), total.mean(1), 1)[0]) * len(total) < 2e-4 * kT


def test_langevin_samples_the_canonical_kinetic_energy_and_harmonic_averages():
    start = chain()
    settings = MDSettings("nvt-langevin", timestep=1.0, steps=4000, temperature=500, friction=0.05, interval=100)
    run = run_replicas(SpringChain(start), start, 64, settings)
    kT = units.kB * 500
    dof = degrees_of_freedom(5, True)  # 12: the centre of mass does not move
    kinetic = run["temperature"][1:] * dof * units.kB / 2  # records 100 fs apart: 5x the thermostat's 20 fs
    # the kinetic energy of 12 degrees of freedom is Gamma(6, kT) distributed (2560 samples; KS p > 1e-3)
    assert stats.kstest(kinetic.ravel(), stats.gamma(dof / 2, scale=kT).cdf).pvalue > 1e-3
    # with 3N = 15 degrees of freedom it would be rejected: the COM is really fixed
    assert stats.kstest(kinetic.ravel(), stats.gamma(15 / 2, scale=kT).cdf).pvalue < 1e-6
    # harmonic: <E_pot> = (N - 1) 3/2 kT exactly for BAOAB; per-replica means are independent samples
    per_replica = run["potential_energy"][1:].mean(0) / (6 * kT)
    assert abs(per_replica.mean() - 1) < 4 * per_replica.std(ddof=1) / np.sqrt(64)
    assert abs(per_replica.mean() - 1) < 0.03


def test_runs_are_reproducible_replicas_differ_and_a_resumed_run_continues_exactly(tmp_path):
    start = chain()
    settings = MDSettings("nvt-langevin", timestep=1.0, steps=40, temperature=300, friction=0.02, interval=10, seed=3)
    whole = run_replicas(SpringChain(start), start, 3, settings, tmp_path / "whole")
    again = run_replicas(SpringChain(start), start, 3, settings)
    assert torch.equal(whole["state"].positions, again["state"].positions)
    assert not torch.allclose(whole["state"].positions[0], whole["state"].positions[1])
    half = MDSettings("nvt-langevin", timestep=1.0, steps=20, temperature=300, friction=0.02, interval=10, seed=3)
    run_replicas(SpringChain(start), start, 3, half, tmp_path / "split")
    with open(tmp_path / "split" / "replica_002.extxyz", "a") as handle:
        handle.write("5\nstep=30 half a frame\nC 0.0")  # killed while writing the next record
    resumed = run_replicas(SpringChain(start), start, 3, half, tmp_path / "split", resume=True)
    assert resumed["steps"] == 20 and resumed["state"].step == 40
    # positions and momenta go through the extxyz text (8 decimals): equal to that precision
    assert torch.allclose(resumed["state"].positions, whole["state"].positions, atol=1e-6)
    frames = ase.io.read(tmp_path / "split" / "replica_002.extxyz", index=":")
    assert [frame.info["step"] for frame in frames] == [0, 10, 20, 30, 40]
    assert frames[-1].get_momenta().shape == (5, 3) and frames[-1].get_forces().shape == (5, 3)
    with pytest.raises(FileExistsError, match="already holds replica trajectories"):
        run_replicas(SpringChain(start), start, 3, half, tmp_path / "split")


def test_replicas_take_several_start_structures_in_turn_and_refuse_other_atoms(tmp_path):
    first, second = chain(), chain()
    second.positions[:, 1] += 0.3  # another conformer of the same atoms
    settings = MDSettings("nvt-langevin", timestep=1.0, steps=0, temperature=300, interval=10)
    run_replicas(SpringChain(first), [first, second], 3, settings, tmp_path)
    starts = [ase.io.read(tmp_path / f"replica_{r:03d}.extxyz", index=0).positions for r in range(3)]
    assert np.allclose(starts[0], first.positions) and np.allclose(starts[2], first.positions)
    assert np.allclose(starts[1], second.positions)
    with pytest.raises(ValueError, match="same atoms in the same order"):
        run_replicas(SpringChain(first), [first, chain(4)], 2, settings)


@pytest.mark.parametrize("system", ["molecule", "crystal"])
def test_the_batched_potential_equals_the_calculator_for_each_replica(system):
    torch.manual_seed(0)
    atoms = molecule("CH3CH2OH") if system == "molecule" else bulk("Cu", "fcc", a=3.6, cubic=True).repeat(2)
    model = E2Former(sorted(set(atoms.numbers.tolist())), cutoff=3.0, channels=8, layers=1).double().eval()
    rng = np.random.default_rng(0)
    positions = atoms.positions[None] + rng.normal(scale=0.1, size=(3, len(atoms), 3))
    positions[2] += 3.6 * np.array([1.0, 0.0, 0.0])  # a whole-cell translation: wrapped for the crystal
    potential = BatchedPotential(model, atoms.numbers, atoms.cell[:], atoms.pbc, dtype="float64")
    energy, forces = potential(torch.tensor(positions))
    calculator = SciMLCalculator(model, dtype="float64")
    for r in range(3):
        replica = atoms.copy()
        replica.positions = positions[r]
        replica.calc = calculator
        assert float(energy[r]) == pytest.approx(replica.get_potential_energy(), abs=1e-10)
        np.testing.assert_allclose(forces[r].numpy(), replica.get_forces(), atol=1e-10)
    before = potential.rebuilds
    potential(torch.tensor(positions + 0.01))  # within the skin: lists kept
    assert potential.rebuilds == before


class WatchedChain(SpringChain):
    """The spring chain with a per-atom force uncertainty: each atom's distance from the origin x 0.01 eV/Å²."""

    def __call__(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.latest = positions
        return super().__call__(positions)

    def forces_uncertainty(self) -> torch.Tensor:
        return 0.01 * self.latest.norm(dim=-1)


def test_a_replica_above_the_threshold_stops_with_its_frame_written_and_the_others_go_on(tmp_path):
    near, far = chain(), chain()
    far.positions[:, 0] += 20.0  # sigma 0.2 eV/Å and more: above the threshold from the start
    settings = MDSettings("nvt-langevin", timestep=1.0, steps=23, temperature=300, interval=10, seed=1,
                          uncertainty_threshold=0.1, stop_when_uncertain=True)  # fmt: skip
    run = run_replicas(WatchedChain(near), [near, far], 2, settings, tmp_path, log=tmp_path / "md.log")
    assert run["stopped"] == ["finished", "uncertain"] and run["uncertain_steps"] == [[], [1]]
    assert run["state"].replicas == [0] and run["state"].step == 23
    steps = [[frame.info["step"] for frame in ase.io.read(tmp_path / f"replica_{r:03d}.extxyz", index=":")]
             for r in range(2)]  # fmt: skip
    assert steps == [[0, 10, 20], [0, 1]]  # the frame it stopped at is kept
    assert 0.2 < run["max_force_uncertainty"][1] < 0.3 and run["max_force_uncertainty"][0] < 0.1
    assert np.isnan(run["temperature"][1:, 1]).all() and np.isfinite(run["temperature"][:, 0]).all()
    lines = (tmp_path / "md.log").read_text().splitlines()
    assert lines[0].startswith("# step") and len(lines) == 1 + 2 + 1 + 1  # records 0 (both), 10 and 20 (one)


def test_the_callers_rules_end_replicas_and_an_interrupted_run_keeps_its_frames(tmp_path):
    start = chain()
    settings = MDSettings("nve", timestep=0.5, steps=50, temperature=300, interval=5)

    def end_replica_one_at_step_7(state, sigma):
        assert sigma is None  # the uncertainty is not watched
        return [row for row, replica in enumerate(state.replicas) if not (replica == 1 and state.step >= 7)]

    def interrupt_at_step_30(record):
        if record["step"] == 30:
            raise KeyboardInterrupt

    run = run_replicas(SpringChain(start), start, 3, settings, tmp_path, on_step=end_replica_one_at_step_7,
                       on_record=interrupt_at_step_30)  # fmt: skip
    assert run["stopped"] == ["interrupted", "ended", "interrupted"] and run["state"].step == 30
    assert run["state"].replicas == [0, 2] and run["steps"] == 30
    written = [len(ase.io.read(tmp_path / f"replica_{r:03d}.extxyz", index=":")) for r in range(3)]
    assert written == [7, 2, 7]  # steps 0-30 every 5; replica 1 left at step 7


def test_the_engine_and_ases_velocity_verlet_run_the_same_trajectory(tmp_path):
    """NVE from the same positions and momenta: the engine (R = 1) and ASE's ``VelocityVerlet`` with the calculator
    agree step for step (float64): one integrator, whichever path a command takes."""
    from ase.md.verlet import VelocityVerlet

    torch.manual_seed(0)
    atoms = molecule("CH3CH2OH")
    model = randomise_output_head(E2Former([1, 6, 8], cutoff=3.0, channels=8, layers=1)).double().eval()
    atoms.set_momenta(np.random.default_rng(1).normal(scale=0.3, size=(len(atoms), 3)))
    atoms.info["step"] = 0
    ase.io.write(tmp_path / "replica_000.extxyz", atoms)  # a run to resume, with its momenta
    start = ase.io.read(tmp_path / "replica_000.extxyz")
    settings = MDSettings("nve", timestep=0.5, steps=20, interval=20, fix_com=False)
    potential = BatchedPotential(model, atoms.numbers, dtype="float64")
    engine = run_replicas(potential, start, 1, settings, tmp_path, resume=True)
    start.calc = SciMLCalculator(model, dtype="float64")
    VelocityVerlet(start, 0.5 * units.fs).run(20)
    assert np.abs(start.positions - atoms.positions).max() > 1e-3  # it moved
    np.testing.assert_allclose(engine["state"].positions[0].numpy(), start.positions, atol=1e-10)
    np.testing.assert_allclose(engine["state"].velocities[0].numpy() * start.get_masses()[:, None],
                               start.get_momenta(), atol=1e-10)  # fmt: skip
