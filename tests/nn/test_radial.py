"""Radial bases and the cutoff envelope: the functions they claim to be, and smooth where the model needs it."""

from __future__ import annotations

import math

import pytest
import torch

from sciml.models import E2Former
from sciml.nn.radial import RADIAL_BASES, BesselBasis, polynomial_envelope


def test_bessel_basis_is_the_orthonormal_radial_sine_basis():
    """sqrt(2 / rc) sin(k pi r / rc) / r, orthonormal with the weight r^2 on [0, rc] (float64, 1e-9)."""
    cutoff = 5.0
    basis = BesselBasis(cutoff, 8).double()
    r = torch.linspace(0.0, cutoff, 20_001, dtype=torch.float64)
    values = basis(r)
    frequencies = torch.arange(1, 9, dtype=torch.float64) * math.pi / cutoff
    expected = (2 / cutoff) ** 0.5 * torch.sin(frequencies * r[1:, None]) / r[1:, None]
    torch.testing.assert_close(values[1:], expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(values[0], (2 / cutoff) ** 0.5 * frequencies)  # the limit r -> 0
    gram = torch.trapezoid(values[:, :, None] * values[:, None, :] * r[:, None, None] ** 2, r, dim=0)
    torch.testing.assert_close(gram, torch.eye(8, dtype=torch.float64), rtol=0, atol=1e-6)
    assert values[-1].abs().max() < 1e-12  # every function vanishes at the cutoff


def test_envelope_value_slope_and_curvature_vanish_at_the_cutoff():
    r = torch.tensor([4.999999, 5.0, 6.0], dtype=torch.float64, requires_grad=True)
    envelope = polynomial_envelope(r, 5.0)
    (slope,) = torch.autograd.grad(envelope.sum(), r, create_graph=True)
    (curvature,) = torch.autograd.grad(slope.sum(), r)
    assert envelope[1:].abs().max() == 0 and slope[1:].abs().max() == 0 and curvature[1:].abs().max() == 0
    assert envelope[0] < 1e-15 and slope[0].abs() < 1e-9


@pytest.mark.parametrize("radial", sorted(RADIAL_BASES))
def test_e2former_takes_every_radial_basis(radial):
    model = E2Former([1, 6], 4.0, channels=8, layers=1, heads=2, radial=radial, radial_basis=6)
    assert model.radial_basis.size == 6 and isinstance(model.radial_basis, RADIAL_BASES[radial])
    with pytest.raises(ValueError, match="radial must be one of"):
        E2Former([1], 4.0, radial="chebyshev")
