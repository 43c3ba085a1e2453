// strata-train's command line: see Cli.h. The training command's options are declared here; each command's
// in its own file.
#include "app/Cli.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "app/CliCommands.h"
#include "core/dist/Communicator.h"
#include "core/history/RunStore.h"
#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

namespace strata::cli {

namespace {

// "'abc...' is not a whole number from 1 to 10"; long texts cut, as every message cuts what it quotes.
std::string quoted(const std::string& text) { return "'" + cutForMessage(text, 40) + "'"; }

CLI::Option* integerOption(CLI::App& app, const std::string& name, const std::function<void(int64_t)>& store,
                           int64_t min, int64_t max, const std::string& help) {
    return app
        .add_option_function<std::string>(
            name,
            [store, name, min, max](const std::string& text) {
                // strtoll, not stoi: "4294967360" must be refused, not wrapped.
                errno = 0;
                char* end = nullptr;
                const long long v = std::strtoll(text.c_str(), &end, 10);
                const bool whole = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE;
                if (!whole || v < min || v > max)
                    throw CLI::ValidationError(
                        name, quoted(text) + " is not a whole number from " + integerRangeText(min, max));
                store(v);
            },
            help + " (" + integerRangeText(min, max) + ")")
        ->type_name("N");
}

// The training command: the settings' flags from the table, then the options of the run.
void declareTrain(CLI::App& app, TrainArgs& a) {
    app.add_option("project", a.project, "The project file to train.")->type_name("PROJECT.strata");
    const std::string settings = "Settings (each overrides the project's setting in brackets)";
    for (const SettingInfo* s : settingsWithFlags()) addSettingOption(app, *s, a.settings)->group(settings);
    const std::string run = "Run options";
    app.add_option("--metrics-out", a.metricsPath, "One JSON object per step, epoch and event.")
        ->type_name("FILE.jsonl")
        ->group(run);
    app.add_option("--resume", a.resume, "Continue from a checkpoint file, or a folder's newest checkpoint that loads.")
        ->type_name("CKPT")
        ->group(run);
    app.add_option_function<std::string>(
           "--resume-from",
           [&a](const std::string& which) {
               if (which != "latest" && which != "best")
                   throw CLI::ValidationError("--resume-from", quoted(which) + " is not one of: latest, best");
               a.resumeBest = which == "best";
           },
           "latest (default) or best: which checkpoint of a --resume folder.")
        ->type_name("latest|best")
        ->group(run);
    app.add_option("--init-from", a.initFrom,
                   "A new run from a checkpoint's weights (any project's) or an ONNX file Strata wrote "
                   "(initializers <node>.<param>): tensors whose name and shape match are copied, the others "
                   "listed.")
        ->type_name("CKPT|MODEL.onnx")
        ->group(run);
    const std::string transfer = "Transfer learning";
    app.add_option("--freeze", a.freeze,
                   "Freeze these nodes: their weights keep their values and get no gradient (the project's "
                   "trainable flags, plus these).")
        ->delimiter(',')
        ->type_name("NODE[,NODE...]")
        ->group(transfer);
    app.add_option("--freeze-until", a.freezeUntil,
                   "Freeze every node from the input up to and including NODE (the backbone below a head).")
        ->type_name("NODE")
        ->group(transfer);
    app.add_flag("--replace-head", a.replaceHead,
                 "Set the last Dense layer's units to the data set's number of classes and give it new initial "
                 "weights (it is renamed <name>_new, so --init-from loads nothing into it).")
        ->group(transfer);
    addIntegerOption(app, "--max-steps", a.maxSteps, 1, INT64_MAX, "Stop after N steps.")->group(run);
    addChoiceOption(app, "--resident-data", a.residentData, {"auto", "on", "off"},
                    "Keep the training split in device memory and gather batches there (auto: on a GPU when it "
                    "fits and there is no augmentation).")
        ->group(run);
    a.history = history::RunStore::defaultPath();
    app.add_option("--history", a.history,
                   "Record the run in this run history (default: the workbench's database); off: no record.")
        ->type_name("DB|off")
        ->group(run);
    app.add_flag("--quiet", a.quiet, "No progress bar.")->group(run);
    addNumberOption(app, "--bucket-mb", a.bucketMb, {1.0 / 1048576.0, 65536, false, false, "from 1 byte to 65536"},
                    "Data parallel, sync: the gradient all-reduce bucket size in MiB (default: an eighth of the "
                    "gradients, 0.25 to 25; 0.001 = 1 KiB).")
        ->type_name("MB")
        ->group(run);
    a.collectiveTimeout = kDefaultCollectiveTimeoutSeconds;
    addNumberOption(app, "--collective-timeout", a.collectiveTimeout, {0, 604800, false, false, {}},
                    "Data parallel: end the job when a rank waits longer than S seconds in one collective (0: "
                    "never; default 600).")
        ->type_name("S")
        ->group(run);
    app.add_flag("--list-devices", a.listDevices, "List the devices this build can train on, and exit.")->group(run);
    app.footer(
        "Under mpirun (mpirun -np N strata-train PROJECT --device cpu) the batch size is the global batch, split\n"
        "over the N ranks; rank 0 alone prints progress and writes checkpoints, metrics and history. At the start\n"
        "every rank compares the project and these options with rank 0's and stops, naming the rank and the\n"
        "setting, when they differ.\n"
        "A flag whose setting has no effect with the project's other settings (--decode-threads on IDX data,\n"
        "--dist-mode in one process on one device) is warned about, not refused.");
}

}  // namespace

// ---- options ---------------------------------------------------------------------------------------------

CLI::Option* addSettingOption(CLI::App& app, const SettingInfo& setting, std::vector<SettingValue>& values,
                              const std::string& flag, const std::string& note) {
    const std::string name = flag.empty() ? setting.flag : flag;
    std::string help = setting.help;
    if (!note.empty()) help += " " + note;
    if (setting.isInteger() || setting.isNumber() || setting.kind == SettingKind::UInt64)
        help += " (" + setting.rangeText() + ")";
    help += " [" + setting.dottedName() + "]";
    auto take = [&values, &setting, name](const std::string& text) {
        std::vector<SettingValue> parsed;
        try {
            parsed = parseSettingFlag(setting, text, name);
        } catch (const std::invalid_argument& e) {
            throw CLI::ValidationError(e.what());  // it names the flag already
        }
        for (SettingValue& v : parsed) {
            if (v.setting->kind == SettingKind::Path && !v.value.get<std::string>().empty())
                v.value = std::filesystem::absolute(v.value.get<std::string>()).string();
            values.push_back(std::move(v));
        }
    };
    if (setting.kind == SettingKind::Bool)
        return app.add_flag_callback(
            name, [take] { take(""); }, help);
    std::string valueName = setting.flagValue;
    if (valueName.empty()) valueName = setting.isNumber() ? "X" : "N";
    return app.add_option_function<std::string>(name, take, help)->type_name(valueName);
}

CLI::Option* addIntegerOption(CLI::App& app, const std::string& name, int64_t& value, int64_t min, int64_t max,
                              const std::string& help) {
    return integerOption(
        app, name, [&value](int64_t v) { value = v; }, min, max, help);
}

CLI::Option* addIntegerOption(CLI::App& app, const std::string& name, int& value, int min, int max,
                              const std::string& help) {
    return integerOption(
        app, name, [&value](int64_t v) { value = static_cast<int>(v); }, min, max, help);
}

bool NumberRange::contains(double v) const { return (minOpen ? v > min : v >= min) && (maxOpen ? v < max : v <= max); }

std::string NumberRange::describe() const { return text.empty() ? "from " + numberRangeText(min, max, maxOpen) : text; }

CLI::Option* addNumberOption(CLI::App& app, const std::string& name, double& value, const NumberRange& range,
                             const std::string& help) {
    return app
        .add_option_function<std::string>(
            name,
            [&value, range, name](const std::string& text) {
                char* end = nullptr;
                const double v = std::strtod(text.c_str(), &end);
                if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || !range.contains(v))
                    throw CLI::ValidationError(name, quoted(text) + " is not a number " + range.describe());
                value = v;
            },
            help + " (" + range.describe() + ")")
        ->type_name("X");
}

