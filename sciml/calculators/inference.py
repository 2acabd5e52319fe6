"""Which inference path a calculator takes, and why: the fastest one that is exact for its model and machine.

``compile`` (what :class:`~sciml.calculators.ase.SciMLCalculator` and ``sciml md --compile`` take):

- ``"auto"`` (the default): the ahead-of-time program of :mod:`sciml.models.e2former.inference` where it
  serves (an E2Former, a last-layer uncertainty around one without force samples, or a committee of them: one
  program per member; on the CPU; stress eager), else eager, with the reason in one line; the
  environment variable ``SCIML_COMPILE=0`` makes it eager (quick runs, tests);
- ``"aot"``: the same, and a model it cannot serve is an error;
- ``"layers"`` (or ``True``): ``torch.compile`` of the E2Former layers (the first call compiles; on CUDA
  with ``static_shapes``: CUDA graphs);
- ``"eager"`` (or ``False``): no compilation.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch
from torch import nn

from sciml.models import E2Former
from sciml.uncertainty import Committee, LastLayerUncertainty

MODES = ("auto", "aot", "layers", "eager")
#: Seconds to build one program, which ``"auto"`` weighs against a run's known length (``expected_calls``);
#: the medium model took 98 s on 2 cores.
BUILD_SECONDS = 100.0
#: The factor a program speeds a call up by, in that weighing; measured 3.4x on aspirin, 4.9x on ethanol.
SPEEDUP = 3.0


@dataclass(frozen=True)
class InferencePlan:
    """``mode``: ``"aot"``, ``"layers"`` or ``"eager"``; ``backbones``: the E2Formers whose ahead-of-time programs
    run (one, or a committee's members; empty otherwise); ``wrapper``: the last-layer uncertainty or committee
    that completes their outputs (or ``None``); ``reason``: why the plan is not the ahead-of-time program (empty
    when it is); ``requested``: the ``compile`` asked for."""

    mode: str
    backbones: tuple[E2Former, ...] = ()
    wrapper: LastLayerUncertainty | Committee | None = None
    reason: str = ""
    requested: str = "auto"


def normalised(compile: bool | str) -> str:
    if compile is True:
        return "layers"
    if compile is False:
        return "eager"
    if compile not in MODES:
        raise ValueError(f"compile must be one of {MODES} (or True / False), got {compile!r}")
    return compile


def plan_inference(model: nn.Module, compile: bool | str, device: torch.device) -> InferencePlan:
    """The plan for ``model`` on ``device`` (module docstring)."""
    mode = normalised(compile)
    if mode in ("layers", "eager"):
        return InferencePlan(mode, reason=f"compile={mode!r} asked for")
    backbones, wrapper, reason = (), None, ""
    if mode == "auto" and os.environ.get("SCIML_COMPILE", "1") == "0":
        reason = "SCIML_COMPILE=0"
    elif device.type != "cpu":
        reason = f"the ahead-of-time program is built for the CPU only so far (device {device.type})"
    elif isinstance(model, E2Former):
        backbones = (model,)
    elif isinstance(model, LastLayerUncertainty) and isinstance(model.model, E2Former):
        if model.force_samples:
            reason = "a last-layer model with force samples needs their forces (eager)"
        else:
            backbones, wrapper = (model.model,), model
    elif isinstance(model, Committee) and all(isinstance(member, E2Former) for member in model.members):
        backbones, wrapper = tuple(model.members), model
    else:
        reason = f"no ahead-of-time program for a {type(model).__name__}"
    if not backbones and mode == "aot":
        raise ValueError(f"compile='aot' cannot serve this model: {reason}")
    if not backbones:
        return InferencePlan("eager", reason=reason, requested=mode)
    return InferencePlan("aot", backbones, wrapper, requested=mode)


class ModelInference:
    """Energy, forces (and stress) of a model by its :class:`InferencePlan`: ``__call__(batch, stress)`` returns
    what ``potential`` (the model's :class:`~sciml.nn.forces.ForceStressOutput`) returns, through the
    ahead-of-time programs where the plan has them and the batch fits (stress always eager).
    ``compile_seconds``: the programs' build time here (0.0 when they came from the cache or none was built).

    ``expected_calls``: how many calls the run will make, where known (``sciml md``'s steps). With ``"auto"``
    and a program not cached, the first two calls run eager and the second is timed; the programs are built
    only if the calls left would save more than
    :data:`~sciml.calculators.inference.BUILD_SECONDS` per program to build, at
    :data:`~sciml.calculators.inference.SPEEDUP` (else the run stays eager, and says why)."""

    def __init__(self, potential: nn.Module, plan: InferencePlan, expected_calls: int | None = None) -> None:
        self.potential, self.plan = potential, plan
        self.expected_calls, self.calls = expected_calls, 0
        self.programs: list = []
        self.compile_seconds = 0.0
        self.declined = ""  # why "auto" did not build the programs for this run

    def __call__(self, batch, stress: bool = False) -> dict[str, torch.Tensor]:
        self.calls += 1
        if self.plan.mode == "aot" and not stress and not self.declined:
            from sciml.models.e2former.inference import CompiledEnergyForces, package_path, topology_of

            topology = topology_of(self.plan.backbones[0], batch)  # members share species and frames
            if CompiledEnergyForces.fits(topology):
                if not self.programs:
                    dtype, device = batch.pos.dtype, batch.pos.device
                    missing = sum(not package_path(b, dtype, device).exists() for b in self.plan.backbones)
                    if missing and self.plan.requested == "auto" and self.expected_calls is not None:
                        if self.calls <= 2:  # the second eager call timed (the first warms up), then decide
                            start = time.perf_counter()
                            outputs = self.potential(batch, forces=True, stress=stress)
                            if self.calls == 2:
                                self._weigh(time.perf_counter() - start, missing)
                            return outputs
                    self.programs = [CompiledEnergyForces(backbone, batch) for backbone in self.plan.backbones]
                    self.compile_seconds = sum(program.compile_seconds for program in self.programs)
                members = [program(batch, topology) for program in self.programs]
                if isinstance(self.plan.wrapper, Committee):
                    return self.plan.wrapper.combine(members)
                if self.plan.wrapper is not None:
                    return self.plan.wrapper.with_uncertainty_inputs(members[0], batch)
                return members[0]
        return self.potential(batch, forces=True, stress=stress)

    @property
    def program(self):
        """The (first) ahead-of-time program in use, or ``None``."""
        return self.programs[0] if self.programs else None

    def _weigh(self, eager_seconds: float, missing: int) -> None:
        saving = (self.expected_calls - 2) * eager_seconds * (1 - 1 / SPEEDUP)
        if saving < BUILD_SECONDS * missing:
            self.declined = (f"{self.expected_calls} calls at {eager_seconds * 1e3:.1f} ms would save ~{saving:.0f} "
                             f"s, less than building {missing} program(s) (~{BUILD_SECONDS:.0f} s each; --compile "
                             "aot builds them)")  # fmt: skip

    def describe(self) -> str:
        """One line: the path the calls took, and why (a fallback), or the programs' build time."""
        if self.programs:
            built = f"built in {self.compile_seconds:.0f} s" if self.compile_seconds else "loaded from the cache"
            count = f"{len(self.programs)} programs" if len(self.programs) > 1 else "program"
            return f"inference: ahead-of-time {count} ({built}: {self.programs[0].path})"
        if self.declined:
            return f"inference: eager ({self.declined})"
        if self.plan.mode == "aot":
            return "inference: eager (the structure is smaller than the program's sizes, or periodic with stress)"
        return f"inference: {self.plan.mode} ({self.plan.reason})"
