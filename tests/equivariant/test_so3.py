"""SO(3) identities in float64 to 1e-12: the power rule, binomial translation, 6j recoupling, rotations."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from sympy.physics.wigner import wigner_6j as sympy_6j

from sciml.equivariant.so3 import (
    clebsch_gordan,
    couple,
    random_rotation,
    solid_harmonics,
    spherical_harmonics,
    wigner_6j,
    wigner_d,
)

TOL = 1e-12


@pytest.fixture
def vectors():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 7, 3, dtype=torch.float64, generator=generator) * 1.5


def test_wigner_6j_matches_sympy_exactly():
    for js in itertools.product(range(5), repeat=6):
        assert abs(wigner_6j(*js) - float(sympy_6j(*js))) < 1e-15, js


def test_clebsch_gordan_is_unitary():
    for l1, l2 in itertools.product(range(4), repeat=2):
        for l3 in range(abs(l1 - l2), l1 + l2 + 1):
            cg = clebsch_gordan(l1, l2, l3).reshape(-1, 2 * l3 + 1)
            torch.testing.assert_close(cg.T @ cg, torch.eye(2 * l3 + 1, dtype=torch.float64), atol=TOL, rtol=0)


def test_power_rule_kappa_one(vectors):
    r = vectors[0]
    for a, b in itertools.product(range(4), repeat=2):
        lhs = couple(solid_harmonics(a, r), solid_harmonics(b, r), a, b, a + b)
        assert (lhs - solid_harmonics(a + b, r)).abs().max() < TOL * max(1, r.norm(dim=-1).max() ** (a + b))
    torch.testing.assert_close(solid_harmonics(1, r), r, atol=TOL, rtol=0)  # P^1(r) = r


def test_binomial_translation(vectors):
    x, y = vectors
    for L in range(5):
        lhs = solid_harmonics(L, x - y)
        rhs = sum(
            (-1) ** b * math.comb(L, b) * couple(solid_harmonics(b, y), solid_harmonics(L - b, x), b, L - b, L)
            for b in range(L + 1)
        )
        scale = max(1.0, float((x.norm(dim=-1) + y.norm(dim=-1)).max()) ** L)
        assert (lhs - rhs).abs().max() < TOL * scale, L


def test_six_j_recoupling(vectors):
    x, y = vectors
    generator = torch.Generator().manual_seed(1)
    h = {a: torch.randn(7, 2 * a + 1, dtype=torch.float64, generator=generator) for a in range(3)}
    for L in range(1, 4):
        for a in range(3):
            for J in range(abs(a - L), a + L + 1):
                for b in range(L + 1):
                    c = L - b
                    inner = couple(solid_harmonics(b, y), solid_harmonics(c, x), b, c, L)
                    lhs = couple(h[a], inner, a, L, J)
                    rhs = torch.zeros_like(lhs)
                    for d in range(abs(a - b), a + b + 1):
                        if abs(d - c) <= J <= d + c:
                            w = (
                                (-1) ** (a + b + c + J)
                                * math.sqrt((2 * d + 1) * (2 * L + 1))
                                * wigner_6j(a, b, d, c, J, L)
                            )
                            rhs += w * couple(
                                couple(h[a], solid_harmonics(b, y), a, b, d), solid_harmonics(c, x), d, c, J
                            )
                    assert (lhs - rhs).abs().max() < TOL * 100, (L, a, J, b)


def test_rotations_and_wigner_d(vectors):
    rotation = random_rotation(generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(3, dtype=torch.float64), atol=TOL, rtol=0)
    assert abs(torch.det(rotation) - 1) < TOL
    r = vectors[0]
    for l in range(4):
        d = wigner_d(l, rotation)
        torch.testing.assert_close(
            spherical_harmonics(l, r @ rotation.T), spherical_harmonics(l, r) @ d.T, atol=TOL, rtol=0
        )
        torch.testing.assert_close(solid_harmonics(l, r @ rotation.T), solid_harmonics(l, r) @ d.T, atol=1e-11, rtol=0)
