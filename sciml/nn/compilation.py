"""Inference compilation as a public seam: a module whose layers can be compiled for MD says so by having a
``compile_layers(static_shapes=False, **options)`` method (:class:`CompilesLayers`), and
:func:`compile_for_inference` compiles every such module inside a model: an
:class:`~sciml.models.E2Former` alone, each member of a committee, the model inside a last-layer uncertainty.
``nn.Module.compile`` (which compiles a whole ``forward``) is left as PyTorch defines it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import nn


@runtime_checkable
class CompilesLayers(Protocol):
    """A module with ``compile_layers(static_shapes: bool = False, **options)``: ``torch.compile`` of its
    per-edge and per-atom layers for inference; the state dict does not change."""

    def compile_layers(self, static_shapes: bool = False, **options) -> None: ...


def compile_for_inference(model: nn.Module, static_shapes: bool = False, **options) -> int:
    """Compile the layers of every module in ``model`` (itself included) that offers ``compile_layers``;
    ``options`` go to ``torch.compile``. Returns how many were compiled; a model with none is refused with
    its class named."""
    compiled = [module for module in model.modules() if isinstance(module, CompilesLayers)]
    if not compiled:
        raise ValueError(f"the {type(model).__name__} model has no layers to compile (no module with compile_layers)")
    for module in compiled:
        module.compile_layers(static_shapes=static_shapes, **options)
    return len(compiled)
