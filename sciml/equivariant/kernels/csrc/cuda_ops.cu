// CUDA kernels of the sciml:: operators (same contracts as cpu_ops.cpp). Each thread owns one output
// element, so no atomics are needed; edges arrive sorted by receiver (CSR).
#include <torch/library.h>
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace {

constexpr int kThreads = 128;

void check_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cuda(), "sciml: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.is_contiguous(), "sciml: ", name, " must be contiguous");
}

template <typename scalar_t>
__global__ void cg_contract_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y,
                                   const int64_t* __restrict__ i1, const int64_t* __restrict__ i2,
                                   const int64_t* __restrict__ i3, const scalar_t* __restrict__ coeff,
                                   scalar_t* __restrict__ out, int64_t M1, int64_t M2, int64_t C, int64_t Cy,
                                   int64_t out_dim, int64_t K) {
  const int64_t n = blockIdx.x;
  const int64_t c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const scalar_t* xn = x + n * M1 * C;
  const scalar_t* yn = y + n * M2 * Cy;
  scalar_t* on = out + n * out_dim * C;
  const int64_t cy = Cy == 1 ? 0 : c;
  for (int64_t k = 0; k < K; ++k) {
    on[i3[k] * C + c] += coeff[k] * xn[i1[k] * C + c] * yn[i2[k] * Cy + cy];
  }
}

template <typename scalar_t>
__global__ void edge_aggregate_kernel(const scalar_t* __restrict__ alpha, const scalar_t* __restrict__ x,
                                      const int64_t* __restrict__ col, const int64_t* __restrict__ rowptr,
                                      scalar_t* __restrict__ out, int64_t M, int64_t C) {
  const int64_t i = blockIdx.x;
  const int64_t m = blockIdx.y;
  const int64_t c = blockIdx.z * blockDim.x + threadIdx.x;
  if (c >= C) return;
  scalar_t acc = 0;
  for (int64_t e = rowptr[i]; e < rowptr[i + 1]; ++e) {
    acc += alpha[e * C + c] * x[(col[e] * M + m) * C + c];
  }
  out[(i * M + m) * C + c] = acc;
}

template <typename scalar_t>
__global__ void edge_dot_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                                const int64_t* __restrict__ row, const int64_t* __restrict__ col,
                                scalar_t* __restrict__ out, int64_t M, int64_t C) {
  const int64_t e = blockIdx.x;
  const int64_t c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const scalar_t* ai = a + row[e] * M * C + c;
  const scalar_t* bj = b + col[e] * M * C + c;
  scalar_t acc = 0;
  for (int64_t m = 0; m < M; ++m) acc += ai[m * C] * bj[m * C];
  out[e * C + c] = acc;
}

int64_t channel_blocks(int64_t C) { return (C + kThreads - 1) / kThreads; }

at::Tensor cg_contract_cuda(const at::Tensor& x, const at::Tensor& y, const at::Tensor& i1, const at::Tensor& i2,
                            const at::Tensor& i3, const at::Tensor& coeff, int64_t out_dim) {
  check_cuda(x, "x"); check_cuda(y, "y"); check_cuda(coeff, "coeff");
  check_cuda(i1, "i1"); check_cuda(i2, "i2"); check_cuda(i3, "i3");
  TORCH_CHECK(y.size(2) == 1 || y.size(2) == x.size(2), "sciml::cg_contract: y needs 1 or C channels");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), M1 = x.size(1), C = x.size(2), M2 = y.size(1), Cy = y.size(2), K = coeff.size(0);
  auto out = at::zeros({N, out_dim, C}, x.options());
  if (N == 0 || C == 0) return out;
  const dim3 grid(N, channel_blocks(C));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sciml_cg_contract_cuda", [&] {
    cg_contract_kernel<scalar_t><<<grid, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), i1.data_ptr<int64_t>(), i2.data_ptr<int64_t>(),
        i3.data_ptr<int64_t>(), coeff.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), M1, M2, C, Cy, out_dim, K);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor edge_aggregate_cuda(const at::Tensor& alpha, const at::Tensor& x, const at::Tensor& row,
                               const at::Tensor& col, const at::Tensor& rowptr, const at::Tensor& perm_t,
                               const at::Tensor& inv_perm_t, const at::Tensor& rowptr_t) {
  check_cuda(alpha, "alpha"); check_cuda(x, "x"); check_cuda(col, "col"); check_cuda(rowptr, "rowptr");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t R = rowptr.size(0) - 1, M = x.size(1), C = x.size(2);
  auto out = at::zeros({R, M, C}, x.options());
  if (R == 0 || M == 0 || C == 0) return out;
  const dim3 grid(R, M, channel_blocks(C));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sciml_edge_aggregate_cuda", [&] {
    edge_aggregate_kernel<scalar_t><<<grid, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        alpha.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), col.data_ptr<int64_t>(), rowptr.data_ptr<int64_t>(),
        out.data_ptr<scalar_t>(), M, C);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor edge_dot_cuda(const at::Tensor& a, const at::Tensor& b, const at::Tensor& row, const at::Tensor& col,
                         const at::Tensor& rowptr, const at::Tensor& perm_t, const at::Tensor& inv_perm_t,
                         const at::Tensor& rowptr_t) {
  check_cuda(a, "a"); check_cuda(b, "b"); check_cuda(row, "row"); check_cuda(col, "col");
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t E = row.size(0), M = a.size(1), C = a.size(2);
  auto out = at::zeros({E, C}, a.options());
  if (E == 0 || C == 0) return out;
  const dim3 grid(E, channel_blocks(C));
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "sciml_edge_dot_cuda", [&] {
    edge_dot_kernel<scalar_t><<<grid, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), row.data_ptr<int64_t>(), col.data_ptr<int64_t>(),
        out.data_ptr<scalar_t>(), M, C);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(sciml, CUDA, m) {
  m.impl("cg_contract", &cg_contract_cuda);
  m.impl("edge_aggregate", &edge_aggregate_cuda);
  m.impl("edge_dot", &edge_dot_cuda);
}
