"""The replica MD driver: NVE energy conservation, the canonical kinetic-energy distribution (3N - 3 degrees of
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
from sciml.calculators.replica_md import ReplicaSettings, degrees_of_freedom, run_replicas
from sciml.calculators.replicas import BatchedPotential
from sciml.models import E2Former

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
    run = run_replicas(SpringChain(start), start, 4, ReplicaSettings("verlet", timestep=0.5, steps=2000,
                                                                       temperature=300, interval=20))  # fmt: skip
    total = run["total_energy"]
    kT = units.kB * 300
    # 2000 steps of ~1/30 of the fastest period: bounded fluctuation, no drift
    assert np.abs(total - total[0]).max() < 2e-3 * kT
    assert abs(np.polyfit(np.arange(len(total)), total.mean(1), 1)[0]) * len(total) < 2e-4 * kT


def test_langevin_samples_the_canonical_kinetic_energy_and_harmonic_averages():
    start = chain()
    settings = ReplicaSettings("langevin", timestep=1.0, steps=4000, temperature=500, friction=0.05, interval=100)
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
    settings = ReplicaSettings("langevin", timestep=1.0, steps=40, temperature=300, friction=0.02, interval=10, seed=3)
    whole = run_replicas(SpringChain(start), start, 3, settings, tmp_path / "whole")
    again = run_replicas(SpringChain(start), start, 3, settings)
    assert torch.equal(whole["state"].positions, again["state"].positions)
    assert not torch.allclose(whole["state"].positions[0], whole["state"].positions[1])
    half = ReplicaSettings("langevin", timestep=1.0, steps=20, temperature=300, friction=0.02, interval=10, seed=3)
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
    settings = ReplicaSettings("langevin", timestep=1.0, steps=0, temperature=300, interval=10)
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
