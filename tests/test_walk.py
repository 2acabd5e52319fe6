"""A walk down the house: every call from one sciml module into another during a real run, recorded with
``sys.setprofile``, goes down the floors of ``test_package.FLOORS`` or stays on one; it never climbs back, and
the room that runs the walk (``active/loop.py`` for ``sciml learn``, ``pipelines/kinetics.py`` for ``sciml
pipeline``) is never re-entered from below. The ways up are a callable the caller was handed (a closure, lambda
or generator expression: ``report``, ``on_step``, ``on_md_step``), the class a checkpoint names, built by the
registry it registered with (``nn.checkpoint.build_module``), and a decorator's wrapper calling the ``__init__``
it wraps (``records_config``, ``renamed_arguments``)."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ase import Atoms

from tests.conftest import ROOT
from tests.test_package import FLOORS

PACKAGE = ROOT / "sciml"
FACTORIES = {
    ("nn/checkpoint.py", "build_module"),  # builds the class a checkpoint names, from its registry
    ("nn/checkpoint.py", "records_config.<locals>.wrapper"),  # the decorator calls the __init__ it decorates
    ("_deprecation.py", "renamed_arguments.<locals>.decorate.<locals>.wrapper"),  # the same, for renamed arguments
}
WATER = Atoms("OH2", positions=[[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [-0.25, 0.93, 0.0]])


def room(filename: str) -> str | None:
    """``active/loop.py`` for a file of the package, else ``None``."""
    path = Path(filename)
    try:
        return path.relative_to(PACKAGE).as_posix()
    except ValueError:
        return None


def handed_down(name: str) -> bool:
    """A closure, lambda or generator expression: made by the caller's caller and handed to it."""
    return any(mark in name for mark in ("<locals>", "<lambda>", "<genexpr>"))


def floor(room_name: str) -> int:
    return FLOORS[room_name.split("/")[0].removesuffix(".py")]


class Walk:
    """Records ``(caller room, caller qualname, callee room, callee qualname)`` of every call between two
    modules of sciml."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()

    def __call__(self, frame, event, arg) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = room(frame.f_code.co_filename), room(frame.f_back.f_code.co_filename)
        if callee and caller and callee != caller:
            self.calls[(caller, frame.f_back.f_code.co_qualname, callee, frame.f_code.co_qualname)] += 1

    def __enter__(self) -> Walk:
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)

    def climbs(self) -> list[str]:
        """Calls to a higher floor that are not a handed-down callable."""
        return [f"{caller}:{source} -> {callee}:{name}" for (caller, source, callee, name) in self.calls
                if floor(callee) > floor(caller) and not handed_down(name)
                and (caller, source) not in FACTORIES]  # fmt: skip

    def entries(self, target: str) -> set[str]:
        """The rooms that call into ``target`` (other than what it handed them)."""
        return {caller for (caller, _, callee, name) in self.calls if callee == target and not handed_down(name)}


def test_a_learning_run_walks_down_the_house(tmp_path):
    """One round of ``sciml learn``'s loop with a confirmation and its calibration, GFN2-xTB as the oracle."""
    from sciml.active import ActiveLearning, gfn2_xtb
    from tests.active.test_loop import tiny_settings

    settings = tiny_settings(rounds=1, uncertainty="last-layer", confirmations=1, calibration_frames=2)
    loop = ActiveLearning(tmp_path, gfn2_xtb(), settings, report=lambda line: None)
    with Walk() as walk:
        loop.run(WATER)
    rooms = {callee for (_, _, callee, _) in walk.calls}
    # the walk reaches every floor it should: the loop's parts, the MD engine, training, models, data
    for expected in ("active/exploration.py", "active/labelling.py", "active/store.py", "active/training.py",
                     "md/engine.py", "training/potential_module.py", "data/atoms_datamodule.py"):  # fmt: skip
        assert expected in rooms, sorted(rooms)
    assert not walk.climbs(), walk.climbs()
    assert walk.entries("active/loop.py") <= {"active/__init__.py"}, walk.entries("active/loop.py")


def test_a_pipeline_run_walks_down_the_house(tmp_path):
    """``sciml pipeline``'s three stages: the potential (learnt before the walk; the walk resumes it), the
    replicas' MD with it, and the Koopman kinetics of their production frames."""
    from sciml.active import ActiveLearning, gfn2_xtb
    from sciml.pipelines import SamplingSettings, structure_to_kinetics
    from tests.active.test_loop import tiny_settings

    settings = tiny_settings(rounds=0, uncertainty="last-layer")  # 16 frames, 40 epochs: water stays bound
    settings = replace(settings, seed_frames=16, training=replace(settings.training, final_epochs=40))
    loop = ActiveLearning(tmp_path / "learn", gfn2_xtb(), settings, report=lambda line: None)
    loop.run(WATER)
    sampling = SamplingSettings(replicas=2, production_ps=0.1, equilibration_ps=0.02, temperature=100,
                                timestep=0.5, interval=2, posterior_samples=2)  # fmt: skip
    kinetics = {"lag": 2, "k": 2, "epochs": 1, "batch_size": 32, "samples": 5, "microstates": 8, "atoms": [0, 1, 2]}
    with Walk() as walk:
        record = structure_to_kinetics(tmp_path, loop, WATER, None, sampling, kinetics, report=lambda line: None)
    assert record["report"] and (tmp_path / "kinetics" / "report.json").exists()
    # the replicas ran on two posterior draws of the potential: the report splits its intervals
    assert record["report"]["potential_error"]["posterior_samples"] == 2
    assert "sampling_only" in record["report"]["timescales"]
    rooms = {callee for (_, _, callee, _) in walk.calls}
    for expected in ("active/loop.py", "md/engine.py", "calculators/replicas.py", "training/kinetics.py",
                     "koopman/states.py", "uncertainty/posterior_samples.py"):  # fmt: skip
        assert expected in rooms, sorted(rooms)
    assert not walk.climbs(), walk.climbs()
    assert walk.entries("pipelines/kinetics.py") == set(), walk.entries("pipelines/kinetics.py")
