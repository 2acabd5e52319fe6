"""How well a potential's uncertainty tracks its actual errors, on labelled frames it was not trained on.

For each frame, the calculator's ``forces_uncertainty`` sigma_F,i (eV/Å, per force component of atom i) and
``energy_uncertainty`` sigma_E (eV) are compared with the errors against the frame's labels:

- ranking: the Spearman correlation between the per-frame predicted force uncertainty
  (sqrt(mean_i sigma_F,i^2), the RMS over the frame's atoms) and the per-frame force RMSE, with its 95 %
  bootstrap interval over the frames (percentiles of ``resamples`` resamplings with replacement): over a few
  hundred frames the figure itself is uncertain by several hundredths;
- coverage: the fraction of force components with |F - F_ref| <= 2 sigma_F,i (95.4 % for calibrated
  Gaussian errors), and of frames with |E - E_ref| <= 2 sigma_E;
- reliability: force components binned by sigma_F,i (equal counts), the RMS predicted sigma against the
  observed RMS error in each bin (on the diagonal when calibrated).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ase import Atoms


@dataclass
class UncertaintyCalibrationReport:
    """Per-frame and per-component arrays (eV, eV/Å) and the figures computed from them."""

    frame_force_uncertainty: np.ndarray  # (F,) RMS over atoms of sigma_F,i
    frame_force_rmse: np.ndarray  # (F,) RMSE over the frame's force components
    energy_uncertainty: np.ndarray  # (F,) sigma_E
    energy_error: np.ndarray  # (F,) E - E_ref
    component_uncertainty: np.ndarray  # (3 * atoms,) sigma_F,i repeated for x, y, z
    component_error: np.ndarray  # (3 * atoms,) F - F_ref
    bins: int = 10
    resamples: int = 1000
    figures: dict = field(init=False)

    def __post_init__(self) -> None:
        from scipy.stats import spearmanr  # here, not at import: scipy.stats takes a second to import

        spearman = spearmanr(self.frame_force_uncertainty, self.frame_force_rmse).statistic
        self.figures = {
            "frames": len(self.frame_force_rmse),
            "spearman_force": float(spearman),
            "spearman_force_interval": self.spearman_interval(),
            "coverage_2sigma_force": float(np.mean(np.abs(self.component_error) <= 2 * self.component_uncertainty)),
            "coverage_2sigma_energy": float(np.mean(np.abs(self.energy_error) <= 2 * self.energy_uncertainty)),
            "force_rmse": float(np.sqrt(np.mean(self.component_error**2))),
            "force_uncertainty_rms": float(np.sqrt(np.mean(self.component_uncertainty**2))),
            "mean_frame_force_uncertainty": float(np.mean(self.frame_force_uncertainty)),
        }

    def bootstrap_spearman(self, seed: int = 0) -> np.ndarray:
        """(resamples,) the per-frame Spearman correlation on each of ``resamples`` bootstrap resamplings of the
        frames (NaN where a resample's values are all tied). The resamplings depend only on ``seed``,
        ``resamples`` and the number of frames, so two reports on the same frames get the same ones (paired)."""
        from scipy.stats import rankdata

        frames = len(self.frame_force_rmse)
        picks = np.random.default_rng(seed).integers(0, frames, size=(self.resamples, frames))
        ranks_u = np.apply_along_axis(rankdata, 1, self.frame_force_uncertainty[picks])
        ranks_e = np.apply_along_axis(rankdata, 1, self.frame_force_rmse[picks])
        ranks_u -= ranks_u.mean(axis=1, keepdims=True)
        ranks_e -= ranks_e.mean(axis=1, keepdims=True)
        norms = np.sqrt((ranks_u**2).sum(axis=1) * (ranks_e**2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(norms > 0, (ranks_u * ranks_e).sum(axis=1) / norms, np.nan)  # Pearson of ranks

    def spearman_interval(self, confidence: float = 0.95, seed: int = 0) -> list[float]:
        """[low, high]: the ``confidence`` percentile interval of the per-frame Spearman correlation over
        ``resamples`` bootstrap resamplings of the frames (seeded: the same arrays give the same interval)."""
        if len(self.frame_force_rmse) < 3:
            return [float("nan"), float("nan")]
        tail = 50 * (1 - confidence)
        return [float(v) for v in np.nanpercentile(self.bootstrap_spearman(seed), [tail, 100 - tail])]

    def reliability(self) -> tuple[np.ndarray, np.ndarray]:
        """(RMS predicted sigma, RMS observed error) per bin of force components sorted by sigma (eV/Å)."""
        order = np.argsort(self.component_uncertainty)
        groups = np.array_split(order, min(self.bins, len(order)))
        predicted = np.array([np.sqrt(np.mean(self.component_uncertainty[g] ** 2)) for g in groups])
        observed = np.array([np.sqrt(np.mean(self.component_error[g] ** 2)) for g in groups])
        return predicted, observed

    def plot(self, path: str | Path, title: str = "") -> Path:
        """Reliability diagram (left) and per-frame uncertainty against error (right), as a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        predicted, observed = self.reliability()
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
        top = 1.1 * max(predicted.max(), observed.max())
        left.plot([0, top], [0, top], "k--", lw=1, label="calibrated")
        left.plot(predicted, observed, "o-", label="binned force components")
        left.set(xlabel="predicted σ (eV/Å)", ylabel="observed RMS error (eV/Å)", title="reliability")
        left.legend()
        right.plot(self.frame_force_uncertainty, self.frame_force_rmse, ".", alpha=0.5)
        axes = ((self.frame_force_uncertainty, right.set_xscale), (self.frame_force_rmse, right.set_yscale))
        for values, scale in axes:
            if values.min() > 0 and values.max() > 3 * values.min():  # log axes only over a wide range
                scale("log")
        right.set(
            xlabel="predicted force uncertainty per frame (eV/Å)",
            ylabel="force RMSE per frame (eV/Å)",
            title="Spearman {:.2f} (95 % CI {:.2f}-{:.2f})".format(
                self.figures["spearman_force"], *self.figures["spearman_force_interval"]
            ),
        )
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return Path(path)


def calibration_report(calculator, frames: Iterable[Atoms], bins: int = 10) -> UncertaintyCalibrationReport:
    """Evaluate ``calculator`` (reporting ``forces_uncertainty`` and ``energy_uncertainty``) on labelled
    ``frames`` (their energies and forces, e.g. from extxyz); an unlabelled frame is an error naming it."""
    columns: dict[str, list] = {key: [] for key in ("sigma_frame", "rmse", "sigma_e", "error_e", "sigma", "error")}
    for index, frame in enumerate(frames):
        try:
            reference_energy, reference_forces = frame.get_potential_energy(), frame.get_forces()
        except Exception as error:
            raise ValueError(f"frame {index} carries no energy and forces labels to calibrate against") from error
        atoms = frame.copy()
        calculator.reset()  # ASE would reuse the last results for a frame at the same positions
        atoms.calc = calculator
        forces = atoms.get_forces()
        if "forces_uncertainty" not in calculator.results:
            raise ValueError(f"{type(calculator).__name__} reports no forces_uncertainty (a model without an estimate)")
        sigma = np.asarray(calculator.results["forces_uncertainty"], dtype=float)
        error = forces - reference_forces
        columns["sigma_frame"].append(np.sqrt(np.mean(sigma**2)))
        columns["rmse"].append(np.sqrt(np.mean(error**2)))
        columns["sigma_e"].append(calculator.results["energy_uncertainty"])
        columns["error_e"].append(atoms.get_potential_energy() - reference_energy)
        columns["sigma"].append(np.repeat(sigma, 3))
        columns["error"].append(error.reshape(-1))
    if not columns["rmse"]:
        raise ValueError("no frames to calibrate against")
    return UncertaintyCalibrationReport(
        np.array(columns["sigma_frame"]),
        np.array(columns["rmse"]),
        np.array(columns["sigma_e"]),
        np.array(columns["error_e"]),
        np.concatenate(columns["sigma"]),
        np.concatenate(columns["error"]),
        bins,
    )
