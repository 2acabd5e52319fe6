"""Two levels of theory in one run: learn with a cheap oracle first, then spend the expensive one only where the
expensive-level model needs it.

1. **Pretraining** (``<directory>/pretrain``): the whole learning loop with the cheap oracle (GFN2-xTB:
   milliseconds a label), which finds where the molecule goes at the target temperature and writes a model of it.
2. **The expensive level** (``<directory>``): the loop again with the expensive oracle (DFT: seconds to minutes
   a label). Its seed set is ``seed_frames`` frames of the pretraining store spread over it (farthest-point
   sampling of their inverse interatomic distances, from the lowest-energy frame), not rattled copies of the
   start; its first round fine-tunes the pretrained model on them (the energy reference is re-levelled to the
   new labels at every validation) instead of training a new one, and from then on the fine-tuned model's own
   uncertainty chooses the frames the expensive oracle labels. Or (``--transfer difference``,
   :mod:`sciml.active.difference`): a model of expensive - cheap learns on frames of the pretrained model's MD
   where that difference is uncertain, and cheap + difference is distilled into one model.

``two_level.json`` records the oracle calls and the phase clocks (oracle, training, MD) of each level, so the
time split between the levels is read, not estimated. Both stages resume like any run. The expensive level's loop
is built once the cheap one has finished, from the minutes the cheap level spent (its phase clocks' sum), so that
one time budget can cover both levels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from ase import Atoms

from sciml.active.difference import DifferenceLevel
from sciml.active.loop import ActiveLearning
from sciml.active.picks import spread_frames
from sciml.md import start_structures


def learn_on_two_levels(
    directory: str | Path,
    cheap: Callable[[Path], ActiveLearning],
    expensive: Callable[[Path, float], ActiveLearning | DifferenceLevel],
    start: Atoms | Sequence[Atoms],
    report: Callable[[str], None] = print,
) -> Path:
    """The run of the module docstring in ``directory``; ``cheap(folder)`` and ``expensive(folder)`` build the
    two loops (their oracles and settings) in a folder, ``expensive(folder, minutes)`` given the minutes the
    cheap level spent: a loop that fine-tunes, or a :class:`~sciml.active.difference.DifferenceLevel`. Returns the
    expensive level's final model."""
    directory = Path(directory)
    pretraining = cheap(directory / "pretrain")
    report(f"level 1 of 2: learning with {pretraining.oracle.name} in {pretraining.directory}")
    pretrained = pretraining.run(start)
    final = expensive(directory, sum(pretraining.state.seconds.values()) / 60)
    if isinstance(final, DifferenceLevel):
        report(f"level 2 of 2: {final.oracle.name} - {pretraining.oracle.name} on frames of {pretrained}'s MD where "
               "that difference is uncertain, then distilled into one model")  # fmt: skip
        model = final.run(start_structures(start), pretrained)
    else:
        frames = pretraining.store.labelled
        seeds = [frames[index] for index in spread_frames(frames, final.settings.seed_frames)]
        report(f"level 2 of 2: {final.oracle.name} on {len(seeds)} frames of level 1 spread over its store, then "
               f"fine-tuning {pretrained} and learning where it is uncertain")  # fmt: skip
        model = final.run(start, seeds=[_bare(frame) for frame in seeds], initial=pretrained)
    composite = directory / "composite.ckpt"
    record = {
        "model": str(model),
        **({"composite": str(composite)} if isinstance(final, DifferenceLevel) and composite.exists() else {}),
        "pretrained": str(pretrained),
        "levels": [_level(pretraining), final.summary() if isinstance(final, DifferenceLevel) else _level(final)],
    }
    (directory / "two_level.json").write_text(json.dumps(record, indent=1))
    return model


def _bare(frame: Atoms) -> Atoms:
    return Atoms(frame.numbers, frame.positions, cell=frame.cell, pbc=frame.pbc)


def _level(loop: ActiveLearning) -> dict:
    calls = len(loop.store.labelled) + len(loop.store.failed)
    return {"oracle": loop.oracle.name, "directory": str(loop.directory), "oracle_calls": calls,
            "seconds": dict(loop.state.seconds), "converged": loop.state.converged}  # fmt: skip