CLI::Option* addChoiceOption(CLI::App& app, const std::string& name, std::string& value,
                             const std::vector<std::string>& choices, const std::string& help) {
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) list += (i ? "|" : "") + choices[i];
    return app
        .add_option_function<std::string>(
            name,
            [&value, choices, name](const std::string& text) {
                for (const std::string& c : choices)
                    if (c == text) {
                        value = text;
                        return;
                    }
                std::string names;
                for (size_t i = 0; i < choices.size(); ++i) names += (i ? ", " : "") + choices[i];
                throw CLI::ValidationError(name, quoted(text) + " is not one of: " + names);
            },
            help)
        ->type_name(list);
}

std::vector<std::string> inapplicableFlags(const std::vector<SettingValue>& given, const DatasetSettings& dataset,
                                           const TrainingSettings& training, int ranks) {
    std::vector<std::string> out;
    for (const SettingValue& v : given) {
        if (v.setting->flag.empty()) continue;
        const std::string why = settingInapplicableReason(*v.setting, dataset, training, ranks);
        if (!why.empty()) out.push_back(v.setting->flag + " has no effect " + why);
    }
    return out;
}

bool looksLikeProjectFile(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) || std::filesystem::is_directory(path, ec)) return false;
    InputFile in(path, kMaxModelFileBytes, "a project or model file");
    char buf[4096];
    for (size_t n; (n = in.read(buf, sizeof buf)) > 0;)
        for (size_t i = 0; i < n; ++i)
            if (!std::isspace(static_cast<unsigned char>(buf[i]))) return buf[i] == '{';
    return false;
}

