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
    """VAMPnet baseline: minus the VAMP-r score (see :func:`~sciml.koopman.functional.vamp_score`).

    Args: schatten: 1 or 2; whitening: ``"lstsq"`` (published) or ``"eigh"`` (regularised by ``epsilon``);
    center: mean-free covariances without the constant (published) or raw moments with it.
    """

    def __init__(self, schatten: int = 2, epsilon: float = 1e-6, whitening: str = "lstsq", center: bool = True) -> None:
        super().__init__()
        if whitening not in F.WHITENINGS:
            raise ValueError(f"unknown whitening '{whitening}'; choose one of {F.WHITENINGS}")
        self.schatten, self.epsilon, self.whitening, self.center = schatten, epsilon, whitening, center

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.vamp_loss(f, g, self.schatten, self.epsilon, self.whitening, self.center)


class DPNetLoss(nn.Module):
    """DPNet baseline, published defaults (see :func:`~sciml.koopman.functional.dpnet_loss`).

    Args: metric_weight: gamma (the regulariser is weighted 0.5 gamma); relaxed: the relaxed score (default);
    center: mean-free covariances; reduction: ``"mean"`` (published) or ``"sum"`` over eigenvalues;
    whitening: of the non-relaxed score; epsilon: eigenvalue floor (default k x machine epsilon).
    """

    def __init__(
        self,
        metric_weight: float = 1.0,
        relaxed: bool = True,
        epsilon: float | None = None,
        center: bool = True,
        reduction: str = "mean",
        whitening: str = "lstsq",
    ) -> None:
        super().__init__()
        if reduction not in F.REDUCTIONS or whitening not in F.WHITENINGS:
            raise ValueError(f"reduction must be one of {F.REDUCTIONS} and whitening one of {F.WHITENINGS}")
        self.metric_weight, self.relaxed, self.epsilon = metric_weight, relaxed, epsilon
        self.center, self.reduction, self.whitening = center, reduction, whitening

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.dpnet_loss(
            f, g, self.metric_weight, self.relaxed, self.epsilon, self.center, self.reduction, self.whitening
        )
