// CPU (OpenMP) kernels of the sciml:: operators. Schemas and autograd are in ops.cpp (the same
// library); this file only registers CPU implementations.
//
//   cg_contract(x[N,M1,C], y[N,M2,Cy], i1[K], i2[K], i3[K], coeff[K], out_dim) -> out[N,out_dim,C]
//       out[n, i3[k], c] += coeff[k] * x[n, i1[k], c] * y[n, i2[k], Cy == 1 ? 0 : c]
//   edge_aggregate(alpha[E,C], x[S,M,C], row, col, rowptr[R+1], ...) -> out[R,M,C]
//       out[i, m, c] = sum_{e in rowptr[i]..rowptr[i+1]} alpha[e, c] * x[col[e], m, c]
//       (edges sorted by receiver: no atomics, and the (E, M, C) product is never stored)
//   edge_dot(a[R,M,C], b[S,M,C], row, col, ...) -> out[E,C]
//       out[e, c] = sum_m a[row[e], m, c] * b[col[e], m, c]
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

namespace {

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "sciml: ", name, " must be a CPU tensor");
  TORCH_CHECK(t.is_contiguous(), "sciml: ", name, " must be contiguous");
}

at::Tensor cg_contract_cpu(const at::Tensor& x, const at::Tensor& y, const at::Tensor& i1,
                           const at::Tensor& i2, const at::Tensor& i3, const at::Tensor& coeff,
                           int64_t out_dim) {
  check_cpu(x, "x"); check_cpu(y, "y"); check_cpu(coeff, "coeff");
  check_cpu(i1, "i1"); check_cpu(i2, "i2"); check_cpu(i3, "i3");
  TORCH_CHECK(x.dim() == 3 && y.dim() == 3 && x.size(0) == y.size(0), "sciml::cg_contract: x (N,M1,C), y (N,M2,Cy)");
  TORCH_CHECK(y.size(2) == 1 || y.size(2) == x.size(2), "sciml::cg_contract: y needs 1 or C channels");
  TORCH_CHECK(x.scalar_type() == y.scalar_type() && x.scalar_type() == coeff.scalar_type(),
              "sciml::cg_contract: x, y and coeff need one dtype");
  const int64_t N = x.size(0), M1 = x.size(1), C = x.size(2), M2 = y.size(1), Cy = y.size(2);
  const int64_t K = coeff.size(0);
  auto out = at::empty({N, out_dim, C}, x.options());  // each row zeroed by the thread that fills it
  const int64_t* p1 = i1.data_ptr<int64_t>();
  const int64_t* p2 = i2.data_ptr<int64_t>();
  const int64_t* p3 = i3.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sciml_cg_contract_cpu", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    const scalar_t* py = y.data_ptr<scalar_t>();
    const scalar_t* pc = coeff.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const scalar_t* xn = px + n * M1 * C;
        const scalar_t* yn = py + n * M2 * Cy;
        scalar_t* on = po + n * out_dim * C;
        std::fill(on, on + out_dim * C, scalar_t(0));
        for (int64_t k = 0; k < K; ++k) {
          const scalar_t* xr = xn + p1[k] * C;
          const scalar_t* yr = yn + p2[k] * Cy;
          scalar_t* orow = on + p3[k] * C;
          const scalar_t w = pc[k];
          if (Cy == 1) {
            const scalar_t s = w * yr[0];
            for (int64_t c = 0; c < C; ++c) orow[c] += s * xr[c];
          } else {
            for (int64_t c = 0; c < C; ++c) orow[c] += w * xr[c] * yr[c];
          }
        }
      }
    });
  });
  return out;
}

at::Tensor edge_aggregate_cpu(const at::Tensor& alpha, const at::Tensor& x, const at::Tensor& row,
                              const at::Tensor& col, const at::Tensor& rowptr, const at::Tensor& perm_t,
                              const at::Tensor& inv_perm_t, const at::Tensor& rowptr_t) {
  check_cpu(alpha, "alpha"); check_cpu(x, "x"); check_cpu(col, "col"); check_cpu(rowptr, "rowptr");
  TORCH_CHECK(alpha.dim() == 2 && x.dim() == 3 && alpha.size(1) == x.size(2),
              "sciml::edge_aggregate: alpha (E,C), x (S,M,C)");
  TORCH_CHECK(alpha.scalar_type() == x.scalar_type(), "sciml::edge_aggregate: alpha and x need one dtype");
  const int64_t R = rowptr.size(0) - 1, M = x.size(1), C = x.size(2);
  auto out = at::empty({R, M, C}, x.options());  // each row zeroed by the thread that fills it
  const int64_t* pcol = col.data_ptr<int64_t>();
  const int64_t* pptr = rowptr.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sciml_edge_aggregate_cpu", [&] {
    const scalar_t* pa = alpha.data_ptr<scalar_t>();
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, R, 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t* oi = po + i * M * C;
        std::fill(oi, oi + M * C, scalar_t(0));
        for (int64_t e = pptr[i]; e < pptr[i + 1]; ++e) {
          const scalar_t* ae = pa + e * C;
          const scalar_t* xj = px + pcol[e] * M * C;
          for (int64_t m = 0; m < M; ++m) {
            scalar_t* orow = oi + m * C;
            const scalar_t* xrow = xj + m * C;
            for (int64_t c = 0; c < C; ++c) orow[c] += ae[c] * xrow[c];
          }
        }
      }
    });
  });
  return out;
}

at::Tensor edge_dot_cpu(const at::Tensor& a, const at::Tensor& b, const at::Tensor& row, const at::Tensor& col,
                        const at::Tensor& rowptr, const at::Tensor& perm_t, const at::Tensor& inv_perm_t,
                        const at::Tensor& rowptr_t) {
  check_cpu(a, "a"); check_cpu(b, "b"); check_cpu(row, "row"); check_cpu(col, "col");
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(1) == b.size(1) && a.size(2) == b.size(2),
              "sciml::edge_dot: a (R,M,C), b (S,M,C)");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "sciml::edge_dot: a and b need one dtype");
  const int64_t E = row.size(0), M = a.size(1), C = a.size(2);
  auto out = at::empty({E, C}, a.options());  // each row zeroed by the thread that fills it
  const int64_t* prow = row.data_ptr<int64_t>();
  const int64_t* pcol = col.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "sciml_edge_dot_cpu", [&] {
    const scalar_t* pa = a.data_ptr<scalar_t>();
    const scalar_t* pb = b.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, E, 64, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const scalar_t* ai = pa + prow[e] * M * C;
        const scalar_t* bj = pb + pcol[e] * M * C;
        scalar_t* oe = po + e * C;
        std::fill(oe, oe + C, scalar_t(0));
        for (int64_t m = 0; m < M; ++m) {
          const scalar_t* ar = ai + m * C;
          const scalar_t* br = bj + m * C;
          for (int64_t c = 0; c < C; ++c) oe[c] += ar[c] * br[c];
        }
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(sciml, CPU, m) {
  m.impl("cg_contract", &cg_contract_cpu);
  m.impl("edge_aggregate", &edge_aggregate_cpu);
  m.impl("edge_dot", &edge_dot_cpu);
}
