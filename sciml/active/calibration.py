"""The written model's uncertainty, calibrated on frames of its own MD at the target temperature.

Training fits the uncertainty's two scales on the validation split of the labelled frames
(:mod:`sciml.uncertainty.fitting`, by the rule of :mod:`sciml.uncertainty.scales`: s^2 = sum e^2 / sum u^2).
In active learning that split is biased: it
holds rattled copies of the start and frames the loop picked *because* the model was uncertain there, not the
frames the model will meet in a simulation. The scales fitted there need not hold in MD at the target
temperature. So the model the loop writes gets both scales refitted, by the same rule, on held-out frames of
its own MD: ``frames`` frames uniform in time over runs after the ramp (:func:`sample_frames`), labelled by
the oracle. The factor each scale is multiplied by is that rule's s for the model's calibrated sigmas over
those frames (:func:`calibrated_checkpoint`).

What the refit changes, measured by ``scripts/bench_active.py``: ``docs/benchmarks/active.md`` and
``docs/benchmarks/earlier.md``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import numpy as np
from ase import Atoms
from torch import nn

from sciml.active.exploration import ExplorationSettings, explore, shares
from sciml.nn.checkpoint import write_model_checkpoint
from sciml.uncertainty import UncertaintyModel
from sciml.uncertainty.report import calibration_report
from sciml.uncertainty.scales import scale_factor


def sample_frames(
    model: nn.Module,
    starts: list[Atoms],
    settings: ExplorationSettings,
    frames: int,
    seed: int,
    on_step: Callable[[int, float], None] | None = None,
    explorer: Callable[..., list] = explore,
) -> list[Atoms]:
    """``frames`` frames uniform in time from ML Langevin MD with ``model`` (the ramp and hold of ``settings``):
    max(R, number of starts) runs, run k from start k modulo their number, in batches of ``settings.replicas``
    R (``explorer``: :func:`~sciml.active.exploration.explore`), the frames shared among the runs and taken
    during the hold, each with ``info["uncertainty"]`` (its largest per-atom force uncertainty, eV/Å),
    ``info["time_fs"]``, ``info["start"]`` and ``info["replica"]`` (the run). A run that ends early (it left
    what the model knows) gives the frames it reached."""
    hold_steps = round(settings.hold_ps * 1000 / settings.timestep)
    runs = max(settings.replicas, len(starts))
    counts = shares(frames, runs)
    sample_every = max(1, hold_steps // max(max(counts), 1))
    sampled = []
    for first in range(0, runs, settings.replicas):
        batch = list(range(first, min(first + settings.replicas, runs)))
        found = explorer([starts[k % len(starts)] for k in batch], model, settings, seed + first, on_step,
                         sample_every=sample_every, replicas=len(batch))  # fmt: skip
        for run, exploration in zip(batch, found, strict=True):
            for frame in exploration.samples[: counts[run]]:
                frame.info.update(start=run % len(starts), replica=run)
                sampled.append(frame)
    return sampled


def calibrated_checkpoint(model: UncertaintyModel, labelled: list[Atoms], output: str | Path) -> dict:
    """``model`` (left as it is) with both uncertainty scales refitted on the held-out ``labelled`` frames, written to
    ``output``, and its errors on them from the same predictions: ``frames``, ``force_mae_ev_per_a`` (over force
    components), ``energy_mae_ev`` and the factors the scales were multiplied by (``energy_scale_factor``,
    ``force_scale_factor``: s, s^2 = sum e^2 / sum sigma^2, :func:`~sciml.uncertainty.scales.scale_factor`)."""
    from sciml.calculators import SciMLCalculator

    report = calibration_report(SciMLCalculator(model, uncertainty=True, compile="eager"), labelled)  # a few frames
    energy = scale_factor(report.energy_error, report.energy_uncertainty)
    force = scale_factor(report.component_error, report.component_uncertainty)
    rescaled_checkpoint(copy.deepcopy(model), (energy, force), output)
    return {"frames": len(labelled), "force_mae_ev_per_a": float(np.mean(np.abs(report.component_error))),
            "energy_mae_ev": float(np.mean(np.abs(report.energy_error))), "energy_scale_factor": energy,
            "force_scale_factor": force}  # fmt: skip


def rescaled_checkpoint(model: UncertaintyModel, factors: tuple[float, float], output: str | Path) -> Path:
    """``model`` (changed in place: pass a copy to keep it) with its energy and force uncertainty scales
    multiplied by ``factors``, written to ``output``; predictions unchanged."""
    try:
        model.rescale(*factors)
    except ValueError as error:
        raise ValueError(f"{output}: {error}") from error
    return write_model_checkpoint(model, output)
