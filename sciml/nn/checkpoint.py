"""Modules as ``{class_path, init_args}`` specs, and checkpoint files read without executing pickled code.

A module is saveable when its ``__init__`` is decorated with :func:`records_config`, which keeps the
constructor arguments in ``module.config``; the spec plus a state dict rebuilds it, and
:func:`read_checkpoint` loads files with ``torch.load(weights_only=True)``. Checkpoints carry a format version
(``sciml_format_version``): an older one is upgraded one version at a time
(:data:`~sciml.nn.checkpoint.SPEC_UPGRADES`), a newer one is refused with both versions named.
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


#: Classes a checkpoint may rebuild (by ``class_path``); :func:`register_saveable` adds one.
SAVEABLE_CLASSES = {
    "sciml.models.e2former.model.E2Former",
    "sciml.uncertainty.committee.Committee",
    "sciml.uncertainty.last_layer.LastLayerUncertainty",
    "sciml.koopman.encoders.MLPEncoder",
    "sciml.koopman.molecular.MolecularEncoder",
}
MAX_INTEGER = 65_536  # no constructor argument of a model is larger (channels, layers, atomic numbers, ...)
MAX_ITEMS = 4_096  # longest list or string accepted in init_args


def register_saveable(kind: type) -> type:
    """Class decorator: let checkpoints rebuild ``kind`` (an ``nn.Module`` whose ``__init__`` is decorated
    with :func:`records_config`), e.g. a model of your own outside the ``sciml`` package."""
    if not (isinstance(kind, type) and issubclass(kind, nn.Module)):
        raise TypeError(f"register_saveable needs an nn.Module subclass, got {kind!r}")
    SAVEABLE_CLASSES.add(f"{kind.__module__}.{kind.__qualname__}")
    return kind


FORMAT_VERSION = 3  # what this sciml writes; see SPEC_UPGRADES
VERSION_KEY = "sciml_format_version"
# E2Former's defaults in format version 1 where they differ from now (every other argument kept its default)
E2FORMER_VERSION_1 = {
    "layers": 4,
    "radial_basis": 32,
    "radial": "gaussian",
    "edge_network": "per_layer",
    "edge_hidden": None,
    "norm": "separable",
    "edge_degree_scaling": "mean",
    "avg_neighbours": 16.0,
}
VERSION_1_DEFAULTS = {
    "sciml.models.e2former.model.E2Former": E2FORMER_VERSION_1,
    "sciml.koopman.molecular.MolecularEncoder": {"norm": "separable", "edge_degree_scaling": "mean"},
}


def _from_version_1(spec: dict) -> dict:
    """Version 1: every checkpoint before the format was versioned. Its specs record the constructor arguments
    that existed when it was written; those added later (``norm``, ``edge_degree_scaling``, ...) take the
    behaviour before them, and the version-1 defaults that have changed since take their old values."""
    defaults = VERSION_1_DEFAULTS.get(spec.get("class_path"), {})
    return {**spec, "init_args": {**defaults, **spec.get("init_args", {})}}


#: The E2Former settings a ``MolecularEncoder`` took as its own arguments before format version 3.
MOLECULAR_ENCODER_BACKBONE = ("channels", "lmax", "layers", "heads", "radial_basis", "backend", "parity", "norm",
                              "edge_degree_scaling", "edge_network", "edge_hidden", "radial")  # fmt: skip


def _from_version_2(spec: dict) -> dict:
    """Version 2: a ``MolecularEncoder`` took its backbone's E2Former settings as arguments of its own; from
    version 3 they are one ``backbone`` mapping."""
    if spec.get("class_path") != "sciml.koopman.molecular.MolecularEncoder":
        return spec
    init_args = dict(spec.get("init_args", {}))
    backbone = {key: init_args.pop(key) for key in MOLECULAR_ENCODER_BACKBONE if key in init_args}
    return {**spec, "init_args": {**init_args, "backbone": {**init_args.get("backbone", {}), **backbone}}}


#: Upgrades of a model spec from format version n to n + 1, applied in turn from the checkpoint's version to
#: ``FORMAT_VERSION``: a change to a constructor that alters what an old spec builds adds a version and one
#: function here.
SPEC_UPGRADES: dict[int, Callable[[dict], dict]] = {1: _from_version_1, 2: _from_version_2}


def format_version(checkpoint: dict, source: str | Path) -> int:
    """The checkpoint's format version (1 when it has none); a newer one than this sciml's is refused."""
    version = checkpoint.get(VERSION_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"checkpoint '{source}': {VERSION_KEY} = {version!r} is not a format version")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint '{source}' has format version {version}, but this sciml reads versions up to "
            f"{FORMAT_VERSION}: it was written by a newer sciml; upgrade sciml to load it"
        )
    return version


def upgraded_spec(spec: dict, version: int) -> dict:
    """``spec`` of a checkpoint of format ``version`` as the current constructors read it."""
    for step in range(version, FORMAT_VERSION):
        spec = SPEC_UPGRADES[step](spec)
    return spec


#: Classes that moved, by their old ``class_path``: checkpoints written before the move name the old one.
MOVED_CLASSES = {
    "sciml.models.committee.Committee": "sciml.uncertainty.committee.Committee",
    "sciml.models.last_layer.LastLayerUncertainty": "sciml.uncertainty.last_layer.LastLayerUncertainty",
}


def build_module(spec: dict, source: str | Path, version: int = FORMAT_VERSION) -> nn.Module:
    """Instantiate ``spec``, written at format ``version`` (see :func:`format_version`; upgraded first): only
    classes in :data:`~sciml.nn.checkpoint.SAVEABLE_CLASSES` (see :func:`register_saveable`), and only with
    ``init_args`` that bind
    to the constructor and stay within sane bounds (a crafted file must not call arbitrary code or allocate
    without limit). ``source`` names the file in errors."""
    class_path = spec.get("class_path", "") if isinstance(spec, dict) else ""
    class_path = MOVED_CLASSES.get(class_path, class_path)
    if class_path not in SAVEABLE_CLASSES:
        raise CheckpointError(
            f"checkpoint '{source}': '{class_path}' is not a registered model or encoder class "
            f"(known: {sorted(SAVEABLE_CLASSES)}; see sciml.nn.checkpoint.register_saveable)"
        )
    module_name, _, class_name = class_path.rpartition(".")
    try:
        kind = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise CheckpointError(f"checkpoint '{source}': class '{class_path}' does not exist") from error
    init_args = spec.get("init_args", {})
    if not isinstance(init_args, dict):
        raise CheckpointError(f"checkpoint '{source}': init_args of '{class_path}' is not a mapping")
    for name, value in init_args.items():
        _check_value(value, f"checkpoint '{source}': init_args.{name} of '{class_path}'")
    init_args = upgraded_spec({"class_path": class_path, "init_args": init_args}, version)["init_args"]
    try:
        inspect.signature(kind).bind(**init_args)
    except TypeError as error:
        raise CheckpointError(f"checkpoint '{source}': init_args do not fit '{class_path}': {error}") from error
    return kind(**init_args)


def _check_value(value, where: str) -> None:
    """Plain values only: None, bool, str, finite or infinite (not NaN) numbers, integers up to MAX_INTEGER,
    and lists, tuples and string-keyed dicts of them up to MAX_ITEMS long."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > MAX_INTEGER:
            raise CheckpointError(f"{where} = {value} is out of range (|value| <= {MAX_INTEGER})")
    elif isinstance(value, float):
        if value != value:
            raise CheckpointError(f"{where} is NaN")
    elif isinstance(value, str):
        if len(value) > MAX_ITEMS:
            raise CheckpointError(f"{where} is a string of {len(value)} characters (at most {MAX_ITEMS})")
    elif isinstance(value, list | tuple | dict):
        if len(value) > MAX_ITEMS:
            raise CheckpointError(f"{where} holds {len(value)} items (at most {MAX_ITEMS})")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict) and not isinstance(key, str):
                raise CheckpointError(f"{where} has a non-string key {key!r}")
            _check_value(item, f"{where}[{key!r}]")
    else:
        raise CheckpointError(f"{where} has type {type(value).__name__}, not a plain value")


