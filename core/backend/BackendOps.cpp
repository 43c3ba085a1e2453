// The op registry (BackendOps.h).
#include "core/backend/BackendOps.h"

#include <iterator>

namespace strata {

namespace {

// Indexed by BackendOp: both come from BackendOps.def in its order.
constexpr const char* kNames[] = {
#define STRATA_BACKEND_OP(Name, Ret, name, params) #name,
#include "core/backend/BackendOps.def"
};

}  // namespace

const char* backendOpName(BackendOp op) {
    const auto i = static_cast<size_t>(op);
    return i < std::size(kNames) ? kNames[i] : "unknown op";
}

const std::vector<BackendOp>& backendOps() {
    static const std::vector<BackendOp> all = [] {
        std::vector<BackendOp> v;
        for (size_t i = 0; i < std::size(kNames); ++i) v.push_back(static_cast<BackendOp>(i));
        return v;
    }();
    return all;
}

const std::vector<std::string_view>& backendOpNames() {
    static const std::vector<std::string_view> all(std::begin(kNames), std::end(kNames));
    return all;
}

}  // namespace strata
