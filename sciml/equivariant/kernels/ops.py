"""The ``sciml::`` custom operators, from Python: the operators and their fake implementations.

Schemas, autograd (backward written with the same operators, so double backward works: force training
needs it) and the CPU/CUDA kernels are C++ (``csrc/``), so a process without Python that loads the
library runs and differentiates them (TorchScript, metatomic engines, LAMMPS). This module has no side
effects: :func:`sciml.equivariant.kernels.build.load` builds and loads the library, then calls
``register_fakes()`` for the fake (meta) implementations that ``torch.compile`` and ``torch.library.opcheck``
use; ``ops.cg_contract``, ``ops.edge_aggregate`` and ``ops.edge_dot`` are the loaded operators.

Graph arguments of ``edge_aggregate``/``edge_dot`` (see :class:`sciml.equivariant.graph.EdgeGraph`):
``row``/``col`` receiver/sender of each edge, edges sorted by receiver with ``rowptr`` (R + 1);
``perm_t`` sorts edges by sender, ``inv_perm_t`` is its inverse and ``rowptr_t`` (S + 1) the sender CSR.
"""

from __future__ import annotations

import torch

OPERATORS = ("cg_contract", "edge_aggregate", "edge_dot")
_registered: list[bool] = []


def __getattr__(name: str):
    """``ops.cg_contract`` etc.: the loaded ``torch.ops.sciml`` operator (load the library first)."""
    if name in OPERATORS:
        return getattr(torch.ops.sciml, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_fakes() -> None:
    """Register the fake implementations of the loaded operators (once)."""
    if _registered:
        return

    @torch.library.register_fake("sciml::cg_contract")
    def _cg_contract_fake(x, y, i1, i2, i3, coeff, out_dim):
        return x.new_empty((x.shape[0], out_dim, x.shape[2]))

    @torch.library.register_fake("sciml::edge_aggregate")
    def _edge_aggregate_fake(alpha, x, row, col, rowptr, perm_t, inv_perm_t, rowptr_t):
        return x.new_empty((rowptr.shape[0] - 1, x.shape[1], x.shape[2]))

    @torch.library.register_fake("sciml::edge_dot")
    def _edge_dot_fake(a, b, row, col, rowptr, perm_t, inv_perm_t, rowptr_t):
        return a.new_empty((row.shape[0], a.shape[2]))

    _registered.append(True)
