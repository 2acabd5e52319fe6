"""SO(3) utilities in e3nn conventions: real spherical and solid harmonics, Clebsch-Gordan, Wigner-6j.

Conventions (fixed once, used everywhere):

- Features of degree l have 2l + 1 components in e3nn's real basis (l = 1 is (x, y, z)); spherical
  harmonics use ``normalization="component"`` (|Y^l(r̂)|^2 = 2l + 1).
- Coupling [x ⊗ y]^l3 uses unitary Clebsch-Gordan coefficients C = sqrt(2 l3 + 1) * e3nn ``wigner_3j``,
  so that for every m3, sum_{m1 m2} C[m1, m2, m3]^2 = 1.
- Solid harmonics P^l(r) = c_l |r|^l Y^l(r̂) with c_l = sqrt(l! / ((2l + 1) (2l - 1)!!)), chosen so that
  [P^a(r) ⊗ P^b(r)]^(a+b) = P^(a+b)(r) exactly (P^0 = 1, P^1(r) = r).
- Parity: a degree-l feature has natural parity (-1)^l (e3nn ``0e, 1o, 2e``) and P^l(r) has parity (-1)^l, so
  a coupling a ⊗ b -> c preserves it when a + b + c is even (``tensor_product.parity_allowed``); the models
  keep only such paths by default (O(3)).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from functools import cache

import torch
from e3nn import o3


@contextmanager
def float64_default() -> Iterator[None]:
    """Build e3nn modules inside this block: they compute their coefficient buffers in the default dtype at
    construction, and float32 buffers cast to float64 later stay float32-accurate."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@cache
def _harmonics(l: int, normalize: bool) -> o3.SphericalHarmonics:
    """e3nn's harmonics module (no parameters or buffers), built once: ``o3.spherical_harmonics`` builds one at
    every call, seven times per E2Former call; built once, an aspirin energy + forces call took 0.3-0.8 ms less
    of 16-20 ms (2 CPU cores, four alternating runs of 100 calls)."""
    return o3.SphericalHarmonics(l, normalize, normalization="component")


def spherical_harmonics(l: int, vectors: torch.Tensor) -> torch.Tensor:
    """Y^l(r̂) of (..., 3) vectors -> (..., 2l + 1), component normalisation (zero vectors give 0 for l > 0)."""
    return _harmonics(l, True)(vectors)


@cache
def solid_harmonic_coefficient(l: int) -> float:
    """c_l of P^l(r) = c_l |r|^l Y^l(r̂)."""
    double_factorial = math.prod(range(2 * l - 1, 0, -2))
    return math.sqrt(math.factorial(l) / ((2 * l + 1) * double_factorial))


def solid_harmonics(l: int, vectors: torch.Tensor) -> torch.Tensor:
    """P^l(r): a homogeneous polynomial of degree l in r, (..., 3) -> (..., 2l + 1).

    Computed from e3nn's polynomial (``normalize=False``) harmonics, which are |r|^l Y^l(r̂), so it is a
    smooth polynomial everywhere, including r = 0.
    """
    unnormalised = _harmonics(l, False)(vectors)
    return solid_harmonic_coefficient(l) * unnormalised


@cache
def _clebsch_gordan_cpu(l1: int, l2: int, l3: int) -> torch.Tensor:
    return (o3.wigner_3j(l1, l2, l3, dtype=torch.float64) * math.sqrt(2 * l3 + 1)).contiguous()


def clebsch_gordan(l1: int, l2: int, l3: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """Unitary real Clebsch-Gordan tensor, shape (2l1 + 1, 2l2 + 1, 2l3 + 1); zero unless |l1 - l2| <= l3 <= l1 + l2."""
    return _clebsch_gordan_cpu(l1, l2, l3).to(dtype=dtype, device=device)


def couple(x: torch.Tensor, y: torch.Tensor, l1: int, l2: int, l3: int) -> torch.Tensor:
    """[x ⊗ y]^l3 of (..., 2l1 + 1) and (..., 2l2 + 1) -> (..., 2l3 + 1)."""
    return torch.einsum("...i,...j,ijk->...k", x, y, clebsch_gordan(l1, l2, l3, x.dtype, x.device))


def _triangle(a: int, b: int, c: int) -> bool:
    return abs(a - b) <= c <= a + b


def _delta(a: int, b: int, c: int) -> Fraction:
    f = math.factorial
    return Fraction(f(a + b - c) * f(a - b + c) * f(-a + b + c), f(a + b + c + 1))


@cache
def wigner_6j(j1: int, j2: int, j3: int, j4: int, j5: int, j6: int) -> float:
    """Exact Wigner 6j symbol {j1 j2 j3; j4 j5 j6} for integer j (Racah formula in exact rationals)."""
    triads = [(j1, j2, j3), (j1, j5, j6), (j4, j2, j6), (j4, j5, j3)]
    if not all(_triangle(*t) for t in triads):
        return 0.0
    square = math.prod((_delta(*t) for t in triads), start=Fraction(1))
    f = math.factorial
    total = Fraction(0)
    low = max(sum(t) for t in triads)
    high = min(j1 + j2 + j4 + j5, j2 + j3 + j5 + j6, j3 + j1 + j6 + j4)
    for t in range(low, high + 1):
        denominator = math.prod(f(t - sum(tr)) for tr in triads) * f(j1 + j2 + j4 + j5 - t)
        denominator *= f(j2 + j3 + j5 + j6 - t) * f(j3 + j1 + j6 + j4 - t)
        total += Fraction((-1) ** t * f(t + 1), denominator)
    return float(total) * math.sqrt(square)  # exact rationals, rounded once each


def random_rotation(dtype: torch.dtype = torch.float64, generator: torch.Generator | None = None) -> torch.Tensor:
    """A Haar-random rotation matrix (3, 3) with det +1."""
    q = torch.randn(4, dtype=dtype, generator=generator)
    return o3.quaternion_to_matrix(q / q.norm())


def _sphere_points(count: int) -> torch.Tensor:
    """Deterministic, well-spread unit vectors (Fibonacci sphere), float64."""
    k = torch.arange(count, dtype=torch.float64) + 0.5
    z = 1 - 2 * k / count
    phi = math.pi * (3 - math.sqrt(5)) * k
    radius = torch.sqrt(1 - z**2)
    return torch.stack([radius * torch.cos(phi), radius * torch.sin(phi), z], dim=-1)


def wigner_d(l: int, rotation: torch.Tensor) -> torch.Tensor:
    """Real Wigner-D matrix (2l + 1, 2l + 1) of a rotation: Y^l(R r) = D^l(R) Y^l(r).

    Solved in float64 by least squares from Y^l at fixed points on the sphere (exact to rounding),
    then cast to the rotation's dtype.
    """
    points = _sphere_points(4 * l + 4)
    rotation64 = rotation.to(torch.float64)
    before, after = spherical_harmonics(l, points), spherical_harmonics(l, points @ rotation64.T)
    return torch.linalg.lstsq(before, after).solution.T.to(rotation.dtype)
