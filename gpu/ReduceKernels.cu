// Two-pass deterministic reductions: sum, sum of squares, non-finite count.
#include <cmath>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/ReduceKernels.cuh"

namespace strata::gpu {
namespace {

constexpr int kMaxPartials = 132 * 32;  // gridFor()'s cap

template <int Op>
__global__ void partialKernel(double* partials, const float* x, int64_t n) {
    double acc = 0.0;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float v = x[i];
        if constexpr (Op == 0) acc += v;
        if constexpr (Op == 1) acc += double(v) * double(v);
        if constexpr (Op == 2) acc += isfinite(v) ? 0.0 : 1.0;
    }
    acc = detail::blockSum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void finalKernel(double* result, const double* partials, int count) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    acc = detail::blockSum(acc);
    if (threadIdx.x == 0) *result = acc;
}

}  // namespace

int64_t reduceScratchDoubles() { return kMaxPartials; }

void launchReduce(cudaStream_t s, double* result, double* scratch, const float* x, int64_t n, ReduceOp op) {
    const int blocks = n > 0 ? detail::gridFor(n) : 1;
    switch (op) {
        case ReduceOp::Sum: partialKernel<0><<<blocks, detail::kBlock, 0, s>>>(scratch, x, n); break;
        case ReduceOp::SumSquares: partialKernel<1><<<blocks, detail::kBlock, 0, s>>>(scratch, x, n); break;
        case ReduceOp::NonFiniteCount: partialKernel<2><<<blocks, detail::kBlock, 0, s>>>(scratch, x, n); break;
    }
    CUDA_CHECK_LAUNCH();
    finalKernel<<<1, 1024, 0, s>>>(result, scratch, blocks);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
