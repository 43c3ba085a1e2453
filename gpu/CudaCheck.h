// CudaCheck: the one error-check macro family of strata_gpu.
//
// Every CUDA runtime, cuBLAS and cuDNN call goes through CUDA_CHECK,
// CUBLAS_CHECK or CUDNN_CHECK; a failure throws BackendError (or
// OutOfMemoryError for allocation failures reported by the caller) naming
// the call, its file and line, and the library's message. Library code never
// aborts the process and never ignores a status.
#pragma once

#include <cuda_runtime_api.h>

namespace strata::gpu {

// Builds "<library> error: <msg> in `call` at gpu/file:line" and throws BackendError.
[[noreturn]] void throwCudaFailure(const char* library, const char* message, const char* call, const char* file,
                                   int line);

}  // namespace strata::gpu

#define CUDA_CHECK(call)                                                                                        \
    do {                                                                                                        \
        const cudaError_t strataErr_ = (call);                                                                  \
        if (strataErr_ != cudaSuccess)                                                                          \
            ::strata::gpu::throwCudaFailure("CUDA", cudaGetErrorString(strataErr_), #call, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: reports bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
