"""Koopman loss identities (float64): LoRA against an exact finite-state chain, nesting, estimators,
sequential stop-gradients, and VAMP-2 against an independent numpy computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sciml.koopman import functional as F
from sciml.koopman.losses import DPNetLoss, VAMPLoss


def chain(n_states: int = 5, seed: int = 0):
    """A random reversible-free Markov chain: transition P, stationary pi."""
    rng = np.random.default_rng(seed)
    transition = rng.random((n_states, n_states)) + 0.2
    transition /= transition.sum(1, keepdims=True)
    values, vectors = np.linalg.eig(transition.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return transition, pi / pi.sum()


def population_loss(f: np.ndarray, g: np.ndarray, transition: np.ndarray, pi: np.ndarray) -> float:
    """-2 tr(T) + tr(M_f M_g) with exact expectations over (x ~ pi, x' ~ P(x, .))."""
    joint = pi[:, None] * transition  # p(x, x')
    t = f.T @ joint @ g
    m_f, m_g = f.T @ (pi[:, None] * f), g.T @ (joint.sum(0)[:, None] * g)
    return -2 * np.trace(t) + np.trace(m_f @ m_g)


def test_lora_equals_hilbert_schmidt_identity_on_a_finite_chain():
    transition, pi = chain()
    rng = np.random.default_rng(1)
    f, g = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    # K: L2(pi) -> L2(pi); in the orthonormal basis e_s / sqrt(pi_s): K_hat = D^{1/2} P D^{-1/2}
    root = np.sqrt(pi)
    koopman = root[:, None] * transition / root[None, :]
    low_rank = (root[:, None] * f) @ (g * root[:, None]).T  # sum_i f_i ⊗ g_i in the same basis
    expected = np.sum((koopman - low_rank) ** 2) - np.sum(koopman**2)
    assert population_loss(f, g, transition, pi) == pytest.approx(expected, abs=1e-12)
    # the plug-in loss over the exact joint law (weighted samples) is the population loss
    states = np.array([(a, b) for a in range(5) for b in range(5)])
    weights = (pi[:, None] * transition).ravel()
    big = 200_000
    draws = np.random.default_rng(2).choice(len(states), size=big, p=weights)
    fx, gy = torch.tensor(f[states[draws, 0]]), torch.tensor(g[states[draws, 1]])
    estimate = float(F.lora_loss(fx, gy, nesting=None, estimator="ustat"))
    assert estimate == pytest.approx(expected, abs=0.05)


def test_joint_nesting_is_the_weighted_sum_of_prefix_losses():
    generator = torch.Generator().manual_seed(0)
    f, g = (
        torch.randn(64, 6, generator=generator, dtype=torch.float64),
        torch.randn(64, 6, generator=generator, dtype=torch.float64),
    )
    k = f.shape[1]
    for estimator in ("plugin", "ustat", "split"):
        explicit = sum(F.lora_loss(f[:, :m], g[:, :m], None, estimator) for m in range(1, k + 1)) / k
        assert float(F.lora_loss(f, g, "jnt", estimator)) == pytest.approx(float(explicit), abs=1e-12)


def test_ustatistic_is_unbiased_and_plugin_is_not():
    transition, pi = chain(seed=3)
    rng = np.random.default_rng(4)
    f, g = rng.normal(size=(5, 3)) + 1, rng.normal(size=(5, 3)) + 1
    truth = population_loss(f, g, transition, pi)
    states = np.array([(a, b) for a in range(5) for b in range(5)])
    weights = (pi[:, None] * transition).ravel()
    batch, batches = 8, 4000
    draws = rng.choice(len(states), size=(batches, batch), p=weights)
    fx, gy = torch.tensor(f[states[draws, 0]]), torch.tensor(g[states[draws, 1]])
    ustat = torch.stack([F.lora_loss(a, b, None, "ustat") for a, b in zip(fx, gy, strict=True)])
    plugin = torch.stack([F.lora_loss(a, b, None, "plugin") for a, b in zip(fx, gy, strict=True)])
    error = float(ustat.std()) / batches**0.5
    assert abs(float(ustat.mean()) - truth) < 4 * error
    assert abs(float(plugin.mean()) - truth) > 4 * error  # O(1/B) bias, visible at B = 8


def test_sequential_nesting_sends_no_gradient_to_lower_modes():
    generator = torch.Generator().manual_seed(5)
    f = torch.randn(32, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    g = torch.randn(32, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    # the loss terms that pair mode 3 with lower modes must not move modes 0..2: compare the gradient of
    # the full seq loss with that of the loss on the first 3 modes
    full = torch.autograd.grad(F.lora_loss(f, g, "seq", "plugin"), (f, g))
    prefix = torch.autograd.grad(F.lora_loss(f[:, :3], g[:, :3], "seq", "plugin"), (f, g))
    for a, b in zip(full, prefix, strict=True):
        torch.testing.assert_close(a[:, :3], b[:, :3], atol=1e-12, rtol=0)
    same_value = F.lora_loss(f, g, "seq", "plugin").detach()
    assert float(same_value) == pytest.approx(float(F.lora_loss(f, g, None, "plugin").detach()))


def test_vamp2_equals_independent_numpy_computation():
    generator = torch.Generator().manual_seed(6)
    f = F.with_constant(torch.randn(500, 3, generator=generator, dtype=torch.float64))
    g = F.with_constant(0.5 * f[:, 1:] + torch.randn(500, 3, generator=generator, dtype=torch.float64))
    fx, gy = f.numpy(), g.numpy()
    c00, c11, c01 = fx.T @ fx / 500, gy.T @ gy / 500, fx.T @ gy / 500

    def inv_sqrt(c):
        w, v = np.linalg.eigh(c)
        return v @ np.diag(1 / np.sqrt(w)) @ v.T

    expected = np.sum((inv_sqrt(c00) @ c01 @ inv_sqrt(c11)) ** 2)
    ours = {"whitening": "eigh", "center": False}
    assert float(F.vamp_score(f, g, 2, epsilon=0.0, **ours)) == pytest.approx(expected, rel=1e-10)
    singular = np.linalg.svd(inv_sqrt(c00) @ c01 @ inv_sqrt(c11), compute_uv=False)
    assert float(F.vamp_score(f, g, 1, epsilon=0.0, **ours)) == pytest.approx(singular.sum(), rel=1e-10)
    assert float(F.metric_regulariser(torch.eye(3))) == pytest.approx(0.0, abs=1e-12)
    assert float(F.dpnet_loss(f, g, 0.0, False, 0.0, **ours)) == pytest.approx(-expected, rel=1e-10)


def test_vamp2_equals_deeptime_with_the_constant_prepended():
    """deeptime scores mean-free covariances and adds 1 (the constant); prepending the constant to raw
    features gives the same number."""
    deep = pytest.importorskip("deeptime.decomposition.deep")
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4000, 2, generator=generator, dtype=torch.float64)
    y = 0.7 * x + 0.5 * torch.randn(4000, 2, generator=generator, dtype=torch.float64)
    fx = torch.cat([x, torch.sin(x), x[:, :1] ** 2 + 1.0], dim=1)
    fy = torch.cat([y, torch.sin(y), y[:, :1] ** 2 + 1.0], dim=1)
    ours = F.vamp_score(F.with_constant(fx), F.with_constant(fy), 2, 1e-12, whitening="eigh", center=False)
    theirs = deep.vamp_score(fx, fy, method="VAMP2", epsilon=1e-12, mode="trunc")
    assert float(ours) == pytest.approx(float(theirs), rel=1e-8)


def test_sym_inverse_modes_against_deeptime_and_pinv():
    """``regularize`` equals deeptime's ``sym_inverse`` (PSD input: |lambda| + eps = |lambda + eps|);
    ``truncate`` is the pseudo-inverse (square root) of a rank-deficient matrix, cutoff relative."""
    deep = pytest.importorskip("deeptime.decomposition.deep._vampnet")
    from sciml.koopman.linalg import sym_inverse

    rng = np.random.default_rng(0)
    factor = torch.as_tensor(rng.normal(size=(5, 3)))
    singular = factor @ factor.T  # rank 3
    full = singular + 0.1 * torch.eye(5, dtype=torch.float64)
    for sqrt in (False, True):
        ours = sym_inverse(full, 1e-6, sqrt=sqrt, mode="regularize")
        torch.testing.assert_close(ours, deep.sym_inverse(full, 1e-6, return_sqrt=sqrt, mode="regularize"))
    pinv = torch.linalg.pinv(singular, hermitian=True)
    torch.testing.assert_close(sym_inverse(singular, 1e-10), pinv)
    inverse_sqrt = sym_inverse(singular, 1e-10, sqrt=True)
    torch.testing.assert_close(inverse_sqrt @ inverse_sqrt, pinv)
    torch.testing.assert_close(inverse_sqrt @ singular @ inverse_sqrt, singular @ pinv)  # projector on the range
    scaled = sym_inverse(1e4 * singular, 1e-10, sqrt=True)  # the cutoff is relative: same rank kept
    torch.testing.assert_close(scaled * 1e2, inverse_sqrt)
    with pytest.raises(ValueError, match="unknown sym_inverse mode 'clip'"):
        sym_inverse(full, mode="clip")


def test_published_baselines_against_independent_formulas():
    """VAMP (lstsq whitening, centred) and DPNet (relaxed, centred, mean regulariser weighted 0.5 gamma) as in
    the NeuralKoopmanSVD code, computed here with numpy; centred VAMP-r is the uncentred score with the
    constant minus 1; the former sciml DPNet stays reachable through options."""
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(500, 3, generator=generator, dtype=torch.float64)
    f = F.with_constant(torch.cat([x, x[:, :1] ** 2], 1))
    g = F.with_constant(0.6 * f[:, 1:] + 0.8 * torch.randn(500, 4, generator=generator, dtype=torch.float64))
    fx, gy = (v[:, 1:].numpy() - v[:, 1:].numpy().mean(0) for v in (f, g))
    c_f, c_g, c_fg = fx.T @ fx / 500, gy.T @ gy / 500, fx.T @ gy / 500
    vamp2 = np.trace(np.linalg.lstsq(c_f, c_fg, rcond=None)[0] @ np.linalg.lstsq(c_g, c_fg.T, rcond=None)[0])
    assert float(F.vamp_score(f, g)) == pytest.approx(vamp2, rel=1e-10)
    ours = {"epsilon": 0.0, "whitening": "eigh", "center": False}
    assert float(F.vamp_score(f, g)) == pytest.approx(float(F.vamp_score(f, g, 2, **ours)) - 1, rel=1e-9)
    assert float(F.vamp_score(f, g, 1)) == pytest.approx(float(F.vamp_score(f, g, 1, **ours)) - 1, rel=1e-9)

    def deformation(c: np.ndarray) -> float:
        values = np.linalg.eigvalsh(c)
        return float(np.mean(values**2 - values - np.log(values)))

    relaxed = np.sum(c_fg**2) / (np.linalg.norm(c_f, 2) * np.linalg.norm(c_g, 2) + 1e-8)
    published = -relaxed + 0.5 * 1.0 * (deformation(c_f) + deformation(c_g))
    assert float(DPNetLoss()(f, g)) == pytest.approx(published, rel=1e-10)
    assert float(VAMPLoss()(f, g)) == pytest.approx(-vamp2, rel=1e-10)
    former = DPNetLoss(metric_weight=0.02, relaxed=False, center=False, reduction="sum", whitening="eigh", epsilon=1e-6)
    m_f, m_g = (v.T @ v / 500 for v in (f, g))
    expected = -F.vamp_score(f, g, 2, 1e-6, "eigh", False) + 0.01 * (
        F.metric_regulariser(m_f, 1e-6) + F.metric_regulariser(m_g, 1e-6)
    )
    assert float(former(f, g)) == pytest.approx(float(expected), rel=1e-12)
    with pytest.raises(ValueError, match="unknown whitening 'svd'"):
        VAMPLoss(whitening="svd")
