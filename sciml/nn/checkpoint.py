"""Modules as ``{class_path, init_args}`` specs, and checkpoint files read without executing pickled code.

A module is saveable when its ``__init__`` is decorated with :func:`records_config`, which keeps the
constructor arguments in ``module.config``; the spec plus a state dict rebuilds it, and
:func:`read_checkpoint` loads files with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn


class CheckpointError(ValueError):
    """The checkpoint cannot be used (unsafe, incomplete or not a sciml checkpoint)."""


def records_config(init: Callable) -> Callable:
    """Decorate a module's ``__init__`` so that ``self.config`` holds every constructor argument by name,
    defaults included (``**kwargs`` merged in), once construction has finished. The signature is kept, so
    LightningCLI still sees the real arguments. A subclass that decorates its own ``__init__`` records its
    own arguments (its wrapper runs last)."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        init(self, *args, **kwargs)
        config = {}
        for name, value in list(bound.arguments.items())[1:]:
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                config.update(value)
            elif signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"{type(self).__name__}: records_config cannot record *{name}")
            else:
                config[name] = value
        self.config = config

    return wrapper


def fresh_instance(module: nn.Module) -> nn.Module:
    """A new module of the same class built from ``module.config`` (every parameter freshly initialised),
    with the floating-point dtype and the device of ``module``'s parameters."""
    if getattr(module, "config", None) is None:
        raise CheckpointError(
            f"{type(module).__name__} keeps no `config` of its constructor arguments (decorate its __init__ "
            "with sciml.nn.checkpoint.records_config), so no fresh instance can be built"
        )
    twin = type(module)(**module.config)
    reference = next(module.parameters(), None)
    return twin if reference is None else twin.to(device=reference.device, dtype=reference.dtype)


def module_spec(module: nn.Module) -> dict:
    """``{"class_path", "init_args"}`` of a module that records its constructor arguments in ``config``
    (see :func:`records_config`)."""
    config = getattr(module, "config", None)
    if config is None:
        raise CheckpointError(
            f"{type(module).__name__} keeps no `config` of its constructor arguments, so it cannot be rebuilt"
        )
    kind = type(module)
    return {"class_path": f"{kind.__module__}.{kind.__qualname__}", "init_args": dict(config)}


def build_module(spec: dict, source: str | Path) -> nn.Module:
    """Instantiate ``spec`` (only classes inside the ``sciml`` package); ``source`` names the file in errors."""
    class_path = spec.get("class_path", "") if isinstance(spec, dict) else ""
    if not class_path.startswith("sciml."):
        raise CheckpointError(f"checkpoint '{source}': module class '{class_path}' is outside the sciml package")
    module_name, _, class_name = class_path.rpartition(".")
    try:
        kind = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise CheckpointError(f"checkpoint '{source}': class '{class_path}' does not exist") from error
    return kind(**spec.get("init_args", {}))


def sub_state_dict(state: dict, prefix: str) -> dict:
    """Entries of ``state`` under ``prefix`` (e.g. ``"model."``) with the prefix removed."""
    return {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """The dict stored in ``path``, loaded with ``weights_only=True`` (pickled code is refused)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"checkpoint '{path}' needs arbitrary pickled code to load; refusing it "
            f"(only weights_only=True checkpoints are accepted): {error}"
        ) from error
    except Exception as error:
        raise CheckpointError(f"checkpoint '{path}' could not be read ({type(error).__name__}: {error})") from error
    if not isinstance(checkpoint, dict):
        raise CheckpointError(f"checkpoint '{path}' does not hold a dict (not written by sciml?)")
    return checkpoint
