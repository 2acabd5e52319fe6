"""Models: plain ``nn.Module`` backbones (models with an uncertainty estimate: :mod:`sciml.uncertainty`)."""

import warnings

from sciml.models.e2former import E2Former

__all__ = ["E2Former"]

_MOVED = {"Committee": "sciml.uncertainty", "LastLayerUncertainty": "sciml.uncertainty"}


def __getattr__(name: str):
    """``sciml.models.Committee`` and ``sciml.models.LastLayerUncertainty`` moved to :mod:`sciml.uncertainty`
    in 0.3; the old names keep working for one release with a ``DeprecationWarning``."""
    if name in _MOVED:
        import importlib

        warnings.warn(f"sciml.models.{name} moved to {_MOVED[name]}.{name} in sciml 0.3; the old name stops "
                      "working in 0.4", DeprecationWarning, stacklevel=2)  # fmt: skip
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'sciml.models' has no attribute '{name}'")