def check_identity_buffers(module: nn.Module, state_dict: dict, prefix: str, names: tuple[str, ...]) -> None:
    """For a module's ``_load_from_state_dict``: the buffers ``names`` say what the weights mean (species,
    cutoff, energy scale), so a state dict whose values differ (beyond float32 rounding) is refused with
    both values named. Absent keys (checkpoints older than these buffers) pass."""
    for name in names:
        theirs, mine = state_dict.get(prefix + name), getattr(module, name)
        if theirs is None:
            continue
        same = theirs.shape == mine.shape and torch.allclose(theirs.double().cpu(), mine.double().cpu(), rtol=1e-6)
        if not same:
            raise CheckpointError(
                f"the checkpoint's {type(module).__name__} was trained with {name} = {theirs.tolist()}, but this "
                f"run builds it with {name} = {mine.tolist()} (other elements, cutoff or training split in the "
                "data?); use the data the checkpoint was trained on"
            )


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


def write_model_checkpoint(model: nn.Module, path: str | Path) -> Path:
    """Write ``model`` (spec and weights, no training state) as a checkpoint that
    :func:`sciml.calculators.load_model` and ``SciMLCalculator.from_checkpoint`` read; written to a temporary
    file first and renamed, so an interrupted write leaves no half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {f"model.{key}": value.detach().cpu() for key, value in model.state_dict().items()}
    temporary = path.with_name(f".{path.name}.partial")
    torch.save({"sciml_model": module_spec(model), "state_dict": state, VERSION_KEY: FORMAT_VERSION}, temporary)
    temporary.replace(path)
    return path
