// strata-train's commands, run in-process (the tests call them so): `args` are the arguments after the command
// word; results go to `out`, notes and errors to `err`. Each is strata::cli::runCommandLine (app/Cli.h) on
// the command word and `args`: the program's parsing, messages and exit statuses; `COMMAND --help` says what
// each does.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runImportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPruneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runProfileCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runSweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runRunsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
