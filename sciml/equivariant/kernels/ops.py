"""The ``sciml::`` custom operators: schemas, fake (meta) implementations and autograd.

Compiled implementations (CPU, CUDA) live in ``csrc/`` and register themselves when the library is
loaded (:mod:`sciml.equivariant.kernels.build`). Every backward is written with these same operators
and differentiable indexing, so double (and higher) backward works: force training needs it.

Graph arguments of ``edge_aggregate``/``edge_dot`` (see :class:`sciml.equivariant.graph.EdgeGraph`):
``row``/``col`` receiver/sender of each edge, edges sorted by receiver with ``rowptr`` (R + 1);
``perm_t`` sorts edges by sender, ``inv_perm_t`` is its inverse and ``rowptr_t`` (S + 1) the sender CSR.
"""

from __future__ import annotations

import torch

_GRAPH = "Tensor row, Tensor col, Tensor rowptr, Tensor perm_t, Tensor inv_perm_t, Tensor rowptr_t"
_library = torch.library.Library("sciml", "DEF")
_library.define("cg_contract(Tensor x, Tensor y, Tensor i1, Tensor i2, Tensor i3, Tensor coeff, int out_dim) -> Tensor")
_library.define(f"edge_aggregate(Tensor alpha, Tensor x, {_GRAPH}) -> Tensor")
_library.define(f"edge_dot(Tensor a, Tensor b, {_GRAPH}) -> Tensor")

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


def transposed(row, col, rowptr, perm_t, inv_perm_t, rowptr_t) -> tuple[torch.Tensor, ...]:
    """Graph arguments of the reversed graph (senders become receivers), edges in sender order."""
    return col[perm_t], row[perm_t], rowptr_t, inv_perm_t, perm_t, rowptr


def _save_all(ctx, inputs, output) -> None:
    ctx.save_for_backward(*[t for t in inputs if isinstance(t, torch.Tensor)])


def _cg_contract_backward(ctx, grad):
    x, y, i1, i2, i3, coeff = ctx.saved_tensors
    grad = grad.contiguous()
    grad_x = grad_y = None
    if ctx.needs_input_grad[0]:
        grad_x = cg_contract(grad, y, i3, i2, i1, coeff, x.shape[1])
    if ctx.needs_input_grad[1]:
        grad_y = cg_contract(grad, x, i3, i1, i2, coeff, y.shape[1])
        if y.shape[2] == 1 and x.shape[2] != 1:
            grad_y = grad_y.sum(-1, keepdim=True)
    return grad_x, grad_y, None, None, None, None, None


def _edge_aggregate_backward(ctx, grad):
    alpha, x, *graph = ctx.saved_tensors
    grad = grad.contiguous()
    grad_alpha = grad_x = None
    if ctx.needs_input_grad[0]:
        grad_alpha = edge_dot(grad, x, *graph)
    if ctx.needs_input_grad[1]:
        perm_t = graph[3]
        grad_x = edge_aggregate(alpha[perm_t].contiguous(), grad, *transposed(*graph))
    return grad_alpha, grad_x, None, None, None, None, None, None


def _edge_dot_backward(ctx, grad):
    a, b, *graph = ctx.saved_tensors
    grad = grad.contiguous()
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = edge_aggregate(grad, b, *graph)
    if ctx.needs_input_grad[1]:
        perm_t = graph[3]
        grad_b = edge_aggregate(grad[perm_t].contiguous(), a, *transposed(*graph))
    return grad_a, grad_b, None, None, None, None, None, None


torch.library.register_autograd("sciml::cg_contract", _cg_contract_backward, setup_context=_save_all)
torch.library.register_autograd("sciml::edge_aggregate", _edge_aggregate_backward, setup_context=_save_all)
torch.library.register_autograd("sciml::edge_dot", _edge_dot_backward, setup_context=_save_all)
