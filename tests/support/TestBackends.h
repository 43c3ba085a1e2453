// Backends available to tests: the CPU reference, the CPU fast path, and
// every CUDA GPU that can be opened. Tests that need a GPU call
// skipReasonNoGpu() and QSKIP with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend/Backend.h"

namespace strata::test {

struct NamedBackend {
    std::string name;  // "cpu-reference", "cpu", "cuda:0"
    std::unique_ptr<Backend> backend;
};

// CpuReferenceBackend: the plain reference loops (the ground truth).
std::unique_ptr<Backend> makeReferenceBackend(const BackendOptions& options = {});
// CpuBackend: the CPU's fast paths.
std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options = {});
// Every non-reference backend present, made with `options`: the fast CPU backend plus one per CUDA GPU.
std::vector<NamedBackend> fastBackends(const BackendOptions& options = {});
// Empty when a GPU can be used; otherwise why not ("built without CUDA", "no CUDA device: ...").
std::string gpuUnavailableReason();

// Path of a file in the source tree, e.g. sourcePath("examples/fashion_mlp.strata"); the environment
// variable STRATA_SOURCE_DIR, when set, names the tree instead of the one the test was built from.
std::string sourcePath(const std::string& relative);

}  // namespace strata::test
