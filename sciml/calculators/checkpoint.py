"""Rebuild a trained model from a sciml checkpoint without executing pickled code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from sciml.calculators.baseline import BASELINE_KEY
from sciml.nn.checkpoint import CheckpointError, build_module, format_version, read_checkpoint, sub_state_dict


def load_model(path: str | Path, device: str | torch.device = "cpu", use_ema: bool = True) -> nn.Module:
    """The energy model stored in a ``PotentialModule`` checkpoint, in eval mode.

    The file is read with ``torch.load(weights_only=True)``: a checkpoint that needs arbitrary pickled
    code is refused, never executed. The model class must live inside the ``sciml`` package. The model has
    the floating-point dtype of the stored weights (a float64-trained model loads without rounding). A
    checkpoint whose model is a difference to a cheap method (:mod:`sciml.calculators.baseline`) is refused: the
    model alone is not the potential (``SciMLCalculator.from_checkpoint`` adds the method).
    """
    model, baseline = load_model_and_baseline(path, device, use_ema)
    if baseline is not None:
        raise CheckpointError(
            f"checkpoint '{path}' models the difference to {baseline['method']}: its energies and forces are "
            f"{baseline['method']}'s plus the model's, which only SciMLCalculator.from_checkpoint (sciml md with one "
            "replica, the ASE calculator) computes; the replica driver and the exports run the model alone"
        )
    return model


def load_model_and_baseline(
    path: str | Path, device: str | torch.device = "cpu", use_ema: bool = True
) -> tuple[nn.Module, dict | None]:
    """:func:`load_model`'s model and the checkpoint's baseline method (``None`` when its model is the whole
    potential; else the stored dict of :mod:`sciml.calculators.baseline`)."""
    checkpoint = read_checkpoint(path, device)
    spec = checkpoint.get("sciml_model")
    if not spec:
        raise CheckpointError(f"checkpoint '{path}' holds no 'sciml_model' entry (not written by sciml fit?)")
    model = build_module(spec, path, format_version(checkpoint, path))
    if use_ema and "ema_state_dict" in checkpoint:
        state = checkpoint["ema_state_dict"]
    else:
        state = sub_state_dict(checkpoint["state_dict"], "model.")
    stored = next((value.dtype for value in state.values() if value.is_floating_point()), None)
    if stored is not None:  # built in the default dtype: a float64 checkpoint would be rounded on loading
        model = model.to(stored)
    model.load_state_dict(state)
    return model.to(device).eval(), checkpoint.get(BASELINE_KEY)


class CheckpointModels:
    """Trained models by checkpoint: each loaded once (again only when its file changes) and kept in memory, so
    that the steps of a round or a confirmation share one model instead of reading the file each."""

    def __init__(self, loader: Callable[[Path], nn.Module] = load_model, keep: int = 2) -> None:
        self.loader, self.keep, self.loaded = loader, keep, {}

    def __call__(self, path: Path) -> nn.Module:
        """The model of checkpoint ``path``; the ``keep`` most recently loaded stay in memory."""
        stat = Path(path).stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if key not in self.loaded:
            while len(self.loaded) >= self.keep:
                del self.loaded[next(iter(self.loaded))]  # the oldest
            self.loaded[key] = self.loader(path)
        return self.loaded[key]
