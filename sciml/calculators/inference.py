"""Which inference path a calculator takes, and why: the fastest one that is exact for its model and machine.

``compile`` (what :class:`~sciml.calculators.ase.SciMLCalculator` and ``sciml md --compile`` take):

- ``"auto"`` (the default): the ahead-of-time program of :mod:`sciml.models.e2former.inference` where it
  serves (an E2Former, or a last-layer uncertainty around one without force samples, on the CPU, for a
  structure that is not periodic in all three directions), else eager, with the reason in one line; the
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
#: Seconds to build a program (the medium model took 98 s on 2 cores) and the factor it speeds a call up by
#: (3.4x on aspirin): what ``"auto"`` weighs against a run's known length (``expected_calls``).
BUILD_SECONDS, SPEEDUP = 100.0, 3.0


@dataclass(frozen=True)
class InferencePlan:
    """``mode``: ``"aot"``, ``"layers"`` or ``"eager"``; ``backbone``: the E2Former an ahead-of-time program
    runs (``None`` otherwise); ``wrapper``: the last-layer uncertainty that completes its outputs (or
    ``None``); ``reason``: why the plan is not the ahead-of-time program (empty when it is); ``requested``: the
    ``compile`` asked for."""

    mode: str
    backbone: E2Former | None = None
    wrapper: LastLayerUncertainty | None = None
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
    backbone, wrapper, reason = None, None, ""
    if mode == "auto" and os.environ.get("SCIML_COMPILE", "1") == "0":
        reason = "SCIML_COMPILE=0"
    elif device.type != "cpu":
        reason = f"the ahead-of-time program is built for the CPU only so far (device {device.type})"
    elif isinstance(model, E2Former):
        backbone = model
    elif isinstance(model, LastLayerUncertainty) and isinstance(model.model, E2Former):
        if model.force_samples:
            reason = "a last-layer model with force samples needs their forces (eager)"
        else:
            backbone, wrapper = model.model, model
    elif isinstance(model, Committee):
        reason = "a committee runs eager (one program per member is not built yet)"
    else:
        reason = f"no ahead-of-time program for a {type(model).__name__}"
    if backbone is None and mode == "aot":
        raise ValueError(f"compile='aot' cannot serve this model: {reason}")
    if backbone is None:
        return InferencePlan("eager", reason=reason, requested=mode)
    return InferencePlan("aot", backbone, wrapper, requested=mode)


class ModelInference:
    """Energy, forces (and stress) of ``model`` by its :class:`InferencePlan`: ``__call__(batch, stress)`` returns
    what :class:`~sciml.nn.forces.ForceStressOutput` returns, through the ahead-of-time program where the plan
    has one and the batch fits it (stress always eager). ``compile_seconds``: the program's build time here
    (0.0 when it came from the cache or none was built).

    ``expected_calls``: how many calls the run will make, where known (``sciml md``'s steps). With ``"auto"``
    and no cached program, the first two calls run eager and the second is timed; the program is built only if
    the calls left would save more than :data:`BUILD_SECONDS` at :data:`SPEEDUP` (else the run stays eager, and
    says why)."""

    def __init__(
        self, model: nn.Module, potential: nn.Module, plan: InferencePlan, expected_calls: int | None = None
    ) -> None:
        self.model, self.potential, self.plan = model, potential, plan
        self.expected_calls, self.calls = expected_calls, 0
        self.program = None
        self.compile_seconds = 0.0
        self.declined = ""  # why "auto" did not build the program for this run

    def __call__(self, batch, stress: bool = False) -> dict[str, torch.Tensor]:
        self.calls += 1
        if self.plan.mode == "aot" and not stress and not self.declined:
            from sciml.models.e2former.inference import CompiledEnergyForces, package_path, topology_of

            topology = topology_of(self.plan.backbone, batch)
            if CompiledEnergyForces.fits(topology):
                if self.program is None:
                    cached = package_path(self.plan.backbone, batch.pos.dtype, batch.pos.device).exists()
                    if not cached and self.plan.requested == "auto" and self.expected_calls is not None:
                        if self.calls <= 2:  # the second eager call timed (the first warms up), then decide
                            start = time.perf_counter()
                            outputs = self.potential(batch, forces=True, stress=stress)
                            if self.calls == 2:
                                self._weigh(time.perf_counter() - start)
                            return outputs
                    self.program = CompiledEnergyForces(self.plan.backbone, batch)
                    self.compile_seconds = self.program.compile_seconds
                outputs = self.program(batch, topology)
                if self.plan.wrapper is not None:
                    outputs = self.plan.wrapper.with_uncertainty_inputs(outputs, batch)
                return outputs
        return self.potential(batch, forces=True, stress=stress)

    def _weigh(self, eager_seconds: float) -> None:
        saving = (self.expected_calls - 2) * eager_seconds * (1 - 1 / SPEEDUP)
        if saving < BUILD_SECONDS:
            self.declined = (f"{self.expected_calls} calls at {eager_seconds * 1e3:.1f} ms would save ~{saving:.0f} "
                             f"s, less than building the program (~{BUILD_SECONDS:.0f} s; --compile aot builds "
                             "it)")  # fmt: skip

    def describe(self) -> str:
        """One line: the path the calls took, and why (a fallback), or the program's build time."""
        if self.program is not None:
            built = f"built in {self.compile_seconds:.0f} s" if self.compile_seconds else "loaded from the cache"
            return f"inference: ahead-of-time program ({built}: {self.program.path})"
        if self.declined:
            return f"inference: eager ({self.declined})"
        if self.plan.mode == "aot":
            return "inference: eager (the structure is smaller than the program's sizes, or periodic with stress)"
        return f"inference: {self.plan.mode} ({self.plan.reason})"
