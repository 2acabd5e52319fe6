"""KoopmanEstimator on features whose span is known exactly: OU Hermite polynomials (self-adjoint,
sigma = lambda = exp(-n theta tau)) and polynomials of a non-normal Gaussian AR(1) (eigenvalues are
products of eig(M), singular values products of canonical correlations, and they differ)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from sciml.data import ArrayDataModule
from sciml.data.systems import GaussianAR1, OrnsteinUhlenbeck
from sciml.koopman import KoopmanEstimator, MLPEncoder
from sciml.nn.checkpoint import CheckpointError


class HermiteFeatures(nn.Module):
    """He_n(x / s) / sqrt(n!), n = 1..degree (orthonormal in L2 of N(0, s^2)): (B, 1) -> (B, degree)."""

    def __init__(self, scale: float, degree: int) -> None:
        super().__init__()
        self.scale, self.degree = scale, degree

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x[:, 0] / self.scale
        values = [torch.ones_like(z), z]
        for n in range(1, self.degree):
            values.append(z * values[n] - n * values[n - 1])
        return torch.stack([values[n] / math.sqrt(math.factorial(n)) for n in range(1, self.degree + 1)], dim=1)


class Monomials(nn.Module):
    """All monomials of total degree 1..degree of a 2-d state: (B, 2) -> (B, 9) for degree 3."""

    def __init__(self, degree: int = 3) -> None:
        super().__init__()
        self.powers = [(i, j) for i, j in itertools.product(range(degree + 1), repeat=2) if 0 < i + j <= degree]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x[:, 0] ** i * x[:, 1] ** j for i, j in self.powers], dim=1)


def pairs(system, n_steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    states = torch.as_tensor(system.simulate(n_steps, seed=seed)[0], dtype=torch.float64)
    return states[:-1], states[1:]


@pytest.fixture(scope="module")
def ou():
    system = OrnsteinUhlenbeck(theta=1.0, sigma=math.sqrt(2.0), dt=0.5)
    features = HermiteFeatures(float(system.stationary_std[0]), degree=4)
    return system, KoopmanEstimator(features).fit(pairs(system, 200_000, seed=0))


def test_ou_hermite_features_recover_exp_minus_n_theta_tau(ou):
    system, estimator = ou
    exact = torch.exp(-0.5 * torch.arange(5, dtype=torch.float64))
    assert torch.allclose(estimator.singular_values, exact, atol=0.02), estimator.singular_values
    assert torch.allclose(estimator.eigenvalues().real, exact, atol=0.02)
    assert estimator.eigenvalues().imag.abs().max() < 1e-6
    timescales = estimator.timescales(time_step=0.5)  # exact: 1 / (n theta) for n >= 1
    assert timescales[0] > 1e5  # the constant mode: |lambda| = 1 up to the 1e-7 clip
    assert torch.allclose(timescales[1:3], torch.tensor([1.0, 0.5], dtype=torch.float64), rtol=0.05)
    assert torch.allclose(estimator.edmd("g").diagonal(), exact, atol=0.02)  # orthonormal basis: M ~ I


def test_ou_forecast_and_eigenfunctions(ou):
    system, estimator = ou
    x0 = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)[:, None]
    truth = x0[:, None, :] * torch.exp(-0.5 * torch.arange(1, 4, dtype=torch.float64))[None, :, None]
    for method in ("cca", "edmd_f", "edmd_g"):
        assert torch.allclose(estimator.predict(x0, steps=3, method=method), truth, atol=0.02), method
    xi = estimator.eigenfunctions(x0)[:, 1].real  # the n = 1 eigenfunction is linear in x
    assert abs(np.corrcoef(xi.numpy(), x0[:, 0].numpy())[0, 1]) > 0.999


def test_ou_scores_on_held_out_data(ou):
    system, estimator = ou
    scores = estimator.score(pairs(system, 100_000, seed=1))
    optimum = float(torch.exp(-torch.arange(5, dtype=torch.float64)).sum())  # sum sigma_n^2, n < 5
    # products of He_4 are heavy tailed: 1e5 held-out pairs estimate these to about +-0.03
    assert scores["vamp2"] == pytest.approx(optimum, abs=0.04)
    assert scores["vampe"] == pytest.approx(optimum, abs=0.04)


def test_non_normal_ar1_eigenvalues_differ_from_singular_values():
    """Polynomials of degree <= 3 are invariant under K and its adjoint (the time-reversed AR(1)), so the
    estimator recovers K restricted to them: singular values rho_1^a rho_2^b and eigenvalues 0.8^a 0.5^b,
    a + b <= 3 (the operator's own 5th singular value, rho_1^4, is of degree 4 and out of reach)."""
    system = GaussianAR1(M=[[0.8, 0.5], [0.0, 0.5]], Q=[[0.3, 0.0], [0.0, 0.3]])
    estimator = KoopmanEstimator(Monomials(3)).fit(pairs(system, 300_000, seed=0))
    rho = system.canonical_correlations()
    degree_3_svals = sorted((rho[0] ** a * rho[1] ** b for a in range(4) for b in range(4) if a + b <= 3), reverse=True)
    degree_3_svals = torch.tensor(degree_3_svals[:5], dtype=torch.float64)
    assert system.singular_values(1, 5)[4] > degree_3_svals[4] + 0.1  # rho_1^4 = 0.64 vs rho_2 = 0.45
    assert torch.allclose(estimator.singular_values[:5], degree_3_svals, atol=0.03), estimator.singular_values
    degree_3_eigs = sorted((0.8**i * 0.5**j for i in range(4) for j in range(4) if i + j <= 3), reverse=True)
    learned = estimator.eigenvalues()
    assert learned.imag.abs().max() < 0.02
    assert torch.allclose(learned.real, torch.tensor(degree_3_eigs, dtype=torch.float64), atol=0.03), learned
    assert estimator.singular_values[1] - learned.real[1] > 0.08  # 0.895 vs 0.8: the operator is non-normal
    x0 = torch.tensor([[1.0, -0.5], [0.2, 0.7]], dtype=torch.float64)
    matrix = torch.tensor(system.M, dtype=torch.float64)
    truth = torch.stack([x0 @ torch.linalg.matrix_power(matrix, n).T for n in (1, 2)], dim=1)
    assert torch.allclose(estimator.predict(x0, steps=2), truth, atol=0.03)


def test_datamodule_fit_save_load_round_trip(tmp_path):
    data = ArrayDataModule(system=OrnsteinUhlenbeck(), n_steps=3000, lagtime=2, batch_size=64)
    torch.manual_seed(0)
    estimator = KoopmanEstimator(MLPEncoder(1, 3, hidden=(16,)), lagtime=2).fit(data)
    assert estimator.moments.count == len(data.dataset("train"))
    estimator.save(tmp_path / "estimator.pt")
    loaded = KoopmanEstimator.load(tmp_path / "estimator.pt")
    assert loaded.lagtime == 2
    assert torch.equal(loaded.singular_values, estimator.singular_values)
    x0 = torch.randn(4, 1)
    assert torch.equal(loaded.predict(x0, 3), estimator.predict(x0, 3))
    scores = estimator.score(data)
    assert loaded.score(data) == scores
    # VAMP-2 of k = 4 functions with the constant lies in (1, 4]; VAMP-E is its lower bound (fixed S)
    assert 1.0 < scores["vamp2"] <= 4.0 + 1e-9 and 0.0 < scores["vampe"] <= scores["vamp2"] + 1e-12
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a saved KoopmanEstimator"):
        KoopmanEstimator.load(tmp_path / "other.pt")
    unsaveable = KoopmanEstimator(HermiteFeatures(1.0, 2)).fit(pairs(OrnsteinUhlenbeck(), 100, 0))
    with pytest.raises(CheckpointError, match="keeps no `config`"):
        unsaveable.save(tmp_path / "x.pt")
    with pytest.raises(KeyError, match="moment 'gh_11:phi' was not accumulated"):
        estimator.predict(x0, 1, observable="phi")


def test_rank_truncates_the_koopman_matrix_only(ou):
    system, estimator = ou
    truncated = KoopmanEstimator(estimator.encoder_f, rank=3)
    truncated.moments = estimator.moments
    assert torch.equal(truncated.singular_values, estimator.singular_values)
    assert truncated.koopman_matrix.shape == (3, 3) and truncated.eigenvalues().shape == (3,)
    assert torch.allclose(truncated.eigenvalues().real, estimator.eigenvalues().real[:3], atol=0.01)
    assert truncated.predict(torch.zeros(2, 1), 2).shape == (2, 2, 1)


def test_timescales_are_inf_where_the_eigenvalue_modulus_reaches_one(ou, monkeypatch):
    """-lagtime dt / ln|lambda| is +inf (not -inf) for |lambda| >= 1, finite and positive below."""
    _, estimator = ou
    eigenvalues = torch.tensor([1.0, -1.0, 1.0 + 1e-9, 0.5j, math.exp(-2.0)], dtype=torch.complex128)
    monkeypatch.setattr(estimator, "eigenvalues", lambda: eigenvalues)
    timescales = estimator.timescales(time_step=0.5)
    assert torch.equal(timescales[:3], torch.full((3,), math.inf, dtype=torch.float64))
    torch.testing.assert_close(timescales[3:], torch.tensor([0.5 / math.log(2.0), 0.25], dtype=torch.float64))
