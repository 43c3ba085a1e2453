// Task: the facts of each task (TaskKind, the dataset's `task` setting): which losses train it, what its targets
// are, the name of the score that stands for it in the charts and the best-checkpoint choice, and the settings that
// cannot go with it. One place for them, so that the Trainer, strata-train, the panels and the export checks ask
// here instead of testing the task themselves.
#pragma once

#include <string>
#include <vector>

#include "core/graph/Settings.h"

namespace strata {

// The losses a task trains with, the first its default.
const std::vector<LossKind>& taskLosses(TaskKind task);
bool taskAllows(TaskKind task, LossKind loss);
// Classification: labels are class indices and the output is one logit per class (argmax, accuracy). Every other
// task trains against float targets of the output's shape.
inline bool taskHasClasses(TaskKind task) { return task == TaskKind::Classification; }
// The score that stands for the task where one number is shown (higher is better): "accuracy", "R2" (regression,
// the mean over targets), "micro F1", "PSNR" (dB).
std::string taskScoreName(TaskKind task);
// Whether the score lies in [0, 1] (accuracy, F1) or not (R2 may be negative, PSNR is in dB).
inline bool taskScoreIsFraction(TaskKind task) {
    return task == TaskKind::Classification || task == TaskKind::MultiLabel;
}

// Every way the settings contradict the task, in one message naming the settings and the fix ("training.loss
// cross_entropy does not train a regression; use one of: mse, mae, huber"); empty when none.
std::string taskSettingsProblem(const DatasetSettings& dataset, const TrainingSettings& training);
// taskSettingsProblem as std::invalid_argument when there is one.
void checkTaskSettings(const DatasetSettings& dataset, const TrainingSettings& training);

}  // namespace strata
