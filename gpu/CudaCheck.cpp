// Failure reporting for the CUDA_CHECK / CUBLAS_CHECK / CUDNN_CHECK macros.
#include "gpu/CudaCheck.h"

#include <string>

#include "core/backend/Backend.h"

namespace strata::gpu {

void throwCudaFailure(const char* library, const char* message, const char* call, const char* file, int line) {
    std::string path = file;
    // Keep the path short and stable: from "gpu/" on.
    const auto pos = path.rfind("/gpu/");
    if (pos != std::string::npos) path = path.substr(pos + 1);
    throw BackendError(std::string(library) + " error: " + (message ? message : "unknown") + " in `" + call + "` at " +
                       path + ":" + std::to_string(line));
}

}  // namespace strata::gpu
