"""Koopman losses as pure functions of feature batches f = f(x), g = g(x'), each of shape (B, k).

Moments: M_f = E[f f^T], M_g = E[g g^T], T = E[f(x) g(x')^T]. Callers prepend the constant function
(see :func:`with_constant`), which is the top singular pair and counts in k.

- LoRA: -2 tr(T) + tr(M_f M_g) = ||K - sum_i f_i ⊗ g_i||_HS^2 - ||K||_HS^2. No inverse, SVD or eigh.
- Joint nesting: -2 sum_l v_l T_ll + sum_lm W_lm (M_f)_lm (M_g)_lm, v_l = (k - l + 1)/k, W = min(v_l, v_m).
- Sequential nesting: stop-gradients put on the off-diagonal triangles of the moments, so mode l gets no
  gradient from the terms that pair it with modes m > l.
- Estimators of the quadratic term: ``plugin`` (biased, O(1/B)), ``ustat`` (drops the i = j terms;
  unbiased), ``split`` (moments from the two halves of the batch; unbiased).
- Baselines: VAMP-1/2 scores (whitening by M^{-1/2}, eigenvalues regularised |lambda| + eps) and DPNet
  (with its metric regulariser R(C) = tr(C^2 - C - ln C); relaxed variant).
"""

from __future__ import annotations

import torch

from sciml.koopman.linalg import sym_inverse

NESTINGS = (None, "jnt", "seq")
ESTIMATORS = ("ustat", "plugin", "split")


def with_constant(features: torch.Tensor) -> torch.Tensor:
    """Prepend the constant function 1: (B, k-1) -> (B, k)."""
    return torch.cat([torch.ones_like(features[:, :1]), features], dim=1)


def nesting_weights(k: int, nesting: str | None, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(v (k,), W (k, k)): weights of the correlation and of the quadratic term."""
    if nesting == "jnt":
        v = (k - torch.arange(k, dtype=like.dtype, device=like.device)) / k
        return v, torch.minimum(v[:, None], v[None, :])
    if nesting in (None, "seq"):
        return torch.ones(k, dtype=like.dtype, device=like.device), torch.ones(
            k, k, dtype=like.dtype, device=like.device
        )
    raise ValueError(f"unknown nesting '{nesting}'; choose one of {NESTINGS}")


def second_moment(f: torch.Tensor, sequential: bool = False) -> torch.Tensor:
    """Sum of outer products sum_b f_b f_b^T, (k, k), by one matrix product (O(B k^2)). With ``sequential``
    the entry (l, m), l != m, carries gradient only to the higher-index function max(l, m)."""
    if not sequential:
        return f.T @ f
    to_first = f.T @ f.detach()  # (l, m) = sum_b f_bl sg(f_bm): gradient to f_l
    full_diagonal = torch.diag((f * f).sum(0))
    return torch.tril(to_first, -1) + torch.triu(to_first.T, 1) + full_diagonal


def moments(f: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plug-in (M_f, M_g, T), each (k, k)."""
    b = f.shape[0]
    return f.T @ f / b, g.T @ g / b, f.T @ g / b


def lora_loss(f: torch.Tensor, g: torch.Tensor, nesting: str | None = "jnt", estimator: str = "ustat") -> torch.Tensor:
    """(Nested) low-rank-approximation loss; its population minimum is -sum_{i<=k} sigma_i^2 (no nesting).

    Args:
        f: (B, k) left features f(x_t). g: (B, k) right features g(x_{t+lag}).
        nesting: ``None``, ``"jnt"`` (joint, default) or ``"seq"`` (sequential).
        estimator: ``"ustat"`` (default), ``"plugin"`` or ``"split"``.
    """
    b, k = f.shape
    v, weights = nesting_weights(k, nesting, f)
    correlation = (f * g).mean(0) @ v
    sequential = nesting == "seq"
    if estimator == "plugin":
        quadratic = (weights * second_moment(f, sequential) * second_moment(g, sequential)).sum() / b**2
    elif estimator == "ustat":  # drop the i = j terms: sum_b sum_lm W_lm (f_bl g_bl)(f_bm g_bm)
        if b < 2:
            raise ValueError("the U-statistic needs a batch of at least 2 pairs")
        total = (weights * second_moment(f, sequential) * second_moment(g, sequential)).sum()
        diagonal = (weights * second_moment(f * g, sequential)).sum()
        quadratic = (total - diagonal) / (b * (b - 1))
    elif estimator == "split":
        half = b // 2
        if half < 1:
            raise ValueError("the split estimator needs a batch of at least 2 pairs")
        f1, f2 = second_moment(f[:half], sequential), second_moment(f[half : 2 * half], sequential)
        g1, g2 = second_moment(g[:half], sequential), second_moment(g[half : 2 * half], sequential)
        quadratic = 0.5 * (weights * (f1 * g2 + f2 * g1)).sum() / half**2
    else:
        raise ValueError(f"unknown estimator '{estimator}'; choose one of {ESTIMATORS}")
    return -2 * correlation + quadratic


def whitened_correlation(f: torch.Tensor, g: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
    """M_f^{-1/2} T M_g^{-1/2}, (k, k); its singular values estimate the Koopman singular values."""
    m_f, m_g, t = moments(f, g)
    whiten_f, whiten_g = (sym_inverse(m, epsilon, sqrt=True, mode="regularize") for m in (m_f, m_g))
    return whiten_f @ t @ whiten_g


def vamp_score(f: torch.Tensor, g: torch.Tensor, schatten: int = 2, epsilon: float = 1e-6) -> torch.Tensor:
    """VAMP-r score ||M_f^{-1/2} T M_g^{-1/2}||_{S_r}^r (r = 1 nuclear, r = 2 squared Frobenius)."""
    koopman = whitened_correlation(f, g, epsilon)
    if schatten == 2:
        return (koopman**2).sum()
    if schatten == 1:
        return torch.linalg.matrix_norm(koopman, ord="nuc")
    raise ValueError(f"VAMP is implemented for schatten 1 or 2, got {schatten}")


def vamp_loss(f: torch.Tensor, g: torch.Tensor, schatten: int = 2, epsilon: float = 1e-6) -> torch.Tensor:
    """Negative VAMP-r score (the VAMPnet loss)."""
    return -vamp_score(f, g, schatten, epsilon)


def metric_regulariser(matrix: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
    """R(C) = tr(C^2 - C - ln C) >= 0 for symmetric positive C, 0 only at C = I (DPNet)."""
    values = torch.linalg.eigvalsh(0.5 * (matrix + matrix.T)).clamp_min(epsilon)
    return (values**2 - values - torch.log(values)).sum()


def dpnet_loss(
    f: torch.Tensor,
    g: torch.Tensor,
    metric_weight: float = 0.01,
    relaxed: bool = False,
    epsilon: float = 1e-6,
) -> torch.Tensor:
    """DPNet: -||M_f^{-1/2} T M_g^{-1/2}||_F^2 + gamma (R(M_f) + R(M_g)); relaxed: -||T||_F^2 /
    (||M_f||_op ||M_g||_op) + gamma (R(M_f) + R(M_g))."""
    m_f, m_g, t = moments(f, g)
    if relaxed:
        score = (t**2).sum() / (torch.linalg.matrix_norm(m_f, ord=2) * torch.linalg.matrix_norm(m_g, ord=2))
    else:
        score = vamp_score(f, g, 2, epsilon)
    return -score + metric_weight * (metric_regulariser(m_f, epsilon) + metric_regulariser(m_g, epsilon))
