"""The written model's uncertainty, calibrated on frames of its own MD at the target temperature.

Training fits the uncertainty's two scales on the validation split of the labelled frames
(:mod:`sciml.uncertainty.fitting`, by the rule of :mod:`sciml.uncertainty.scales`: s^2 = sum e^2 / sum u^2).
In active learning that split is biased: it
holds rattled copies of the start and frames the loop picked *because* the model was uncertain there, not the
frames the model will meet in a simulation. The scales fitted there need not hold in MD at the target
temperature. So the model the loop writes gets both scales refitted, by the same rule, on held-out frames of
its own MD: ``frames`` frames uniform in time over runs after the ramp (:func:`sample_frames`), labelled by
the oracle. The factor each scale is multiplied by is that rule's s for the model's calibrated sigmas over
those frames (:func:`scale_factors`).

What the refit changes, measured by ``scripts/bench_active.py``: ``docs/benchmarks/active.md`` and
``docs/benchmarks/earlier.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ase import Atoms

from sciml.active.exploration import ExplorationSettings, explore, shares
from sciml.calculators.checkpoint import load_model
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.uncertainty.report import calibration_report
from sciml.uncertainty.scales import scale_factor


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
    """(energy, force) factors s, s^2 = sum e^2 / sum sigma^2 (:func:`~sciml.uncertainty.scales.scale_factor`),
    of ``checkpoint``'s model on the ``labelled`` frames: its scales times these are the scales fitted on them."""
    from sciml.calculators import SciMLCalculator

    report = calibration_report(SciMLCalculator.from_checkpoint(checkpoint, uncertainty=True), labelled)
    energy = scale_factor(report.energy_error, report.energy_uncertainty)
    force = scale_factor(report.component_error, report.component_uncertainty)
    return energy, force


def rescaled_checkpoint(checkpoint: str | Path, factors: tuple[float, float], output: str | Path) -> Path:
    """``checkpoint``'s model with its energy and force uncertainty scales multiplied by ``factors``, written
    to ``output``; predictions unchanged."""
    model = load_model(checkpoint)
    try:
        model.rescale(*factors)
    except ValueError as error:
        raise ValueError(f"{checkpoint}: {error}") from error
    return write_model_checkpoint(model, output)
