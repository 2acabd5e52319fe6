// Schemas and autograd of the sciml:: operators, registered in C++ so that a process without Python
// (LAMMPS, i-PI's C++ driver, any TorchScript or metatomic engine) that loads this library can run
// and differentiate them. The device kernels register themselves in cpu_ops.cpp and cuda_ops.cu;
// the fake (meta) implementations for torch.compile live in Python (sciml/equivariant/kernels/ops.py).
//
// Every backward is written with these same operators (called through the dispatcher, so autograd
// records them) and differentiable indexing, so double and higher backward works: force training needs it.
//
// Graph arguments of edge_aggregate/edge_dot: row/col receiver/sender of each edge, edges sorted by
// receiver with rowptr (R + 1); perm_t sorts edges by sender, inv_perm_t is its inverse and rowptr_t
// (S + 1) the sender CSR.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/library.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sizes are symbolic (c10::SymInt) so that torch.compile's tracing through this autograd keeps the graph's
// sizes dynamic (Tensor::size() would specialise them).
at::Tensor cg_contract(const at::Tensor& x, const at::Tensor& y, const at::Tensor& i1, const at::Tensor& i2,
                       const at::Tensor& i3, const at::Tensor& coeff, c10::SymInt out_dim) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sciml::cg_contract", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymInt)>();
  return op.call(x, y, i1, i2, i3, coeff, std::move(out_dim));
}

using GraphOp = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&);

at::Tensor edge_aggregate(const at::Tensor& alpha, const at::Tensor& x, const variable_list& graph) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("sciml::edge_aggregate", "").typed<GraphOp>();
  return op.call(alpha, x, graph[0], graph[1], graph[2], graph[3], graph[4], graph[5]);
}

at::Tensor edge_dot(const at::Tensor& a, const at::Tensor& b, const variable_list& graph) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("sciml::edge_dot", "").typed<GraphOp>();
  return op.call(a, b, graph[0], graph[1], graph[2], graph[3], graph[4], graph[5]);
}

// The reversed graph (senders become receivers), edges in sender order.
variable_list transposed(const variable_list& g) {
  const auto& perm_t = g[3];
  return {g[1].index_select(0, perm_t), g[0].index_select(0, perm_t), g[5], g[4], g[3], g[2]};
}

class CgContract : public torch::autograd::Function<CgContract> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y, const at::Tensor& i1,
                            const at::Tensor& i2, const at::Tensor& i3, const at::Tensor& coeff, c10::SymInt out_dim) {
    ctx->save_for_backward({x, y, i1, i2, i3, coeff});
    at::AutoDispatchBelowADInplaceOrView guard;
    return cg_contract(x, y, i1, i2, i3, coeff, std::move(out_dim));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &y = saved[1], &i1 = saved[2], &i2 = saved[3], &i3 = saved[4], &coeff = saved[5];
    const auto grad = grads[0].contiguous();
    at::Tensor grad_x, grad_y;
    if (ctx->needs_input_grad(0)) grad_x = cg_contract(grad, y, i3, i2, i1, coeff, x.sym_size(1));
    if (ctx->needs_input_grad(1)) {
      grad_y = cg_contract(grad, x, i3, i1, i2, coeff, y.sym_size(1));
      if (y.sym_size(2) == 1 && x.sym_size(2) != 1) grad_y = grad_y.sum(-1, /*keepdim=*/true);
    }
    return {grad_x, grad_y, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class EdgeAggregate : public torch::autograd::Function<EdgeAggregate> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& alpha, const at::Tensor& x,
                            const variable_list& graph) {
    variable_list saved{alpha, x};
    saved.insert(saved.end(), graph.begin(), graph.end());
    ctx->save_for_backward(saved);
    at::AutoDispatchBelowADInplaceOrView guard;
    return edge_aggregate(alpha, x, graph);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &alpha = saved[0], &x = saved[1];
    const variable_list graph(saved.begin() + 2, saved.end());
    const auto grad = grads[0].contiguous();
    at::Tensor grad_alpha, grad_x;
    if (ctx->needs_input_grad(0)) grad_alpha = edge_dot(grad, x, graph);
    if (ctx->needs_input_grad(1)) {
      grad_x = edge_aggregate(alpha.index_select(0, graph[3]).contiguous(), grad, transposed(graph));
    }
    return {grad_alpha, grad_x, at::Tensor()};
  }
};

