// The registry of Backend's ops: one entry per op of BackendOps.def (memory and transfers are not ops),
// in its order. Error messages of the seam start with these names, and tests/test_backend_ops.cpp checks
// its tolerance table against this list both ways, so an op added to Backend without a conformance test
// fails the suite.
#pragma once

#include <string_view>
#include <vector>

namespace strata {

enum class BackendOp {
#define STRATA_BACKEND_OP(Name, Ret, name, params) Name,
#include "core/backend/BackendOps.def"
};

// The op's name as Backend.h spells the function: "gemm", "conv2dForwardFused".
const char* backendOpName(BackendOp op);
// Every op, in declaration order.
const std::vector<BackendOp>& backendOps();
// Every op's name, in the same order.
const std::vector<std::string_view>& backendOpNames();

}  // namespace strata
