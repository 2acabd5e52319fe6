"""Compiled kernels (C++/OpenMP and CUDA) behind ``sciml::`` torch ops, and backend resolution.

Backends: ``"reference"`` (pure PyTorch, the ground truth), ``"cpu"``, ``"cuda"``, and ``"auto"``,
which picks the compiled kernels for the tensors' device (building them once, cached on disk) and falls
back to ``"reference"`` with one warning naming the reason.
"""

from __future__ import annotations

import logging
import warnings

import torch

from sciml.equivariant.kernels.build import KernelUnavailable, load

#: Kernel backends a model takes (``backend=``): ``auto`` picks the fastest available one.
BACKENDS = ("auto", "reference", "cpu", "cuda")
_log = logging.getLogger(__name__)
_warned: set[str] = set()


def resolve_backend(requested: str, device: torch.device | str = "cpu") -> str:
    """The backend that will run for ``requested`` on ``device`` (loading kernels if needed).

    Raises:
        ValueError: unknown name, or an explicit compiled backend on the wrong device.
        KernelUnavailable: an explicit compiled backend cannot be built here (with the reason).
    """
    if requested not in BACKENDS:
        raise ValueError(f"unknown kernel backend '{requested}'; choose one of {BACKENDS}")
    device = torch.device(device)
    if requested == "reference":
        return "reference"
    if requested in ("cpu", "cuda"):
        if device.type != requested:
            raise ValueError(f"backend '{requested}' cannot run tensors on device '{device}'")
        load(with_cuda=requested == "cuda")
        return requested
    wanted = "cuda" if device.type == "cuda" else "cpu"
    if device.type not in ("cpu", "cuda"):
        reason = f"no compiled kernels for device type '{device.type}'"
    else:
        try:
            load(with_cuda=wanted == "cuda")
            return wanted
        except KernelUnavailable as error:
            reason = str(error)
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"sciml kernels: using the reference backend ({reason})", RuntimeWarning, stacklevel=3)
    return "reference"


__all__ = ["BACKENDS", "KernelUnavailable", "resolve_backend", "load"]
