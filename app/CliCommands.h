// strata-train's commands, run in-process (the tests call them so): `args` are the arguments after the command
// word; results go to `out`, notes and errors to `err`. A command declared on the command line's tree
// (app/Cli.h) runs through strata::cli::runCommandLine, with the program's parsing, messages and exit statuses.
//
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