class EdgeDot : public torch::autograd::Function<EdgeDot> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            const variable_list& graph) {
    variable_list saved{a, b};
    saved.insert(saved.end(), graph.begin(), graph.end());
    ctx->save_for_backward(saved);
    at::AutoDispatchBelowADInplaceOrView guard;
    return edge_dot(a, b, graph);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &b = saved[1];
    const variable_list graph(saved.begin() + 2, saved.end());
    const auto grad = grads[0].contiguous();
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = edge_aggregate(grad, b, graph);
    if (ctx->needs_input_grad(1)) {
      grad_b = edge_aggregate(grad.index_select(0, graph[3]).contiguous(), a, transposed(graph));
    }
    return {grad_a, grad_b, at::Tensor()};
  }
};

at::Tensor cg_contract_autograd(const at::Tensor& x, const at::Tensor& y, const at::Tensor& i1, const at::Tensor& i2,
                                const at::Tensor& i3, const at::Tensor& coeff, c10::SymInt out_dim) {
  return CgContract::apply(x, y, i1, i2, i3, coeff, std::move(out_dim));
}

at::Tensor edge_aggregate_autograd(const at::Tensor& alpha, const at::Tensor& x, const at::Tensor& row,
                                   const at::Tensor& col, const at::Tensor& rowptr, const at::Tensor& perm_t,
                                   const at::Tensor& inv_perm_t, const at::Tensor& rowptr_t) {
  return EdgeAggregate::apply(alpha, x, variable_list{row, col, rowptr, perm_t, inv_perm_t, rowptr_t});
}

at::Tensor edge_dot_autograd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& row, const at::Tensor& col,
                             const at::Tensor& rowptr, const at::Tensor& perm_t, const at::Tensor& inv_perm_t,
                             const at::Tensor& rowptr_t) {
  return EdgeDot::apply(a, b, variable_list{row, col, rowptr, perm_t, inv_perm_t, rowptr_t});
}

// TorchScript's profiling executor rewrites a traced model's graph into differentiable subgraphs whose
// backward its interpreter runs: 1.6x slower than eager autograd for E2Former (4096 Cu atoms, 2 threads,
// scripts/bench_md.py). The exported model calls this op first, so the engine runs the graph as traced
// (process-wide: TorchScript has no per-model switch).
void use_unoptimized_graph_executor() { torch::jit::setGraphExecutorOptimize(false); }

}  // namespace

TORCH_LIBRARY(sciml, m) {
  // torch.compile asks this module for the fake implementations (it registers them on import).
  m.set_python_module("sciml.equivariant.kernels.ops");
  m.def("cg_contract(Tensor x, Tensor y, Tensor i1, Tensor i2, Tensor i3, Tensor coeff, SymInt out_dim) -> Tensor");
  m.def("edge_aggregate(Tensor alpha, Tensor x, Tensor row, Tensor col, Tensor rowptr, Tensor perm_t, "
        "Tensor inv_perm_t, Tensor rowptr_t) -> Tensor");
  m.def("edge_dot(Tensor a, Tensor b, Tensor row, Tensor col, Tensor rowptr, Tensor perm_t, "
        "Tensor inv_perm_t, Tensor rowptr_t) -> Tensor");
  // conservative alias analysis: a side effect, so TorchScript neither removes nor constant-folds the call
  m.def(torch::schema("use_unoptimized_graph_executor() -> ()", c10::AliasAnalysisKind::CONSERVATIVE),
        &use_unoptimized_graph_executor);
}

TORCH_LIBRARY_IMPL(sciml, Autograd, m) {
  m.impl("cg_contract", &cg_contract_autograd);
  m.impl("edge_aggregate", &edge_aggregate_autograd);
  m.impl("edge_dot", &edge_dot_autograd);
}
