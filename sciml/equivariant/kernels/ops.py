"""The ``sciml::`` custom operators, from Python: the compiled library and the fake implementations.

Schemas, autograd (backward written with the same operators, so double backward works: force training
needs it) and the CPU/CUDA kernels are C++ (``csrc/``), so a process without Python that loads the
library runs and differentiates them (TorchScript, metatomic engines, LAMMPS). Importing this module
builds (once, cached) and loads the CPU library and registers the fake (meta) implementations that
``torch.compile`` and ``torch.library.opcheck`` use.

Graph arguments of ``edge_aggregate``/``edge_dot`` (see :class:`sciml.equivariant.graph.EdgeGraph`):
``row``/``col`` receiver/sender of each edge, edges sorted by receiver with ``rowptr`` (R + 1);
``perm_t`` sorts edges by sender, ``inv_perm_t`` is its inverse and ``rowptr_t`` (S + 1) the sender CSR.

Raises:
    KernelUnavailable: on import, when the library cannot be built or loaded here (with the reason).
"""

from __future__ import annotations

import torch

from sciml.equivariant.kernels.build import load_library

load_library(with_cuda=False)

cg_contract = torch.ops.sciml.cg_contract
edge_aggregate = torch.ops.sciml.edge_aggregate
edge_dot = torch.ops.sciml.edge_dot


@torch.library.register_fake("sciml::cg_contract")
def _cg_contract_fake(x, y, i1, i2, i3, coeff, out_dim):
    return x.new_empty((x.shape[0], out_dim, x.shape[2]))


@torch.library.register_fake("sciml::edge_aggregate")
def _edge_aggregate_fake(alpha, x, row, col, rowptr, perm_t, inv_perm_t, rowptr_t):
    return x.new_empty((rowptr.shape[0] - 1, x.shape[1], x.shape[2]))


@torch.library.register_fake("sciml::edge_dot")
def _edge_dot_fake(a, b, row, col, rowptr, perm_t, inv_perm_t, rowptr_t):
    return a.new_empty((row.shape[0], a.shape[2]))
