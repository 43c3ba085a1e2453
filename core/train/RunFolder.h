// RunFolder: where a run keeps its checkpoints when the training settings name no checkpoint folder, so that
// every run keeps its weights without the user asking.
//
// A run's default folder is <project dir>/runs/<project name>-<YYYYMMDD-HHMMSS>/ beside a saved project, or
// <user data dir>/runs/<name>-<stamp>/ for an unsaved one (the caller passes the per-user folder: the GUI
// its application data folder). The caller chooses the folder and hands it to the Trainer
// (TrainerOptions::runFolder); the export dialog and Predict dock find the latest one again.
#pragma once

#include <chrono>
#include <string>

#include "core/graph/Project.h"

namespace strata {

// The folder the project's runs go under: <dir of projectPath>/runs, or <userDataDir>/runs when the project
// is not saved (empty projectPath). Empty when neither is known.
std::string runsFolder(const std::string& projectPath, const std::string& userDataDir);

// A new folder name for a run started at `when` (local time): <runsFolder>/<name>-<YYYYMMDD-HHMMSS>, with
// -2, -3 ... appended when that folder exists already. The folder is not created. The name is the project's
// name with characters unsafe in file names replaced by '_' ("project" when empty).
std::string newRunFolder(const std::string& projectPath, const std::string& projectName, const std::string& userDataDir,
                         std::chrono::system_clock::time_point when);

// Where a run of `project` keeps its checkpoints: the training settings' checkpoint folder (resolved against
// the project file) when set, else a new run folder (newRunFolder).
std::string checkpointFolderForRun(const Project& project, const std::string& projectPath,
                                   const std::string& userDataDir, std::chrono::system_clock::time_point when);

// The newest run folder of the project (by its time stamp) that holds a checkpoint; empty when there is none.
std::string latestRunFolder(const std::string& projectPath, const std::string& projectName,
                            const std::string& userDataDir);

}  // namespace strata
