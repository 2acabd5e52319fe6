"""Float64 linear algebra of the Koopman estimator: CCA of learned features, aligned Koopman matrix,
EDMD on a learned basis and VAMP scores projected on a training CCA.

Moments (k x k, features with the constant first): M_f = E[f(x) f(x)^T], M_g = E[g(x') g(x')^T],
T = E[f(x) g(x')^T]. Pseudo-inverses (:func:`sym_inverse`, ``truncate``) drop eigenvalues below
``rank_cutoff`` times the largest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

SYM_INVERSE_MODES = ("truncate", "regularize")


def sym_inverse(
    matrix: torch.Tensor, epsilon: float = 1e-7, sqrt: bool = False, mode: str = "truncate"
) -> torch.Tensor:
    """M^{-1} (or M^{-1/2} with ``sqrt``) of a symmetric positive semi-definite (k, k) matrix, via eigh of its
    symmetric part, with an explicit regularisation (as deeptime's ``sym_inverse``):

    - ``"truncate"``: a pseudo-inverse; eigenvalues at or below ``epsilon`` times the largest |eigenvalue| are
      dropped (relative cutoff). Used by the estimator, on float64 moments.
    - ``"regularize"``: every eigenvalue lambda is replaced by |lambda| + ``epsilon`` (absolute); smooth in
      the matrix, so losses (VAMP, DPNet) can differentiate through it.
    """
    values, vectors = torch.linalg.eigh(0.5 * (matrix + matrix.T))
    power = -0.5 if sqrt else -1.0
    if mode == "regularize":
        scale = (values.abs() + epsilon) ** power
    elif mode == "truncate":
        tiny = torch.finfo(values.dtype).tiny
        keep = values > epsilon * values.abs().max().clamp_min(tiny)
        scale = torch.where(keep, values.clamp_min(tiny) ** power, torch.zeros_like(values))
    else:
        raise ValueError(f"unknown sym_inverse mode '{mode}'; choose one of {SYM_INVERSE_MODES}")
    return (vectors * scale) @ vectors.T


@dataclass
class CCA:
    """Canonical correlation analysis of (f, g).

    Attributes:
        singular_values: (k,) estimated Koopman singular values, descending, clipped to [0, 1 - 1e-7].
        left: (k, k) U^T M_f^{-1/2}; ``left @ f(x)`` are orthonormal left singular functions.
        right: (k, k) V^T M_g^{-1/2}; ``right @ g(x')`` are orthonormal right singular functions.
    """

    singular_values: torch.Tensor
    left: torch.Tensor
    right: torch.Tensor

    @property
    def aligned_left(self) -> torch.Tensor:
        """The matrix ``A_f = Sigma^{1/2} U^T M_f^{-1/2}`` with ``phi(x) = A_f f(x)`` (sqrt(sigma) folded in)."""
        return self.singular_values.sqrt()[:, None] * self.left

    @property
    def aligned_right(self) -> torch.Tensor:
        """The matrix ``A_g = Sigma^{1/2} V^T M_g^{-1/2}`` with ``psi(x') = A_g g(x')``."""
        return self.singular_values.sqrt()[:, None] * self.right


def cca(m_f: torch.Tensor, m_g: torch.Tensor, t: torch.Tensor, rank_cutoff: float = 1e-7) -> CCA:
    """SVD of the whitened cross moment M_f^{-1/2} T M_g^{-1/2} = U Sigma V^T."""
    whiten_f, whiten_g = (sym_inverse(m, rank_cutoff, sqrt=True) for m in (m_f, m_g))
    u, sigma, vh = torch.linalg.svd(whiten_f @ t @ whiten_g)
    return CCA(sigma.clamp(0.0, 1.0 - 1e-7), u.T @ whiten_f, vh @ whiten_g)


def aligned_koopman_matrix(analysis: CCA, cross_gf: torch.Tensor) -> torch.Tensor:
    """K = A_g E[g(x) f(x)^T] A_f^T (k x k), K[i, j] = <psi_i, phi_j>; its eigenvalues are those of the
    rank-k operator sum_i phi_i ⊗ psi_i, and ``phi(x)^T w`` is a right eigenfunction for K w = lambda w."""
    return analysis.aligned_right @ cross_gf @ analysis.aligned_left.T


def edmd_matrix(m_b: torch.Tensor, t_b: torch.Tensor, rank_cutoff: float = 1e-7) -> torch.Tensor:
    """EDMD on a basis b: K_b = M_b^+ E[b(x) b(x')^T], so that E[b(x') | x]^T c ~ b(x)^T K_b c."""
    return sym_inverse(m_b, rank_cutoff) @ t_b


def sorted_eig(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (k,) and right eigenvectors (k, k) as columns, complex, sorted by |lambda| descending."""
    values, vectors = torch.linalg.eig(matrix)
    order = torch.argsort(values.abs(), descending=True, stable=True)
    return values[order], vectors[:, order]


def _projected(analysis: CCA, m_00, m_01, m_11) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    left, right = analysis.left, analysis.right
    return left @ m_00 @ left.T, left @ m_01 @ right.T, right @ m_11 @ right.T


def held_out_correlations(analysis: CCA, m_00: torch.Tensor, m_01: torch.Tensor, m_11: torch.Tensor) -> torch.Tensor:
    """(k,) correlation of each training canonical pair on held-out moments: diag(C01) / sqrt(C00_ii C11_ii)."""
    c00, c01, c11 = _projected(analysis, m_00, m_01, m_11)
    scale = (c00.diagonal() * c11.diagonal()).clamp_min(torch.finfo(c00.dtype).tiny).sqrt()
    return (c01.diagonal() / scale).clamp(0.0, 1.0 - 1e-7)


def projected_vamp_scores(
    analysis: CCA, m_00: torch.Tensor, m_01: torch.Tensor, m_11: torch.Tensor, rank_cutoff: float = 1e-7
) -> dict[str, float]:
    """VAMP-2 and VAMP-E of held-out moments projected on a training CCA.

    With C00 = L M00 L^T, C01 = L M01 R^T, C11 = R M11 R^T (L, R the training ``left``/``right``) and
    S = diag(training sigma): VAMP-2 = ||C00^{-1/2} C01 C11^{-1/2}||_F^2 (the subspace, at most k) and
    VAMP-E = 2 tr(S C01) - tr(S C00 S C11) (minus the LoRA loss of the fixed rank-k operator; at most
    sum_{i<=k} sigma_i^2, can be negative).
    """
    s = torch.diag(analysis.singular_values)
    c00, c01, c11 = _projected(analysis, m_00, m_01, m_11)
    whitened = sym_inverse(c00, rank_cutoff, sqrt=True) @ c01 @ sym_inverse(c11, rank_cutoff, sqrt=True)
    vamp_e = 2 * torch.trace(s @ c01) - torch.trace(s @ c00 @ s @ c11)
    return {"vamp2": float((whitened**2).sum()), "vampe": float(vamp_e)}
