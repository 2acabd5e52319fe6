"""Clebsch-Gordan contractions described by path lists, with the pure-PyTorch reference (ground truth).

A feature tensor has shape (N, M, C): M stacks the 2l + 1 components of a list of degrees (a
:class:`~sciml.equivariant.layout.DegreeLayout`), C is channels. A :class:`CGTable` lists paths
``x[l1 block] ⊗ y[l2 block] -> out[l3 block]`` with a scalar factor each; several paths may add into the
same output block. The same table yields the sparse coefficient list used by the compiled
``sciml::cg_contract`` kernel.

Builders for the E2Former (the Wigner-6j convolution; edge vector r_ij = r_j - r_i):

- :func:`coupling_table`: x ⊗ P^L -> one block per path (a, L -> J), grouped by J for channel mixing;
- :func:`expansion_table`: h ⊗ P^b -> every (a, d) block, unweighted, no reduction ("X_j^(b)");
- :func:`recoupling_table`: (sum_j alpha X_j^(b)) ⊗ P^(L-b)(r_i) -> the (a, L -> J) blocks, with the
  binomial and Wigner-6j factors, so that summing b = 0..L reproduces [h ⊗ P^L(r_ij)]^J exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sciml.equivariant.layout import DegreeLayout
from sciml.equivariant.so3 import clebsch_gordan, wigner_6j


@dataclass(frozen=True)
class CGPath:
    """x[start1 : start1 + 2l1 + 1] ⊗ y[start2 : ...] -> out[start3 + m * stride3], m = 0..2l3, times scale."""

    l1: int
    start1: int
    l2: int
    start2: int
    l3: int
    start3: int
    stride3: int = 1
    scale: float = 1.0


class CGTable:
    """A set of CG paths between layouts of dimension ``dim1`` ⊗ ``dim2`` -> ``out_dim``."""

    def __init__(self, paths: list[CGPath], dim1: int, dim2: int, out_dim: int) -> None:
        self.paths, self.dim1, self.dim2, self.out_dim = paths, dim1, dim2, out_dim
        # every coefficient is computed here, not on first use: a forward never calls e3nn's Clebsch-Gordan
        # construction, so ``torch.compile`` can trace the model from a cold start
        self._coefficients = [clebsch_gordan(p.l1, p.l2, p.l3) * p.scale for p in paths]  # float64, CPU
        self._entries = self._nonzero_entries()
        self._sparse_cache: dict[tuple, tuple[torch.Tensor, ...]] = {}

    def reference(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Pure-PyTorch contraction. x: (N, dim1, C); y: (N, dim2, 1 or C) -> (N, out_dim, C)."""
        n, _, c = x.shape
        y = y.expand(-1, -1, c)
        out = x.new_zeros(n, self.out_dim, c)
        for p, coefficients in zip(self.paths, self._coefficients, strict=True):
            cg = coefficients.to(dtype=x.dtype, device=x.device)
            term = torch.einsum(
                "nic,njc,ijk->nkc",
                x[:, p.start1 : p.start1 + 2 * p.l1 + 1],
                y[:, p.start2 : p.start2 + 2 * p.l2 + 1],
                cg,
            )
            stop = p.start3 + 2 * p.l3 * p.stride3 + 1
            out[:, p.start3 : stop : p.stride3] += term
        return out

    def _nonzero_entries(self) -> tuple[list[int], list[int], list[int], list[float]]:
        i1, i2, i3, coeff = [], [], [], []
        for p, cg in zip(self.paths, self._coefficients, strict=True):
            for a, b, k in torch.nonzero(cg.abs() > 1e-15 * abs(p.scale)).tolist():
                i1.append(p.start1 + a)
                i2.append(p.start2 + b)
                i3.append(p.start3 + k * p.stride3)
                coeff.append(float(cg[a, b, k]))
        return i1, i2, i3, coeff

    @property
    def nonzeros(self) -> int:
        """The number of nonzero CG coefficients, i.e. multiply-adds per channel of one contraction."""
        return len(self._entries[3])

    def clear_cache(self) -> None:
        """Forget the sparse coefficients built so far (a trace then builds them as its own constants)."""
        self._sparse_cache.clear()

    def sparse(self, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(i1, i2, i3, coeff) of the nonzero coefficients, for ``sciml::cg_contract`` (cached)."""
        key = (dtype, device)
        if key not in self._sparse_cache:
            i1, i2, i3, coeff = self._entries
            self._sparse_cache[key] = (
                torch.tensor(i1, dtype=torch.int64, device=device),
                torch.tensor(i2, dtype=torch.int64, device=device),
                torch.tensor(i3, dtype=torch.int64, device=device),
                torch.tensor(coeff, dtype=dtype, device=device),
            )
        return self._sparse_cache[key]


@dataclass(frozen=True)
class MixingLayout:
    """Output of :func:`coupling_table`: for each output degree J, ``paths[J]`` input degrees a, stored
    m-major at ``start[J]`` (component m of path p at ``start[J] + m * len(paths[J]) + p``)."""

    out_degrees: tuple[int, ...]
    paths: dict[int, tuple[int, ...]]
    start: dict[int, int]
    dim: int


def parity_allowed(a: int, L: int, J: int) -> bool:
    """Whether the path a ⊗ L -> J maps natural-parity features (l of parity (-1)^l, e3nn ``0e, 1o, 2e``)
    onto a natural-parity output: a + L + J even. The other paths (e.g. 1o ⊗ 1o -> 1e, a cross product)
    make pseudo-tensors, which would let a molecule and its mirror image differ."""
    return (a + L + J) % 2 == 0


def mixing_layout(
    in_degrees: tuple[int, ...], L: int, out_degrees: tuple[int, ...], parity: bool = False
) -> MixingLayout:
    """``parity=True`` keeps only :func:`parity_allowed` paths (O(3)); ``False`` keeps every path (SO(3))."""
    paths = {
        J: tuple(a for a in in_degrees if abs(a - L) <= J <= a + L and (not parity or parity_allowed(a, L, J)))
        for J in out_degrees
    }
    start, total = {}, 0
    for J in out_degrees:
        start[J] = total
        total += (2 * J + 1) * len(paths[J])
    return MixingLayout(tuple(out_degrees), paths, start, total)


@dataclass(frozen=True)
class Coupling:
    """What one weighted product [x ⊗ y^L]^J couples: the degrees of x (``in_degrees``), the filter's degree
    ``order`` (L), the ``out_degrees`` J, and the channels C (``channels_in``) -> C' (``channels_out``);
    ``parity``: only the :func:`~sciml.equivariant.tensor_product.parity_allowed` paths (O(3) for
    natural-parity features), else every path (SO(3))."""

    in_degrees: tuple[int, ...]
    order: int
    out_degrees: tuple[int, ...]
    channels_in: int
    channels_out: int
    parity: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_degrees", tuple(self.in_degrees))
        object.__setattr__(self, "out_degrees", tuple(self.out_degrees))

    def table(self) -> tuple[CGTable, MixingLayout]:
        """The :func:`~sciml.equivariant.tensor_product.coupling_table` of these paths."""
        return coupling_table(self.in_degrees, self.order, self.out_degrees, self.parity)


def coupling_table(
    in_degrees: tuple[int, ...], L: int, out_degrees: tuple[int, ...], parity: bool = False
) -> tuple[CGTable, MixingLayout]:
    """x (layout ``in_degrees``) ⊗ y (one degree L) -> the (a, L -> J) blocks of a :class:`MixingLayout`."""
    layout = mixing_layout(in_degrees, L, out_degrees, parity)
    starts = dict(zip(in_degrees, DegreeLayout(in_degrees).offsets, strict=True))
    paths = [
        CGPath(a, starts[a], L, 0, J, layout.start[J] + p, len(layout.paths[J]))
        for J in out_degrees
        for p, a in enumerate(layout.paths[J])
    ]
    return CGTable(paths, DegreeLayout(in_degrees).dim, 2 * L + 1, layout.dim), layout


def expansion_degrees(in_degrees: tuple[int, ...], b: int, max_degree: int) -> tuple[tuple[int, int], ...]:
    """The (a, d) blocks of h ⊗ P^b kept for the recoupling: every d in a ⊗ b with d <= max_degree."""
    return tuple((a, d) for a in in_degrees for d in range(abs(a - b), min(a + b, max_degree) + 1))


def expansion_table(
    in_degrees: tuple[int, ...], b: int, max_degree: int, blocks: tuple[tuple[int, int], ...] | None = None
) -> CGTable:
    """h (layout ``in_degrees``) ⊗ P^b -> the (a, d) blocks (unweighted, channel-wise): all of
    :func:`expansion_degrees`, or only ``blocks`` (e.g. :func:`recoupled_blocks`)."""
    blocks = expansion_degrees(in_degrees, b, max_degree) if blocks is None else blocks
    starts = dict(zip(in_degrees, DegreeLayout(in_degrees).offsets, strict=True))
    out_layout = DegreeLayout(tuple(d for _, d in blocks))
    paths = [CGPath(a, starts[a], b, 0, d, s) for (a, d), s in zip(blocks, out_layout.offsets, strict=True)]
    return CGTable(paths, DegreeLayout(in_degrees).dim, 2 * b + 1, out_layout.dim)


def recoupling_weight(a: int, b: int, d: int, c: int, J: int, L: int) -> float:
    """Factor of [[h^a ⊗ P^b(r_j)]^d ⊗ P^c(r_i)]^J in [h^a ⊗ P^L(r_j - r_i)]^J, with c = L - b:
    (-1)^(L+b) C(L, b) (binomial translation, sign for r_j - r_i) times the 6j recoupling factor
    (-1)^(a+b+c+J) sqrt((2d+1)(2L+1)) {a b d; c J L}."""
    binomial = (-1) ** (L + b) * math.comb(L, b)
    sixj = (-1) ** (a + b + c + J) * math.sqrt((2 * d + 1) * (2 * L + 1)) * wigner_6j(a, b, d, c, J, L)
    return binomial * sixj


def _recoupling_paths(
    in_degrees: tuple[int, ...], L: int, b: int, out_degrees: tuple[int, ...], max_degree: int, parity: bool
):
    """(J, path index p, a, d, weight) of every nonzero term of the recoupling."""
    c = L - b
    layout = mixing_layout(in_degrees, L, out_degrees, parity)
    for J in out_degrees:
        for p, a in enumerate(layout.paths[J]):
            for a2, d in expansion_degrees(in_degrees, b, max_degree):
                if a2 == a and abs(d - c) <= J <= d + c:
                    weight = recoupling_weight(a, b, d, c, J, L)
                    if weight != 0.0:
                        yield J, p, a, d, weight


def recoupled_blocks(
    in_degrees: tuple[int, ...], L: int, b: int, out_degrees: tuple[int, ...], max_degree: int, parity: bool = False
) -> tuple[tuple[int, int], ...]:
    """The (a, d) expansion blocks that some output path needs (in :func:`expansion_degrees` order). With
    parity many are not needed (for lmax 2, L 1: 12 of the 27 components at b = 1), and every one dropped
    is C numbers less per edge in the aggregation."""
    used = {(a, d) for _, _, a, d, _ in _recoupling_paths(in_degrees, L, b, out_degrees, max_degree, parity)}
    return tuple(block for block in expansion_degrees(in_degrees, b, max_degree) if block in used)


def recoupling_table(
    in_degrees: tuple[int, ...],
    L: int,
    b: int,
    out_degrees: tuple[int, ...],
    max_degree: int,
    parity: bool = False,
    blocks: tuple[tuple[int, int], ...] | None = None,
) -> CGTable:
    """A^(b) (the (a, d) blocks of :func:`expansion_table`, all or ``blocks``) ⊗ P^(L-b) -> the (a, L -> J)
    blocks of :func:`coupling_table`, summing over d with :func:`recoupling_weight`. The intermediate
    degrees d may have either parity: the identity is exact, so ``parity`` only selects the output paths."""
    c = L - b
    layout = mixing_layout(in_degrees, L, out_degrees, parity)
    blocks = expansion_degrees(in_degrees, b, max_degree) if blocks is None else blocks
    block_layout = DegreeLayout(tuple(d for _, d in blocks))
    block_start = dict(zip(blocks, block_layout.offsets, strict=True))
    paths = []
    for J, p, a, d, weight in _recoupling_paths(in_degrees, L, b, out_degrees, max_degree, parity):
        if (a, d) not in block_start:
            raise ValueError(f"expansion block (a={a}, d={d}) is needed by the path ({a}, {L} -> {J}) but not given")
        paths.append(CGPath(d, block_start[(a, d)], c, 0, J, layout.start[J] + p, len(layout.paths[J]), weight))
    return CGTable(paths, block_layout.dim, 2 * c + 1, layout.dim)
