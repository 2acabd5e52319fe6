"""Koopman singular functions: pure losses, thin loss modules, encoders and the post-training estimator."""

from sciml.koopman.distances import DistanceEncoder, heavy_atoms, select_atoms
from sciml.koopman.encoders import MLPEncoder, SinusoidalFeatures
from sciml.koopman.estimator import KoopmanEstimator
from sciml.koopman.losses import DPNetLoss, LoRALoss, VAMPLoss
from sciml.koopman.molecular import MolecularEncoder

__all__ = [
    "DPNetLoss",
    "DistanceEncoder",
    "KoopmanEstimator",
    "LoRALoss",
    "MLPEncoder",
    "MolecularEncoder",
    "SinusoidalFeatures",
    "VAMPLoss",
    "heavy_atoms",
    "select_atoms",
]
