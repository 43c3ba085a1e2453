// The words of a bad index, one function per kind, shared by the Backend seam (which checks indices on
// the host where a backend's memory is host memory) and by backends that find bad indices on the
// device (gpu/CudaBackend.cpp), so every backend reports them alike: "<op> on <device>: ...".
#pragma once

#include <cstdint>
#include <string>

#include "core/backend/BackendOps.h"

namespace strata {

// "softmaxCrossEntropy on cpu: label 7 of row 1 is outside [0, 3)"
std::string badLabelMessage(BackendOp op, const std::string& device, int64_t label, int64_t row, int64_t cols);
// "embeddingForward on cuda:0: id 2.5 at position 3 is not an integer in [0, 4) (vocabulary size 4)"
std::string badIdMessage(BackendOp op, const std::string& device, float id, int64_t position, int64_t vocab);
// "gatherRows on cpu: index 4 at position 1 is outside [0, 4)"
std::string badRowIndexMessage(BackendOp op, const std::string& device, int64_t index, int64_t position, int64_t rows);

// The host checks of the seam, every element before anything is written; they throw BackendError with
// the messages above. Exposed for backends whose default paths read indices back to the host.
void checkLabelsOnHost(BackendOp op, const std::string& device, const int32_t* labels, int rows, int cols);
void checkIdsOnHost(BackendOp op, const std::string& device, const float* ids, int64_t count, int vocab);
void checkRowIndicesOnHost(BackendOp op, const std::string& device, const int32_t* indices, int64_t count,
                           int64_t rows);

}  // namespace strata
