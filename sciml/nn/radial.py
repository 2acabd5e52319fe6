"""Radial bases and the smooth cutoff envelope (distances in Å)."""

from __future__ import annotations

import torch
from torch import nn


def polynomial_envelope(distances: torch.Tensor, cutoff: float) -> torch.Tensor:
    """1 - 6x^5 + 15x^4 - 10x^3 with x = r / cutoff, 0 beyond: value, slope and curvature vanish at the cutoff."""
    x = (distances / cutoff).clamp(max=1.0)
    return 1 - x**3 * (10 - 15 * x + 6 * x**2)


class GaussianBasis(nn.Module):
    """exp(-(r - mu_k)^2 / (2 w^2)) on ``size`` fixed centres in [0, cutoff]. Shape: (E,) -> (E, size)."""

    def __init__(self, cutoff: float, size: int = 32) -> None:
        super().__init__()
        self.register_buffer("centres", torch.linspace(0.0, cutoff, size))
        self.width = cutoff / (size - 1)

    def forward(self, distances: torch.Tensor) -> torch.Tensor:
        return torch.exp(-0.5 * ((distances[:, None] - self.centres) / self.width) ** 2)
