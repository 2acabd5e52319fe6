"""Rebuild a trained model from a sciml checkpoint without executing pickled code."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path

import torch
from torch import nn


class CheckpointError(ValueError):
    """The checkpoint cannot be used (unsafe, incomplete or not a sciml checkpoint)."""


def load_model(path: str | Path, device: str | torch.device = "cpu", use_ema: bool = True) -> nn.Module:
    """The energy model stored in a ``PotentialModule`` checkpoint, in eval mode.

    The file is read with ``torch.load(weights_only=True)``: a checkpoint that needs arbitrary pickled
    code is refused, never executed. The model class must live inside the ``sciml`` package.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"checkpoint '{path}' needs arbitrary pickled code to load; refusing it "
            f"(only weights_only=True checkpoints are accepted): {error}"
        ) from error
    except Exception as error:
        raise CheckpointError(f"checkpoint '{path}' could not be read ({type(error).__name__}: {error})") from error
    spec = checkpoint.get("sciml_model") if isinstance(checkpoint, dict) else None
    if not spec:
        raise CheckpointError(f"checkpoint '{path}' holds no 'sciml_model' entry (not written by sciml fit?)")
    class_path = spec["class_path"]
    if not class_path.startswith("sciml."):
        raise CheckpointError(f"checkpoint '{path}': model class '{class_path}' is outside the sciml package")
    module_name, _, class_name = class_path.rpartition(".")
    model_class = getattr(importlib.import_module(module_name), class_name)
    model = model_class(**spec["init_args"])
    if use_ema and "ema_state_dict" in checkpoint:
        state = checkpoint["ema_state_dict"]
    else:
        state = {
            key[len("model.") :]: value for key, value in checkpoint["state_dict"].items() if key.startswith("model.")
        }
    model.load_state_dict(state)
    return model.to(device).eval()
