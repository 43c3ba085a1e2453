// Index messages and host index checks shared by the seam and the backends (BackendChecks.h).
#include "core/backend/BackendChecks.h"

#include <cmath>
#include <sstream>

#include "core/backend/Backend.h"

namespace strata {

namespace {

std::string prefix(BackendOp op, const std::string& device) {
    return std::string(backendOpName(op)) + " on " + device + ": ";
}

// As a user would write the id (2.5, nan, -1).
std::string formatId(float id) {
    std::ostringstream s;
    s << id;
    return s.str();
}

}  // namespace

std::string badLabelMessage(BackendOp op, const std::string& device, int64_t label, int64_t row, int64_t cols) {
    return prefix(op, device) + "label " + std::to_string(label) + " of row " + std::to_string(row) +
           " is outside [0, " + std::to_string(cols) + ")";
}

std::string badIdMessage(BackendOp op, const std::string& device, float id, int64_t position, int64_t vocab) {
    return prefix(op, device) + "id " + formatId(id) + " at position " + std::to_string(position) +
           " is not an integer in [0, " + std::to_string(vocab) + ") (vocabulary size " + std::to_string(vocab) + ")";
}

std::string badRowIndexMessage(BackendOp op, const std::string& device, int64_t index, int64_t position, int64_t rows) {
    return prefix(op, device) + "index " + std::to_string(index) + " at position " + std::to_string(position) +
           " is outside [0, " + std::to_string(rows) + ")";
}

void checkLabelsOnHost(BackendOp op, const std::string& device, const int32_t* labels, int rows, int cols) {
    for (int r = 0; r < rows; ++r)
        if (labels[r] < 0 || labels[r] >= cols) throw BackendError(badLabelMessage(op, device, labels[r], r, cols));
}

void checkIdsOnHost(BackendOp op, const std::string& device, const float* ids, int64_t count, int vocab) {
    for (int64_t i = 0; i < count; ++i) {
        const float id = ids[i];
        if (!(id >= 0.0f && id < static_cast<float>(vocab)) || id != std::floor(id))
            throw BackendError(badIdMessage(op, device, id, i, vocab));
    }
}

void checkRowIndicesOnHost(BackendOp op, const std::string& device, const int32_t* indices, int64_t count,
                           int64_t rows) {
    for (int64_t i = 0; i < count; ++i)
        if (indices[i] < 0 || indices[i] >= rows)
            throw BackendError(badRowIndexMessage(op, device, indices[i], i, rows));
}

}  // namespace strata
