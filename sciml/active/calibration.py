"""The written model's uncertainty, calibrated on frames of its own MD at the target temperature.

Training fits the uncertainty's two scales on the validation split of the labelled frames
(:mod:`sciml.training.uncertainty`: s^2 = sum e^2 / sum u^2). In active learning that split is biased: it
holds rattled copies of the start and frames the loop picked *because* the model was uncertain there, not the
frames the model will meet in a simulation. The scales fitted there need not hold in MD at the target
temperature. So the model the loop writes gets both scales refitted, by the same rule, on held-out frames of
its own MD: ``frames`` frames uniform in time over runs after the ramp (:func:`sample_frames`), labelled by
the oracle. The factor each scale is multiplied by is RMS(error) / RMS(sigma) over those frames
(:func:`scale_factors`).

In ``scripts/bench_active.py`` (paracetamol, 500 K) the final model trained 200 epochs covered 97.2 % of the
force components of the 500 K test frames within 2 sigma, and its RMS sigma was 1.39x its RMS error there:
fitted on the loop's picks, the scale was too large for MD frames. Refitted on 50 frames of its own MD, it was
multiplied by 0.74.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from ase import Atoms

from sciml.active.exploration import ExplorationSettings, explore, shares
from sciml.calculators.calibration import calibration_report
from sciml.calculators.checkpoint import load_model
from sciml.nn.checkpoint import write_model_checkpoint


def sample_frames(
    checkpoint: str | Path,
    starts: list[Atoms],
    settings: ExplorationSettings,
    frames: int,
    seed: int,
    on_step: Callable[[int, float], None] | None = None,
) -> list[Atoms]:
    """``frames`` frames uniform in time from ML Langevin MD with ``checkpoint``'s model (the ramp and hold of
    ``settings``): max(R, number of starts) runs, run k from start k modulo their number, in batches of
    ``settings.replicas`` R (:func:`~sciml.active.exploration.explore`), the frames shared among the runs and
    taken during the hold, each with ``info["uncertainty"]`` (its largest per-atom force uncertainty, eV/Å),
    ``info["time_fs"]``, ``info["start"]`` and ``info["replica"]`` (the run). A run that ends early (it left
    what the model knows) gives the frames it reached."""
    model = load_model(checkpoint)
    hold_steps = round(settings.hold_ps * 1000 / settings.timestep)
    runs = max(settings.replicas, len(starts))
    counts = shares(frames, runs)
    sample_every = max(1, hold_steps // max(max(counts), 1))
    sampled = []
    for first in range(0, runs, settings.replicas):
        batch = list(range(first, min(first + settings.replicas, runs)))
        found = explore([starts[k % len(starts)] for k in batch], model, settings, seed + first, on_step,
                        sample_every=sample_every, replicas=len(batch))  # fmt: skip
        for run, exploration in zip(batch, found, strict=True):
            for frame in exploration.samples[: counts[run]]:
                frame.info.update(start=run % len(starts), replica=run)
                sampled.append(frame)
    return sampled


def scale_factors(checkpoint: str | Path, labelled: list[Atoms]) -> tuple[float, float]:
    """(energy, force) factors RMS(error) / RMS(sigma) of ``checkpoint``'s model on the ``labelled`` frames:
    its scales times these are the scales fitted on them."""
    from sciml.calculators import SciMLCalculator

    report = calibration_report(SciMLCalculator.from_checkpoint(checkpoint, uncertainty=True), labelled)
    energy = np.sqrt(np.mean(report.energy_error**2) / np.mean(report.energy_uncertainty**2))
    force = np.sqrt(np.mean(report.component_error**2) / np.mean(report.component_uncertainty**2))
    return float(energy), float(force)


def rescaled_checkpoint(checkpoint: str | Path, factors: tuple[float, float], output: str | Path) -> Path:
    """``checkpoint``'s model with its energy and force uncertainty scales multiplied by ``factors``, written
    to ``output``; predictions unchanged."""
    model = load_model(checkpoint)
    for name, factor in zip(("energy_uncertainty_scale", "force_uncertainty_scale"), factors, strict=True):
        if not np.isfinite(factor) or factor <= 0:
            raise ValueError(f"{checkpoint}: {name} factor {factor} is not a positive number")
        getattr(model, name).mul_(factor)
    return write_model_checkpoint(model, output)
