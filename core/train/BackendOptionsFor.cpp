// Backend options of a training run and the Trainer's check of its backend (BackendOptionsFor.h).
#include "core/train/BackendOptionsFor.h"

#include <string>

namespace strata {

BackendOptions backendOptionsFor(const TrainingSettings& settings) {
    BackendOptions o;
    o.threads = settings.threads;
    o.deterministic = settings.deterministic;
    o.precision = settings.precision;
    o.eagerIndexChecks = false;
    return o;
}

void checkBackendFor(const Backend& backend, const TrainingSettings& settings) {
    const ComputePrecision wanted = settings.precision;
    const std::string where = "the " + backend.name() + " backend (" + backend.device().toString() + ")";
    const char* fix = "; make the backend with backendOptionsFor(project.training)";
    if (backend.computePrecision() != wanted)
        throw BackendError(where + " was made for " + computePrecisionName(backend.computePrecision()) +
                           " compute but training.precision is " + computePrecisionName(wanted) + fix);
    if (settings.deterministic && !backend.deterministic())
        throw BackendError(where + " was not made deterministic but training.deterministic is true" + fix);
}

}  // namespace strata
