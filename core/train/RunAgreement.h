// RunAgreement: what a data-parallel rank compares with the others at the start (core/dist/Agreement.h): the
// effective project (every override applied) and every option that decides which collectives the ranks call
// and how large they are: the step limit, the bucket size, the mode, the resume point, pruning, the loss
// scale, the telemetry that rides on the stop vote.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/dist/Agreement.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"

namespace strata {

// The fields of the start-up comparison, in a fixed order.
std::vector<AgreementField> runAgreementFields(const Project& project, const TrainerOptions& options);

// After a resume (every rank reads the checkpoint rank 0 chose): its progress and a hash of the state every
// rank loads for itself (optimizer, trainer state, pruning masks), which the weights broadcast does not cover.
std::vector<AgreementField> resumeAgreementFields(const Checkpoint& checkpoint);

// A JSON value as (dotted path, JSON text) pairs of its leaves: "training.learning_rate" -> "0.05"; arrays of
// named objects (graph nodes) by name ("graph.nodes[dense1].params.units"), other arrays by index. Keys named
// `skip` (canvas positions: "position") are left out.
void flattenJson(const Json& value, const std::string& path, std::vector<std::pair<std::string, std::string>>& out,
                 const std::string& skip = "position");

}  // namespace strata
