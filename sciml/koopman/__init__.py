"""Koopman singular functions: pure losses, thin loss modules, encoders."""

from sciml.koopman.encoders import MLPEncoder, SinusoidalFeatures
from sciml.koopman.losses import DPNetLoss, LoRALoss, VAMPLoss

__all__ = ["DPNetLoss", "LoRALoss", "MLPEncoder", "SinusoidalFeatures", "VAMPLoss"]
