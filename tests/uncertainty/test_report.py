"""The calibration report on a calculator whose errors are Gaussian with exactly the uncertainty it reports:
coverage at 2 sigma is 95.4 %, the reliability diagram is on the diagonal, the per-frame ranking is right; an
overconfident one covers 68 %. Then a trained committee on held-out frames."""

from __future__ import annotations

import ase.io
import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.singlepoint import SinglePointCalculator

from sciml.calculators import SciMLCalculator
from sciml.uncertainty.report import UncertaintyCalibrationReport, calibration_report


class GaussianErrors(Calculator):
    """Reference labels plus N(0, sigma^2) noise, sigma from the frame (``info["sigma"]``) times ``claimed``
    in what it reports."""

    implemented_properties = ["energy", "forces", "forces_uncertainty", "energy_uncertainty"]

    def __init__(self, claimed: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        self.claimed, self.rng = claimed, np.random.default_rng(seed)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes) -> None:
        super().calculate(atoms, properties, system_changes)
        sigma = self.atoms.info["sigma"] * np.linspace(0.5, 1.5, len(self.atoms))  # per atom
        noise = self.rng.normal(size=(len(self.atoms), 3)) * sigma[:, None]
        self.results = {
            "forces": self.atoms.arrays["reference_forces"] + noise,
            "energy": self.atoms.info["reference_energy"] + self.rng.normal() * self.atoms.info["sigma"],
            "forces_uncertainty": self.claimed * sigma,
            "energy_uncertainty": self.claimed * self.atoms.info["sigma"],
        }


def labelled_frames(n: int = 300, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    frames = []
    for sigma in np.exp(rng.uniform(np.log(0.01), np.log(1.0), n)):
        atoms = molecule("CH3CH2OH")
        forces, energy = rng.normal(size=(len(atoms), 3)), float(rng.normal())
        atoms.info.update(sigma=sigma, reference_energy=energy)
        atoms.arrays["reference_forces"] = forces
        atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
        frames.append(atoms)
    return frames


def test_a_calibrated_uncertainty_covers_95_percent_and_lies_on_the_diagonal(tmp_path):
    report = calibration_report(GaussianErrors(), labelled_frames())
    figures = report.figures
    assert figures["frames"] == 300
    assert 0.94 <= figures["coverage_2sigma_force"] <= 0.968  # 8100 components: 95.4 % +- 0.7 % (3 sigma)
    assert 0.91 <= figures["coverage_2sigma_energy"] <= 0.99
    assert figures["spearman_force"] > 0.9  # per-frame sigma spans two decades
    low, high = figures["spearman_force_interval"]
    assert low < figures["spearman_force"] < high and high - low < 0.05
    predicted, observed = report.reliability()
    np.testing.assert_allclose(observed / predicted, 1.0, atol=0.15)
    assert report.plot(tmp_path / "calibration.png").stat().st_size > 10_000


def test_the_spearman_interval_is_the_bootstrap_spread_over_frames():
    """Uncertainty and error both the frame's sigma times independent noise: the interval is reproducible,
    covers the estimate, and narrows as 1/sqrt(frames) (4x the frames: about half the width)."""
    rng = np.random.default_rng(3)

    def report(frames: int):
        sigma = np.exp(rng.uniform(-1, 1, frames))
        noisy = [sigma * np.exp(0.6 * rng.normal(size=frames)) for _ in range(2)]
        empty = np.zeros(1)
        return UncertaintyCalibrationReport(noisy[0], noisy[1], empty, empty, empty, empty)

    small, large = report(200), report(800)
    widths = []
    for figures in (small.figures, large.figures):
        low, high = figures["spearman_force_interval"]
        assert low < figures["spearman_force"] < high
        widths.append(high - low)
    assert 1.6 < widths[0] / widths[1] < 2.5 and 0.05 < widths[1] < 0.15
    assert small.spearman_interval() == small.figures["spearman_force_interval"]


def test_an_overconfident_uncertainty_covers_68_percent():
    report = calibration_report(GaussianErrors(claimed=0.5), labelled_frames())
    assert 0.66 <= report.figures["coverage_2sigma_force"] <= 0.70  # |e| <= 2 (sigma / 2) = sigma
    predicted, observed = report.reliability()
    np.testing.assert_allclose(observed / predicted, 2.0, rtol=0.15)


def test_unlabelled_frames_and_calculators_without_an_estimate_are_refused(quickstart_run):
    frames = labelled_frames(3)
    frames[1].calc = None
    with pytest.raises(ValueError, match="frame 1 carries no energy and forces labels"):
        calibration_report(GaussianErrors(), frames)
    _, checkpoint = quickstart_run
    with pytest.raises(ValueError, match="reports no forces_uncertainty"):
        calibration_report(SciMLCalculator.from_checkpoint(checkpoint), labelled_frames(2))


def test_a_trained_committee_on_its_frames(committee_run):
    module, data, checkpoint = committee_run
    frames = ase.io.read(data.paths, index=":")
    report = calibration_report(SciMLCalculator.from_checkpoint(checkpoint, dtype="float64"), frames)
    figures = report.figures
    assert figures["frames"] == len(frames) and np.isfinite(figures["spearman_force"])
    assert 0 < figures["coverage_2sigma_force"] <= 1 and figures["force_uncertainty_rms"] > 0
