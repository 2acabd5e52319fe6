"""Radial bases and the smooth cutoff envelope (distances in Å)."""

from __future__ import annotations

import math

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

    @property
    def size(self) -> int:
        return self.centres.numel()

    def forward(self, distances: torch.Tensor) -> torch.Tensor:
        return torch.exp(-0.5 * ((distances[:, None] - self.centres) / self.width) ** 2)


class BesselBasis(nn.Module):
    """sqrt(2 / cutoff) sin(k pi r / cutoff) / r for k = 1..``size`` (DimeNet's and MACE's radial basis: the
    eigenfunctions of the radial Laplacian that vanish at the cutoff), fixed frequencies. Shape: (E,) -> (E, size).
    Distances are clamped at 1e-9 Å (the k pi / cutoff limit at r = 0 is then exact to rounding)."""

    def __init__(self, cutoff: float, size: int = 8) -> None:
        super().__init__()
        self.cutoff, self._size = float(cutoff), int(size)
        self.prefactor = (2.0 / cutoff) ** 0.5

    @property
    def size(self) -> int:
        return self._size

    def forward(self, distances: torch.Tensor) -> torch.Tensor:
        # frequencies in the distances' dtype (a float32 buffer cast to float64 would be off by 1e-8)
        k = torch.arange(1, self._size + 1, dtype=distances.dtype, device=distances.device)
        r = distances.clamp(min=1e-9)[:, None]
        return self.prefactor * torch.sin(k * (math.pi / self.cutoff) * r) / r


RADIAL_BASES = {"gaussian": GaussianBasis, "bessel": BesselBasis}
