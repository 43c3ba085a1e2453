// CUBLAS_CHECK and CUDNN_CHECK: the library half of the CudaCheck.h macro family
// (kept apart so that kernel files need not parse cuBLAS and cuDNN headers).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "gpu/CudaCheck.h"

#define CUBLAS_CHECK(call)                                                                                          \
    do {                                                                                                            \
        const cublasStatus_t strataSt_ = (call);                                                                    \
        if (strataSt_ != CUBLAS_STATUS_SUCCESS)                                                                     \
            ::strata::gpu::throwCudaFailure("cuBLAS", cublasGetStatusString(strataSt_), #call, __FILE__, __LINE__); \
    } while (0)

#define CUDNN_CHECK(call)                                                                                        \
    do {                                                                                                         \
        const cudnnStatus_t strataSt_ = (call);                                                                  \
        if (strataSt_ != CUDNN_STATUS_SUCCESS)                                                                   \
            ::strata::gpu::throwCudaFailure("cuDNN", cudnnGetErrorString(strataSt_), #call, __FILE__, __LINE__); \
    } while (0)
