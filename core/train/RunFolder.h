// RunFolder: where a run keeps its checkpoints when the training settings name no checkpoint folder, so that
// every run keeps its weights without the user asking.
//
// A run's default folder is <project dir>/runs/<project name>-<YYYYMMDD-HHMMSS>/ beside a saved project whose
// folder can be written. A project in a folder the user cannot write (an installed example under
// /usr/share/strata/examples) keeps its runs in the per-user data folder instead:
// <user data dir>/runs/<project>/<name>-<stamp>/, where <project> is the name and the project's id (or, for a
// file without an id, a hash of its path), so that two projects never share one. An unsaved project's runs go to
// <user data dir>/runs/<name>-<stamp>/. The per-user data folder is the run history's
// ($XDG_DATA_HOME/Strata/Strata), so strata-train and the workbench find each other's runs. The caller chooses the
// folder and hands it to the Trainer (TrainerOptions::runFolder); export, predict, the export dialog and the
// Predict dock find the latest one again.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/graph/Project.h"

namespace strata {

// Whether this process may create files in `folder` (access(W_OK)). Replaceable in tests: root may write
// anywhere.
using WritableCheck = std::function<bool(const std::string& folder)>;
bool folderWritable(const std::string& folder);

// The per-user data folder: $XDG_DATA_HOME/Strata/Strata, or ~/.local/share/Strata/Strata (the workbench's
// QStandardPaths::AppDataLocation; the run history lives there too).
std::string defaultUserDataDir();

struct RunsPlace {
    std::string folder;    // where the project's run folders go; empty when no folder is known
    bool perUser = false;  // true: under the per-user data folder because the project's folder is not writable
};

// Where the project's runs go: <dir of projectPath>/runs when that can be written (runs/ when it exists, else the
// project's folder), else the per-user folder for this project; <userDataDir>/runs for an unsaved project (empty
// projectPath). An empty userDataDir means defaultUserDataDir().
RunsPlace runsPlace(const Project& project, const std::string& projectPath, const std::string& userDataDir,
                    const WritableCheck& writable = folderWritable);

// The per-user folder of a saved project's runs: <userDataDir>/runs/<name>-<id or path hash>.
std::string perUserRunsFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir);

// A new folder name for a run started at `when` (local time): <runsPlace>/<name>-<YYYYMMDD-HHMMSS>, with
// -2, -3 ... appended when that folder exists already. The folder is not created. The name is the project's
// name with characters unsafe in file names replaced by '_' ("project" when empty).
std::string newRunFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir,
                         std::chrono::system_clock::time_point when, const WritableCheck& writable = folderWritable);

// Where a run of `project` keeps its checkpoints: the training settings' checkpoint folder (resolved against
// the project file) when set, else a new run folder (newRunFolder).
std::string checkpointFolderForRun(const Project& project, const std::string& projectPath,
                                   const std::string& userDataDir, std::chrono::system_clock::time_point when,
                                   const WritableCheck& writable = folderWritable);

// Why the checkpoint folder the training settings name cannot be written (the nearest folder of it that exists
// is not writable: a relative checkpoint_dir in a read-only project), naming the folder; empty when it can be
// or when none is named. The caller adds how to fix it (--checkpoint-dir, or the training settings).
std::string checkpointFolderProblem(const Project& project, const std::string& projectPath,
                                    const WritableCheck& writable = folderWritable);

// The newest run folder of the project (by its time stamp) that holds a checkpoint, beside the project or in
// its per-user folder, wherever runs went when they were made; empty when there is none.
std::string latestRunFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir);

}  // namespace strata
