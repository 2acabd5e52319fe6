"""Feature maps for Koopman models on array states: an MLP, optionally on sinusoidal features."""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.nn.checkpoint import records_config


class SinusoidalFeatures(nn.Module):
    """x -> [sin(2 pi n x / period), cos(2 pi n x / period)] for n = 1..harmonics: periodic states.

    Shape: (B, d) -> (B, 2 d harmonics).
    """

    def __init__(self, period: float = 1.0, harmonics: int = 1) -> None:
        super().__init__()
        self.period, self.harmonics = period, harmonics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = torch.arange(1, self.harmonics + 1, dtype=x.dtype, device=x.device)
        phase = 2 * math.pi * x[..., None] * n / self.period
        return torch.cat([torch.sin(phase), torch.cos(phase)], dim=-1).flatten(1)


class MLPEncoder(nn.Module):
    """MLP feature map (B, input_dim) -> (B, output_dim); the Koopman module prepends the constant.

    Args:
        input_dim: state dimension.
        output_dim: learned functions (k - 1 when the constant is prepended).
        hidden: widths of the hidden layers.
        activation: ``"silu"``, ``"tanh"``, ``"leaky_relu"`` or ``"gelu"``.
        periodic: map each coordinate to sinusoidal features first (``period``, ``harmonics``).
    """

    ACTIVATIONS = {"silu": nn.SiLU, "tanh": nn.Tanh, "leaky_relu": nn.LeakyReLU, "gelu": nn.GELU}

    @records_config
    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "silu",
        periodic: bool = False,
        period: float = 1.0,
        harmonics: int = 1,
    ) -> None:
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"unknown activation '{activation}'; choose one of {sorted(self.ACTIVATIONS)}")
        layers: list[nn.Module] = [SinusoidalFeatures(period, harmonics)] if periodic else []
        width = input_dim * 2 * harmonics if periodic else input_dim
        for size in hidden:
            layers += [nn.Linear(width, size), self.ACTIVATIONS[activation]()]
            width = size
        layers.append(nn.Linear(width, output_dim))
        self.net = nn.Sequential(*layers)
        self.input_dim, self.output_dim = input_dim, output_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
