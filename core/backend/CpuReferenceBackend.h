// CpuReferenceBackend: the plain, single-threaded loops of CpuReference.h
// (double accumulators for long sums), the ground truth of the test suite.
// Every other backend, CpuBackend's fast paths included, is tested against
// it (tests/test_backend_ops.cpp). Not a device of the registry: tests make it.
#pragma once

#include "core/backend/CpuMemoryBackend.h"

namespace strata {

class CpuReferenceBackend : public CpuMemoryBackend {
public:
    // options.threads is ignored: the reference runs on the calling thread.
    explicit CpuReferenceBackend(const BackendOptions& options = {});

protected:
    // The same loops with other traits (a test's backend without reduced precision).
    CpuReferenceBackend(const Traits& traits, const BackendOptions& options);

    // Every op of BackendOps.def without a default: `Ret doName(parameters) override;`. The ops with a
    // default run Backend's composition (gatherRows: CpuMemoryBackend's).
#include "core/backend/BackendOpOverrides.def"
};

}  // namespace strata
