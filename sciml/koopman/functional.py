"""Koopman losses as pure functions of feature batches f = f(x), g = g(x'), each of shape (B, k).

Moments: M_f = E[f f^T], M_g = E[g g^T], T = E[f(x) g(x')^T]. Callers prepend the constant function
(see :func:`with_constant`), which is the top singular pair and counts in k.

- LoRA: -2 tr(T) + tr(M_f M_g) = ||K - sum_i f_i ⊗ g_i||_HS^2 - ||K||_HS^2. No inverse, SVD or eigh.
- Joint nesting: -2 sum_l v_l T_ll + sum_lm W_lm (M_f)_lm (M_g)_lm, v_l = (k - l + 1)/k, W = min(v_l, v_m).
- Sequential nesting: stop-gradients put on the off-diagonal triangles of the moments, so mode l gets no
  gradient from the terms that pair it with modes m > l.
- Estimators of the quadratic term: ``plugin`` (biased, O(1/B)), ``ustat`` (drops the i = j terms;
  unbiased), ``split`` (moments from the two halves of the batch; unbiased).
- Baselines, as published by default (Jeong et al.'s code, NeuralKoopmanSVD), ours as options: VAMP-1/2
  scores on centred covariances with least-squares whitening (``whitening="lstsq"``; VAMP-1 through
  thresholded pseudo-inverse square roots) or on raw moments with the constant function and
  eigenvalue-regularised whitening (``whitening="eigh"``, ``center=False``: deeptime's number); DPNet
  (relaxed by default) with the metric regulariser R(C) = mean_i(lambda_i^2 - lambda_i - ln lambda_i) weighted
  0.5 gamma, gamma = 1 (``reduction="sum"`` sums over the k eigenvalues instead). Centring removes the
  constant function (the first column), so it is dropped from centred covariances.
"""

from __future__ import annotations

import torch

from sciml.koopman.linalg import sym_inverse

NESTINGS = (None, "jnt", "seq")
ESTIMATORS = ("ustat", "plugin", "split")
WHITENINGS = ("lstsq", "eigh")
REDUCTIONS = ("mean", "sum")


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


def covariances(f: torch.Tensor, g: torch.Tensor, center: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(C_f, C_g, C_fg), each plug-in over the batch; ``center``: of the mean-free features without the first
    (constant) column, (k - 1, k - 1); else the raw moments (k, k)."""
    if center:
        f, g = f[:, 1:] - f[:, 1:].mean(0), g[:, 1:] - g[:, 1:].mean(0)
    return moments(f, g)


def whitened_correlation(f: torch.Tensor, g: torch.Tensor, epsilon: float = 1e-6, center: bool = False) -> torch.Tensor:
    """C_f^{-1/2} C_fg C_g^{-1/2} with eigenvalue-regularised inverse square roots; its singular values
    estimate the Koopman singular values (with ``center=False``, the constant's 1 among them)."""
    c_f, c_g, c_fg = covariances(f, g, center)
    whiten_f, whiten_g = (sym_inverse(m, epsilon, sqrt=True, mode="regularize") for m in (c_f, c_g))
    return whiten_f @ c_fg @ whiten_g


def vamp_score(
    f: torch.Tensor,
    g: torch.Tensor,
    schatten: int = 2,
    epsilon: float = 1e-6,
    whitening: str = "lstsq",
    center: bool = True,
) -> torch.Tensor:
    """VAMP-r score ||C_f^{-1/2} C_fg C_g^{-1/2}||_{S_r}^r (r = 1 nuclear, r = 2 squared Frobenius).

    ``whitening="lstsq"`` (published): VAMP-2 = tr(lstsq(C_f, C_fg) lstsq(C_g, C_fg^T)), VAMP-1 with
    thresholded pseudo-inverse square roots; ``"eigh"``: inverse square roots of |lambda| + ``epsilon``. With
    ``center`` (published) the covariances are mean-free and the score does not count the constant (the
    uncentred score with the constant prepended is 1 more, at ``epsilon`` -> 0).
    """
    if whitening not in WHITENINGS:
        raise ValueError(f"unknown whitening '{whitening}'; choose one of {WHITENINGS}")
    if schatten not in (1, 2):
        raise ValueError(f"VAMP is implemented for schatten 1 or 2, got {schatten}")
    if whitening == "eigh":
        koopman = whitened_correlation(f, g, epsilon, center)
        return (koopman**2).sum() if schatten == 2 else torch.linalg.matrix_norm(koopman, ord="nuc")
    c_f, c_g, c_fg = covariances(f, g, center)
    if schatten == 2:
        forward = torch.linalg.lstsq(c_f, c_fg).solution
        backward = torch.linalg.lstsq(c_g, c_fg.T).solution
        return torch.trace(forward @ backward)
    # published VAMP-1: pseudo-inverse square roots, eigenvalues below lambda_max k eps_machine dropped
    whiten_f, whiten_g = (sym_inverse(c, c.shape[0] * torch.finfo(c.dtype).eps, sqrt=True) for c in (c_f, c_g))
    return torch.linalg.matrix_norm(whiten_f @ c_fg @ whiten_g, ord="nuc")


def vamp_loss(f: torch.Tensor, g: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """Negative VAMP-r score (the VAMPnet loss); arguments (``schatten``, ``epsilon``, ``whitening``,
    ``center``) and their defaults as :func:`vamp_score`."""
    return -vamp_score(f, g, *args, **kwargs)


def metric_regulariser(matrix: torch.Tensor, epsilon: float | None = None, reduction: str = "sum") -> torch.Tensor:
    """R(C) = sum (or mean) over the eigenvalues of C of lambda^2 - lambda - ln lambda >= 0, 0 only at C = I
    (DPNet). Eigenvalues are clamped below at ``epsilon`` (default: k times the machine epsilon, as published)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction '{reduction}'; choose one of {REDUCTIONS}")
    floor = epsilon if epsilon is not None else torch.finfo(matrix.dtype).eps * matrix.shape[0]
    values = torch.linalg.eigvalsh(0.5 * (matrix + matrix.T)).clamp_min(floor)
    terms = values**2 - values - torch.log(values)
    return terms.mean() if reduction == "mean" else terms.sum()


def dpnet_loss(
    f: torch.Tensor,
    g: torch.Tensor,
    metric_weight: float = 1.0,
    relaxed: bool = True,
    epsilon: float | None = None,
    center: bool = True,
    reduction: str = "mean",
    whitening: str = "lstsq",
) -> torch.Tensor:
    """DPNet: -S + 0.5 gamma (R(C_f) + R(C_g)) with S = ||C_fg||_F^2 / (||C_f||_op ||C_g||_op + 1e-8) (relaxed,
    the published default) or the VAMP-2 score (``whitening``); gamma = ``metric_weight``. Defaults as
    published (gamma 1, mean over eigenvalues, centred covariances); the former sciml DPNet is
    ``metric_weight=0.02, relaxed=False, center=False, reduction="sum", whitening="eigh", epsilon=1e-6``."""
    c_f, c_g, c_fg = covariances(f, g, center)
    if relaxed:
        norms = torch.linalg.matrix_norm(c_f, ord=2) * torch.linalg.matrix_norm(c_g, ord=2)
        score = (c_fg**2).sum() / (norms + 1e-8)
    else:
        score = vamp_score(f, g, 2, 1e-6 if epsilon is None else epsilon, whitening, center)
    regulariser = metric_regulariser(c_f, epsilon, reduction) + metric_regulariser(c_g, epsilon, reduction)
    return -score + 0.5 * metric_weight * regulariser
