// strata-train's command line, on CLI11: the training options belong to the program itself and each command
// (export, predict, prune, profile, lr-find, sweep, runs) is a subcommand that its own file declares once. A flag that
// sets a project setting takes its name, value, help and limits from the settings table
// (core/graph/Settings.cpp); --help is generated from the declarations. runCommandLine is the one place that
// turns a wrong command line or an exception into "strata-train[ COMMAND]: message" and the exit status.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/graph/Settings.h"

namespace strata::cli {

// Exit statuses: a wrong command line (CLI11's parse errors and UsageError) 2; a failure while running 1.
constexpr int kUsageExit = 2;
constexpr int kFailureExit = 1;

// A wrong command line found after parsing (two options that do not go together, a missing input).
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// What a command does once its command line has parsed: results to `out`, notes and progress to `err`.
using CommandRun = std::function<int(std::ostream& out, std::ostream& err)>;

// One command: its name, the line --help lists it with, and what declares its options on its CLI::App and
// returns the run bound to the parsed values.
struct Command {
    const char* name;
    const char* summary;
    CommandRun (*declare)(CLI::App& app);
};
const std::vector<Command>& commands();

// Declared by the command files (app/*Command.cpp).
CommandRun declareExport(CLI::App& app);
CommandRun declareImport(CLI::App& app);
CommandRun declarePredict(CLI::App& app);
CommandRun declarePrune(CLI::App& app);
CommandRun declareProfile(CLI::App& app);
CommandRun declareLrFind(CLI::App& app);
CommandRun declareSweep(CLI::App& app);
CommandRun declareRuns(CLI::App& app);

// ---- options ---------------------------------------------------------------------------------------------

// The flag of a project setting: the table's name (or `flag`, where a command names it otherwise), value name,
// help and range. Each value given is checked as the project file checks it (the file's words after the flag:
// "--batch: 0 is out of range (1 to 16777216)"), a path made absolute (it is typed relative to the working
// directory), and appended to `values`: the setting's own, then for a choice written with its argument
// ("--dist-mode local-sgd:8") its argument's.
CLI::Option* addSettingOption(CLI::App& app, const SettingInfo& setting, std::vector<SettingValue>& values,
                              const std::string& flag = {}, const std::string& note = {});
// A whole number from min to max; anything else is refused as "--top: '0' is not a whole number from 1 to
// 1000000". `value` keeps its default when the option is not given.
CLI::Option* addIntegerOption(CLI::App& app, const std::string& name, int64_t& value, int64_t min, int64_t max,
                              const std::string& help);
CLI::Option* addIntegerOption(CLI::App& app, const std::string& name, int& value, int min, int max,
                              const std::string& help);
// A number in a range whose ends may be excluded; anything else is refused as "--sparsity: '1.5' is not a number
// from 0 to 1, excluding 1".
struct NumberRange {
    double min = 0, max = 0;
    bool minOpen = false, maxOpen = false;
    std::string text;  // what follows "a number" in --help and messages; empty: "from 0 to 1, excluding 1"
    bool contains(double v) const;
    std::string describe() const;
};
CLI::Option* addNumberOption(CLI::App& app, const std::string& name, double& value, const NumberRange& range,
                             const std::string& help);
// One of `choices`; anything else: "--runtime: 'x' is not one of: strata, opencv".
CLI::Option* addChoiceOption(CLI::App& app, const std::string& name, std::string& value,
                             const std::vector<std::string>& choices, const std::string& help);
// A value that core parses (parsePruningScope, parseCalibrationMethod...): its std::invalid_argument becomes
// the refusal, after the option's name.
template <class T>
CLI::Option* addParsedOption(CLI::App& app, const std::string& name, T& value,
                             std::function<T(const std::string&)> parse, const std::string& help) {
    return app
        .add_option_function<std::string>(
            name,
            [&value, parse = std::move(parse), name](const std::string& text) {
                try {
                    value = parse(text);
                } catch (const std::invalid_argument& e) {
                    throw CLI::ValidationError(name, e.what());
                }
            },
            help)
        ->type_name("TEXT");
}

// Warnings for the settings given on the command line that have no effect with the settings they end up
// with ("--decode-threads has no effect with dataset.kind idx (it applies with image_folder)"). Only the
// flags' own settings are looked at (the steps of "--dist-mode local-sgd:8" go with --dist-mode).
std::vector<std::string> inapplicableFlags(const std::vector<SettingValue>& given, const DatasetSettings& dataset,
                                           const TrainingSettings& training, int ranks);

// True when `path` is a regular file whose first non-space byte is '{' (a project, not a model file); false for
// a folder or a missing file (the model reader names those). FormatError for a FIFO or device, at once.
bool looksLikeProjectFile(const std::string& path);

// ---- the program -----------------------------------------------------------------------------------------

// The training command's options (strata-train PROJECT [options]).
struct TrainArgs {
    std::string project;
    std::vector<SettingValue> settings;  // the settings' flags given
    std::string metricsPath, resume, initFrom, residentData = "auto", history;
    // Transfer learning: nodes to freeze (--freeze, comma-separated or repeated), every node up to one
    // (--freeze-until), and the head replaced for the data set's classes (--replace-head).
    std::vector<std::string> freeze;
    std::string freezeUntil;
    bool replaceHead = false;
    bool resumeBest = false, quiet = false, listDevices = false;
    int64_t maxSteps = 0;
    double bucketMb = 0;  // 0: automatic
    double collectiveTimeout = 0;
};

// "strata-train 0.1.0", the commit, the build type and the backends this program has.
std::string versionText();

// Parses strata-train's command line (argv without the program's name) and runs it: a command here, the
// training through `train`. --help and --version print on `out`; an error prints on `err` as
// "strata-train[ COMMAND]: message" and returns 2 for a wrong command line, 1 for a failure.
int runCommandLine(const std::vector<std::string>& args, const std::function<int(const TrainArgs&)>& train,
                   std::ostream& out, std::ostream& err);

}  // namespace strata::cli
