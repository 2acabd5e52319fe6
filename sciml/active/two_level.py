"""Two levels of theory in one run: learn with a cheap oracle first, then spend the expensive one only where the
expensive-level model needs it.

1. **Pretraining** (``<directory>/pretrain``): the whole learning loop with the cheap oracle (GFN2-xTB:
   milliseconds a label), which finds where the molecule goes at the target temperature and writes a model of it.
2. **The expensive level** (``<directory>``): the loop again with the expensive oracle (DFT: seconds to minutes
   a label). Its seed set is ``seed_frames`` frames of the pretraining store spread over it (farthest-point
   sampling of their inverse interatomic distances, from the lowest-energy frame), not rattled copies of the
   start; its first round fine-tunes the pretrained model on them (the energy reference is re-levelled to the
   new labels at every validation) instead of training a new one, and from then on the fine-tuned model's own
   uncertainty chooses the frames the expensive oracle labels.

``two_level.json`` records the oracle calls and the phase clocks (oracle, training, MD) of each level, so the
time split between the levels is read, not estimated. Both stages resume like any run. The expensive level's loop
is built once the cheap one has finished, from the minutes the cheap level spent (its phase clocks' sum), so that
one time budget can cover both levels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from ase import Atoms

from sciml.active.loop import ActiveLearning


def spread_frames(frames: Sequence[Atoms], count: int) -> list[int]:
    """Indices of ``count`` frames of ``frames`` (one molecule) spread over their shapes: farthest-point
    sampling of the inverse interatomic distances (1/Å), starting from the lowest-energy frame when the frames
    carry energies, else the first."""
    if count >= len(frames):
        return list(range(len(frames)))
    upper = np.triu_indices(len(frames[0]), k=1)
    features = np.stack([1.0 / frame.get_all_distances()[upper] for frame in frames])
    try:
        first = int(np.argmin([frame.get_potential_energy() for frame in frames]))
    except RuntimeError:  # no calculator: no energies
        first = 0
    chosen = [first]
    distance = np.linalg.norm(features - features[first], axis=1)
    while len(chosen) < count:
        chosen.append(int(np.argmax(distance)))
        distance = np.minimum(distance, np.linalg.norm(features - features[chosen[-1]], axis=1))
    return chosen


def learn_on_two_levels(
    directory: str | Path,
    cheap: Callable[[Path], ActiveLearning],
    expensive: Callable[[Path, float], ActiveLearning],
    start: Atoms | Sequence[Atoms],
    report: Callable[[str], None] = print,
) -> Path:
    """The run of the module docstring in ``directory``; ``cheap(folder)`` and ``expensive(folder)`` build the
    two loops (their oracles and settings) in a folder, ``expensive(folder, minutes)`` given the minutes the
    cheap level spent. Returns the expensive level's final model."""
    directory = Path(directory)
    pretraining = cheap(directory / "pretrain")
    report(f"level 1 of 2: learning with {pretraining.oracle.name} in {pretraining.directory}")
    pretrained = pretraining.run(start)
    final = expensive(directory, sum(pretraining.state.seconds.values()) / 60)
    frames = pretraining.store.labelled
    seeds = [frames[index] for index in spread_frames(frames, final.settings.seed_frames)]
    report(f"level 2 of 2: {final.oracle.name} on {len(seeds)} frames of level 1 spread over its store, then "
           f"fine-tuning {pretrained} and learning where it is uncertain")  # fmt: skip
    model = final.run(start, seeds=[_bare(frame) for frame in seeds], initial=pretrained)
    record = {
        "model": str(model),
        "pretrained": str(pretrained),
        "levels": [_level(pretraining), _level(final)],
    }
    (directory / "two_level.json").write_text(json.dumps(record, indent=1))
    return model


def _bare(frame: Atoms) -> Atoms:
    return Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)


def _level(loop: ActiveLearning) -> dict:
    calls = len(loop.store.labelled) + len(loop.store.failed)
    return {"oracle": loop.oracle.name, "directory": str(loop.directory), "oracle_calls": calls,
            "seconds": dict(loop.state.seconds), "converged": loop.state.converged}  # fmt: skip