// ---- the program -----------------------------------------------------------------------------------------

const std::vector<Command>& commands() {
    static const std::vector<Command> list = {
        {"export", "Write a trained model as ONNX, GGUF or safetensors.", &declareExport},
        {"import", "Make a project of an ONNX model (PyTorch's torch.onnx.export, or Strata's), weights kept.",
         &declareImport},
        {"predict", "Run a model or export on images, CSV rows or texts.", &declarePredict},
        {"prune", "Prune a trained model while fine-tuning it.", &declarePrune},
        {"profile", "Time every layer of a project's training step.", &declareProfile},
        {"lr-find", "Sweep the learning rate on a copy of the model and suggest one.", &declareLrFind},
        {"sweep", "Run (or resume) the project's hyperparameter sweep.", &declareSweep},
        {"runs", "The run history: list, show, export, diff, rename, note, delete.", &declareRuns},
    };
    return list;
}

int runCommandLine(const std::vector<std::string>& args, const std::function<int(const TrainArgs&)>& train,
                   std::ostream& out, std::ostream& err) {
    CLI::App app("Trains a Strata project headless, or runs one of the commands below.", "strata-train");
    // A flag given twice: the last one counts, as the hand-written loops had it.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.set_version_flag("--version", versionText, "Print the version, commit, build type and backends, and exit.");
    TrainArgs trainArgs;
    declareTrain(app, trainArgs);
    std::vector<std::pair<CLI::App*, CommandRun>> runs;
    for (const Command& c : commands()) {
        CLI::App* sub = app.add_subcommand(c.name, c.summary);
        runs.emplace_back(sub, c.declare(*sub));
    }
    app.require_subcommand(0, 1);

    // Messages name the command whose line it was, even when parsing failed.
    std::string prefix = "strata-train";
    for (const Command& c : commands())
        if (!args.empty() && args[0] == c.name) prefix += " " + args[0];
    try {
        if (args.empty()) {
            err << app.help();
            return kUsageExit;
        }
        std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
        app.parse(reversed);
        for (const auto& [sub, run] : runs) {
            if (!sub->parsed()) continue;
            if (args[0] != sub->get_name())
                throw UsageError("'" + sub->get_name() + "' is a command: give it first (strata-train " +
                                 sub->get_name() + " ...), without training options before it");
            return run(out, err);
        }
        if (!train) throw UsageError("no command given");
        if (trainArgs.project.empty() && !trainArgs.listDevices) throw UsageError("no project file given");
        return train(trainArgs);
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return 0;
    } catch (const CLI::CallForVersion& e) {
        out << e.what() << "\n";
        return 0;
    } catch (const CLI::ParseError& e) {
        err << prefix + ": " + e.what() + "\n(" + prefix + " --help lists the options)\n";
        return kUsageExit;
    } catch (const UsageError& e) {
        err << prefix + ": " + e.what() + "\n(" + prefix + " --help lists the options)\n";
        return kUsageExit;
    } catch (const std::exception& e) {
        // One string, one write: std::cerr is unbuffered, and under mpirun the ranks' messages share one
        // stream, where pieces written apart interleave mid-line.
        err << prefix + ": " + e.what() + "\n";
        return kFailureExit;
    }
}

}  // namespace strata::cli

namespace strata {

namespace {

int runNamed(const char* command, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    std::vector<std::string> line{command};
    line.insert(line.end(), args.begin(), args.end());
    return cli::runCommandLine(line, nullptr, out, err);
}

}  // namespace

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("export", args, out, err);
}

int runImportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("import", args, out, err);
}

int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("predict", args, out, err);
}

int runPruneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("prune", args, out, err);
}

int runProfileCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("profile", args, out, err);
}

int runLrFindCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("lr-find", args, out, err);
}

int runSweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("sweep", args, out, err);
}

int runRunsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    return runNamed("runs", args, out, err);
}

}  // namespace strata
