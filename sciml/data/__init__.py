"""Data layer shared by both model families: ASE trajectories, graphs, lagged pairs, exact systems.

The Lightning data modules are imported on first use (``sciml.data.AtomsDataModule``): Lightning takes seconds
to import, and a calculator, an MD run or a kinetics report reads frames without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sciml.data.errors import DataError
from sciml.data.graph import frame_to_graph
from sciml.data.labels import LabelKeys, read_frame
from sciml.data.neighbours import radius_graph
from sciml.data.readers import Trajectory, read_trajectories

if TYPE_CHECKING:
    from sciml.data.array_datamodule import ArrayDataModule
    from sciml.data.atoms_datamodule import AtomsDataModule

_LAZY = {"ArrayDataModule": "sciml.data.array_datamodule", "AtomsDataModule": "sciml.data.atoms_datamodule"}

__all__ = [
    "ArrayDataModule",
    "AtomsDataModule",
    "DataError",
    "LabelKeys",
    "Trajectory",
    "frame_to_graph",
    "radius_graph",
    "read_frame",
    "read_trajectories",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
