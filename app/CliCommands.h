// strata-train's commands, run in-process (the tests call them so): `args` are the arguments after the command
// word; results go to `out`, notes and errors to `err`. A command declared on the command line's tree
// (app/Cli.h) runs through strata::cli::runCommandLine, with the program's parsing, messages and exit statuses.
//
//   prune PROJECT_OR_CHECKPOINT --sparsity S -o DIR [--structured] [--fine-tune-epochs N] [schedule options]
//     Magnitude pruning to sparsity S on a polynomial schedule while fine-tuning (or, --structured, removing
//     the fraction S of Conv2D filters and Dense units and fine-tuning the smaller graph); writes a project
//     file and its checkpoints into DIR and prints the validation accuracy before and after and each layer's
//     sparsity (core/train/PruneRun.h).
//   runs list | show ID | export ID --csv [-o FILE] | diff A B | rename ID NAME | note ID TEXT | delete ID
//        [--history DB]
//     The run history that the workbench and training runs of strata-train write (core/history/RunStore).
//   profile PROJECT [--device D] [--batch B] [--steps N] [--json FILE] [--roofline-cache FILE] [--refresh-roofline]
//     Per-layer forward and backward times, FLOPs, bytes, achieved rates against the device roofline, and the
//     step split into compute, data wait and overhead (core/train/Profile.h).
//   sweep PROJECT [--history DB|off] [--state FILE] [--quiet]
//     The project's hyperparameter sweep, each trial a recorded run, resumable (core/history/Sweep.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPruneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runProfileCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runSweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runRunsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
