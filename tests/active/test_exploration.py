"""Exploration runs: the ramp, candidates above the threshold, the stop, and the selection of frames."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.lj import LennardJones

from sciml.active import Candidate, ExplorationSettings, explore, select_frames
from sciml.calculators.calculator_potential import CalculatorPotential


class RisingUncertainty(LennardJones):
    """Lennard-Jones forces, and a per-atom force uncertainty of 0.01 eV/Å times the number of calls so far."""

    def calculate(self, *args, **kwargs):
        super().calculate(*args, **kwargs)
        self.calls = getattr(self, "calls", 0) + 1
        self.results["forces_uncertainty"] = np.full(len(self.atoms), 0.01 * self.calls)


def explore_with(calculator, atoms: Atoms, settings: ExplorationSettings, seed: int = 0):
    """One exploration run of ``atoms`` with an ASE calculator that reports ``forces_uncertainty``."""
    (found,) = explore(atoms, CalculatorPotential(lambda: calculator, atoms), settings, seed=seed)
    return found


def argon_trimer() -> Atoms:
    return Atoms("Ar3", positions=[[0, 0, 0], [3.8, 0, 0], [1.9, 3.3, 0]])


def test_candidates_are_the_steps_above_the_threshold_and_the_run_ends_after_the_patience():
    settings = ExplorationSettings(temperature=50, start_temperature=10, ramp_ps=0.01, hold_ps=0.1, timestep=1.0,
                                   threshold=0.1, stop_factor=3.0, patience_fs=5.0)  # fmt: skip
    found = explore_with(RisingUncertainty(sigma=3.4, epsilon=0.0104), argon_trimer(), settings, seed=0)
    # step k is the calculator's call k + 1 (the first call is the start), so sigma = 0.01 (k + 1): above 0.1
    # from step 10, above the upper level 0.3 from step 30, and 5 fs later the run ends
    assert [c.step for c in found.candidates] == list(range(10, 36))
    assert found.stopped and not found.broken and found.steps == 35
    assert found.max_uncertainty == pytest.approx(0.36) and not found.below_threshold
    assert found.candidates[0].temperature == pytest.approx(50.0)  # the ramp ended at step 10
    assert found.candidates[0].atoms.calc is None


class PullApart(LennardJones):
    """20 eV/Å pulling the two atoms of a dimer apart, and a small uncertainty."""

    def calculate(self, *args, **kwargs):
        super().calculate(*args, **kwargs)
        self.results["forces"] = np.array([[-20.0, 0, 0], [20.0, 0, 0]])
        self.results["forces_uncertainty"] = np.full(2, 0.05)


def test_a_run_whose_molecule_breaks_ends_there_without_that_frame():
    dimer = Atoms("C2", positions=[[0, 0, 0], [1.3, 0, 0]])  # bonded: 1.3 Å < 1.2 x (0.76 + 0.76)
    settings = ExplorationSettings(ramp_ps=0.0, hold_ps=0.2, timestep=0.5, threshold=0.01)
    found = explore_with(PullApart(), dimer, settings)
    assert found.stopped and found.broken and 5 < found.steps < 100
    assert len(found.candidates) == found.steps - 1  # every frame before the break, not the broken one


def test_a_run_below_the_threshold_counts_as_converged():
    settings = ExplorationSettings(ramp_ps=0.0, hold_ps=0.02, timestep=1.0, threshold=1.0)
    found = explore_with(RisingUncertainty(sigma=3.4, epsilon=0.0104), argon_trimer(), settings)
    assert found.below_threshold and found.steps == 20 and not found.stopped


def test_the_thermostat_ramps_linearly_then_holds():
    settings = ExplorationSettings(temperature=500, start_temperature=100, ramp_ps=1.0, hold_ps=1.0, timestep=0.5)
    assert settings.steps == 4000
    assert [settings.thermostat_temperature(s) for s in (0, 1000, 2000, 3000)] == [100, 300, 500, 500]


def test_selection_takes_the_most_uncertain_frames_spaced_in_time_up_to_the_cap():
    values = [(10, 0.3), (12, 0.5), (100, 0.4), (104, 0.2), (300, 0.25), (500, float("nan"))]
    frames = [Candidate(step, step * 0.5, 300.0, value, argon_trimer()) for step, value in values]
    picked = select_frames(frames, cap=3, spacing_fs=10.0)
    # NaN (a blown-up model) first, then 0.5; 0.3 is 1 fs from 0.5, so 0.4 is next; the cap stops there
    assert [c.step for c in picked] == [12, 100, 500]
    assert [c.step for c in select_frames(frames, cap=10, spacing_fs=0.0)] == [10, 12, 100, 104, 300, 500]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="threshold must be > 0"):
        ExplorationSettings(threshold=0.0)


def test_thermal_motion_keeps_the_covalent_bonds_of_the_reference_md():
    """GFN2-xTB aspirin MD at 600 K: no bond forms or breaks, so every frame has the 21 bonds of the first (a
    neighbour-list skin would add 1-3 pairs near the cutoff that come and go with the thermal motion)."""
    import ase.io

    from sciml.active.exploration import covalent_bonds
    from tests.conftest import ROOT

    frames = ase.io.read(ROOT / "data" / "aspirin_md" / "test_600K.extxyz", index="::5")
    first = {tuple(pair) for pair in covalent_bonds(frames[0]).tolist()}
    assert len(first) == 21 and len(frames) == 100
    assert all({tuple(pair) for pair in covalent_bonds(frame).tolist()} == first for frame in frames)
