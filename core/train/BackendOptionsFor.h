// The backend a training run needs, from the project's training settings: every program that trains
// (strata-train, the workbench's EngineWorker, benchmarks, tests) makes its backend with
// backendOptionsFor(project.training), and the Trainer checks the backend it is given against the
// settings with checkBackendFor, so a run never trains in another precision or mode than it asks.
#pragma once

#include "core/backend/Backend.h"
#include "core/graph/Project.h"

namespace strata {

// threads, deterministic and precision from the settings; index checks deferred (eagerIndexChecks
// false): the labels are checked when the data loads, so the device need not stop at every loss to
// check them again; a bad one still throws, naming the op, at the step's metrics read-back.
// Throws std::invalid_argument for an unknown training.precision.
BackendOptions backendOptionsFor(const TrainingSettings& settings);

// Throws BackendError, naming the setting and the fix, when `backend` computes in another precision than
// training.precision, or is not deterministic while training.deterministic asks for it.
void checkBackendFor(const Backend& backend, const TrainingSettings& settings);

}  // namespace strata
