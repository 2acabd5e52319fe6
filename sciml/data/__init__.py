"""Data layer shared by both model families: ASE trajectories, graphs, lagged pairs, exact systems."""

from sciml.data.array_datamodule import ArrayDataModule
from sciml.data.atoms_datamodule import AtomsDataModule
from sciml.data.errors import DataError
from sciml.data.graph import frame_to_graph
from sciml.data.labels import LabelKeys, read_frame
from sciml.data.neighbours import radius_graph
from sciml.data.readers import Trajectory, read_trajectories

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
