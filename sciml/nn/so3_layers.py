"""Equivariant layers on channels-last features (N, (lmax + 1)^2, C) in the layout ``DegreeLayout.up_to(lmax)``:
degree l occupies rows l^2..(l+1)^2 - 1."""

from __future__ import annotations

import math

import torch
from torch import nn

from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.so3 import float64_default


class SO3Linear(nn.Module):
    """Per-degree channel mixing x_l @ W_l / sqrt(C_in), bias on l = 0 only. (N, M, C_in) -> (N, M, C_out)."""

    def __init__(self, lmax: int, channels_in: int, channels_out: int) -> None:
        super().__init__()
        self.lmax, self.layout = lmax, DegreeLayout.up_to(lmax)
        self.weight = nn.Parameter(torch.empty(lmax + 1, channels_in, channels_out))
        self.bias = nn.Parameter(torch.empty(channels_out))
        self.scale = 1.0 / math.sqrt(channels_in)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Standard-normal weights (the 1 / sqrt(C_in) is applied in forward), zero bias."""
        nn.init.normal_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = (self.weight * self.scale).unbind(0)
        blocks = [block @ weight for block, weight in zip(self.layout.blocks(x), weights, strict=True)]
        blocks[0] = blocks[0] + self.bias
        return torch.cat(blocks, dim=1)


class Invariants(nn.Module):
    """Rotation-invariant scalars of all degrees: sum_m (A_l x)_lm (B_l x)_lm per degree and channel.

    Shape: (N, M, C) -> (N, (lmax + 1) * C_out).
    """

    def __init__(self, lmax: int, channels_in: int, channels_out: int) -> None:
        super().__init__()
        self.lmax, self.layout = lmax, DegreeLayout.up_to(lmax)
        self.left = SO3Linear(lmax, channels_in, channels_out)
        self.right = SO3Linear(lmax, channels_in, channels_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.left(x), self.right(x)
        pairs = zip(self.layout.blocks(a), self.layout.blocks(b), strict=True)
        return torch.cat([(left * right).sum(1) for left, right in pairs], dim=1)


NORMS = ("centred", "joint", "separable")


class EquivariantRMSNorm(nn.Module):
    """Layer norm of the l = 0 channels; the l > 0 part divided by a degree-balanced RMS (each degree weighs
    equally); per-degree per-channel affine weights.

    ``kind`` says which RMS divides the l > 0 part:

    - ``"separable"`` (EquiformerV2): the l > 0 degrees' own. It divides the l > 0 features by their own size,
      however small: at a site of high symmetry they vanish exactly (l = 1 at every centre of inversion, l = 1
      and 2 at every cubic or tetrahedral site: a perfect crystal, the carbon of methane), and the norm blows
      their rounding noise up by 1 / sqrt(eps) per layer. Measured on a perfect 512-atom fcc lattice (forces
      zero by symmetry): float64 forces of 0.04 eV/Å and float32 forces of 2e4 eV/Å after seven norms.
    - ``"joint"``: over every degree, the scalars' raw mean square included, so the gain on the l > 0 part is
      bounded by the scalars' size and rounding noise stays at rounding level (1e-16 and 3e-7 eV/Å there).
      The scalars' mean over the channels, which their layer norm removes, still sets the l > 0 gain.
    - ``"centred"`` (default): over every degree, with the scalars' variance over the channels (what their
      layer norm divides by) in place of their mean square: as exact at symmetric sites as ``"joint"``, and the
      l > 0 gain no longer depends on the scalars' channel mean, which the scalars' own norm discards. At
      equal epochs on aspirin it matched or beat the joint norm in both paired runs
      (``benchmarks/results/accuracy_ablation_8_epochs.md``).

    Shape: (N, (lmax + 1)^2, C) -> the same.
    """

    def __init__(self, lmax: int, channels: int, eps: float = 1e-5, kind: str = "centred") -> None:
        super().__init__()
        if kind not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")
        self.lmax, self.eps, self.layout, self.kind = lmax, eps, DegreeLayout.up_to(lmax), kind
        self.weight = nn.Parameter(torch.empty(lmax + 1, channels))
        self.bias = nn.Parameter(torch.empty(channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        degree_blocks = self.layout.blocks(x)  # (N, 2l + 1, C) each
        weights = self.weight.unbind(0)
        centred = degree_blocks[0] - degree_blocks[0].mean(-1, keepdim=True)  # (N, 1, C)
        scalars = centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps)
        blocks = [scalars * weights[0] + self.bias]
        if self.lmax > 0:
            powers = [block.pow(2).mean(1) for block in degree_blocks[1:]]  # (N, C) per degree
            if self.kind == "joint":
                powers.insert(0, degree_blocks[0][:, 0].pow(2))
            elif self.kind == "centred":
                powers.insert(0, centred[:, 0].pow(2))
            power = torch.stack(powers, 0).mean(0)  # (N, C)
            inverse_rms = torch.rsqrt(power.mean(-1, keepdim=True) + self.eps)[:, None]
            pairs = zip(degree_blocks[1:], weights[1:], strict=True)
            blocks += [block * inverse_rms * weight for block, weight in pairs]
        return torch.cat(blocks, dim=1)

    def extra_repr(self) -> str:
        return f"lmax={self.lmax}, kind={self.kind!r}"


class GatedFeedForward(nn.Module):
    """SO3Linear -> gate (SiLU on scalars, sigmoid gates from scalars on each l > 0) -> SO3Linear."""

    def __init__(self, lmax: int, channels: int, hidden: int) -> None:
        super().__init__()
        self.lmax, self.hidden, self.layout = lmax, hidden, DegreeLayout.up_to(lmax)
        self.up = SO3Linear(lmax, channels, hidden)
        self.gates = nn.Linear(channels, lmax * hidden)
        self.down = SO3Linear(lmax, hidden, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(x)
        gates = torch.sigmoid(self.gates(x[:, 0])).reshape(-1, self.lmax, self.hidden)
        degree_blocks = self.layout.blocks(y)
        blocks = [nn.functional.silu(degree_blocks[0])]
        blocks += [block * gates[:, None, l] for l, block in enumerate(degree_blocks[1:])]
        return self.down(torch.cat(blocks, dim=1))


class S2FeedForward(nn.Module):
    """SO3Linear -> separable S2 activation -> SO3Linear (EquiformerV2's and E2Former's default FFN).

    The scalars pass through SiLU; every degree together is evaluated on a grid of points on the sphere
    (e3nn ``ToS2Grid``, ``resolution`` latitudes x 2 ``resolution`` longitudes), SiLU is applied point by
    point and the l > 0 part is projected back (``FromS2Grid``). Exact under inversion (the grid is symmetric
    under n -> -n), equivariant under rotations only up to the grid's aliasing (measured in the tests).

    Shape: (N, (lmax + 1)^2, C) -> same.
    """

    def __init__(self, lmax: int, channels: int, hidden: int, resolution: int = 18) -> None:
        super().__init__()
        from e3nn import o3

        self.lmax = lmax
        self.up = SO3Linear(lmax, channels, hidden)
        self.down = SO3Linear(lmax, hidden, channels)
        grid = (resolution, 2 * resolution)
        with float64_default():  # float64 grids: float32 ones limit the float64 model to 1e-7
            self.to_grid = o3.ToS2Grid(lmax, grid, normalization="component")
            self.from_grid = o3.FromS2Grid(grid, lmax, normalization="component")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(x)
        on_grid = self.to_grid(y.transpose(1, 2))  # (N, H, beta, alpha)
        back = self.from_grid(nn.functional.silu(on_grid)).transpose(1, 2)  # (N, M, H)
        return self.down(torch.cat([nn.functional.silu(y[:, :1]), back[:, 1:]], dim=1))
