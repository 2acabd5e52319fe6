"""Thin ``nn.Module`` wrappers over :mod:`sciml.koopman.functional` that hold only hyper-parameters.

Every loss takes ``(f, g)`` of shape (B, k) (constant already prepended) and returns a scalar to minimise.
"""

from __future__ import annotations

import torch
from torch import nn

from sciml.koopman import functional as F


class LoRALoss(nn.Module):
    """Nested low-rank-approximation loss (the default). Args: nesting: None|"jnt"|"seq";
    estimator: "ustat"|"plugin"|"split"."""

    def __init__(self, nesting: str | None = "jnt", estimator: str = "ustat") -> None:
        super().__init__()
        F.nesting_weights(2, nesting, torch.zeros(()))  # validate early
        if estimator not in F.ESTIMATORS:
            raise ValueError(f"unknown estimator '{estimator}'; choose one of {F.ESTIMATORS}")
        self.nesting, self.estimator = nesting, estimator

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.lora_loss(f, g, self.nesting, self.estimator)


class VAMPLoss(nn.Module):
    """VAMPnet baseline: minus the VAMP-r score. Args: schatten: 1 or 2; epsilon: eigenvalue regulariser."""

    def __init__(self, schatten: int = 2, epsilon: float = 1e-6) -> None:
        super().__init__()
        self.schatten, self.epsilon = schatten, epsilon

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.vamp_loss(f, g, self.schatten, self.epsilon)


class DPNetLoss(nn.Module):
    """DPNet baseline. Args: metric_weight: gamma of the metric regulariser; relaxed: the relaxed score."""

    def __init__(self, metric_weight: float = 0.01, relaxed: bool = False, epsilon: float = 1e-6) -> None:
        super().__init__()
        self.metric_weight, self.relaxed, self.epsilon = metric_weight, relaxed, epsilon

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.dpnet_loss(f, g, self.metric_weight, self.relaxed, self.epsilon)
