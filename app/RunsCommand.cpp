// strata-train runs: the run history (core/history/RunStore) headless: list, show, export, diff, and the
// edits the Runs view offers (rename, note, delete).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <memory>

#include "app/Cli.h"
#include "core/history/RunStore.h"
#include "core/io/JsonInput.h"

namespace strata {

namespace {

using cli::UsageError;

std::string num(double v, int precision) {
    if (!std::isfinite(v)) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
}

std::string pct(double v) { return std::isfinite(v) ? num(100 * v, 2) + "%" : "-"; }

// The run IDs of the subcommands, refused like any whole-number option.
int64_t parseId(const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || v < 1)
        throw UsageError("run ID: '" + cutForMessage(text, 40) + "' is not a whole number from 1 to " +
                         std::to_string(INT64_MAX));
    return v;
}

struct RunsArgs {
    std::string sub;                // list, show, export, diff, rename, note, delete
    std::vector<std::string> args;  // its positionals: IDs, a name, a text
    std::string dbPath = history::RunStore::defaultPath(), outPath;
    bool csv = false;
};

int runsCommand(const RunsArgs& given, std::ostream& out, std::ostream& err) {
    const std::string &dbPath = given.dbPath, &outPath = given.outPath;
    const bool csv = given.csv;
    if (dbPath == "off") throw UsageError("runs needs a history database, not --history off");
    std::vector<std::string> args{given.sub};
    args.insert(args.end(), given.args.begin(), given.args.end());
    const std::string& sub = args[0];
    history::RunStore store(dbPath);
    // What a run whose process died (or that found the database locked at its end) left unrecorded, before the
    // runs are shown.
    for (const std::string& line : store.recover()) err << line << "\n";
    auto get = [&](const std::string& idText) {
        const int64_t id = parseId(idText);
        std::optional<history::RunRecord> r = store.run(id);
        if (!r) throw std::runtime_error("no run " + idText + " in " + dbPath);
        return *r;
    };

    if (sub == "list") {
        out << std::left << std::setw(6) << "ID" << std::setw(21) << "STARTED (UTC)" << std::setw(7) << "FROM"
            << std::setw(20) << "PROJECT" << std::setw(8) << "DEVICE" << std::setw(12) << "STATUS" << std::setw(7)
            << "EPOCHS" << std::setw(10) << "BEST ACC" << std::setw(10) << "VAL ACC" << std::setw(10) << "VAL LOSS"
            << std::setw(10) << "SAMPLE/S" << std::setw(9) << "SECONDS"
            << "NAME\n";
        for (const history::RunRecord& r : store.runs())
            out << std::setw(6) << r.id << std::setw(21) << r.started.substr(0, 19) << std::setw(7) << r.source
                << std::setw(20) << r.projectName.substr(0, 19) << std::setw(8) << r.device << std::setw(12) << r.status
                << std::setw(7) << r.epochsCompleted << std::setw(10) << pct(r.bestValAccuracy) << std::setw(10)
                << pct(r.finalValAccuracy) << std::setw(10) << num(r.finalValLoss, 4) << std::setw(10)
                << num(r.samplesPerSecond, 0) << std::setw(9) << num(r.seconds, 1) << r.name << "\n";
        return 0;
    }
    if (sub == "show") {
        const history::RunRecord r = get(args[1]);
        out << "run " << r.id << (r.name.empty() ? "" : " (" + r.name + ")") << "\n"
            << "  started          " << r.started << "\n"
            << "  from             " << r.source << "\n"
            << "  project          " << r.projectName << " (" << r.projectPath << ")\n"
            << "  device           " << r.device << "\n"
            << "  status           " << r.status << (r.message.empty() ? "" : ": " + r.message) << "\n"
            << "  epochs           " << r.epochsCompleted << "\n"
            << "  best epoch       " << r.bestEpoch << ": val loss " << num(r.bestValLoss, 4) << ", val acc "
            << pct(r.bestValAccuracy) << "\n"
            << "  final            train loss " << num(r.finalTrainLoss, 4) << " acc " << pct(r.finalTrainAccuracy)
            << " | val loss " << num(r.finalValLoss, 4) << " acc " << pct(r.finalValAccuracy) << "\n"
            << "  samples/s        " << num(r.samplesPerSecond, 0) << "\n"
            << "  seconds          " << num(r.seconds, 1) << "\n";
        if (!r.notes.empty()) out << "  notes            " << r.notes << "\n";
        // Tasks other than classification: every metric of the last epoch (per label or target too).
        if (!r.finalValMetrics.empty()) {
            out << "  final metrics   ";
            for (const NamedMetric& m : r.finalValMetrics) out << " " << m.name << " " << formatMetric(m.value);
            out << "\n";
        }
        const auto steps = store.metrics(r.id, "step");
        const auto epochs = store.metrics(r.id, "epoch");
        out << "  curves           " << steps.size() << " step points, " << epochs.size() << " epoch points\n";
        const std::string json = store.projectJson(r.id);
        if (!json.empty()) {
            const Json project = parseJson<Json>(json, "run " + std::to_string(r.id) + "'s project");
            if (project.contains("training")) out << "  training         " << project["training"].dump() << "\n";
            if (project.contains("dataset")) out << "  dataset          " << project["dataset"].dump() << "\n";
        }
        for (const history::MetricRow& m : epochs) {
            out << "  epoch " << std::setw(4) << m.epoch << "  train loss " << num(m.loss, 4) << " acc "
                << pct(m.accuracy) << " | val loss " << num(m.valLoss, 4) << " acc " << pct(m.valAccuracy) << " | "
                << num(m.samplesPerSecond, 0) << " samples/s";
            // The task's summary metrics (r2, mae, rmse; micro_f1, macro_f1; psnr), not each label's.
            for (const NamedMetric& v : m.valMetrics)
                if (v.name.find('[') == std::string::npos) out << " | " << v.name << " " << formatMetric(v.value);
            out << "\n";
        }
        return 0;
    }
    if (sub == "export") {
        if (!csv) throw UsageError("runs export needs --csv (the one format it writes)");
        const history::RunRecord r = get(args[1]);
        std::vector<history::MetricRow> rows = store.metrics(r.id, "step");
        const std::vector<history::MetricRow> epochs = store.metrics(r.id, "epoch");
        rows.insert(rows.end(), epochs.begin(), epochs.end());
        const std::string text = history::metricsCsv(rows);
        if (outPath.empty()) {
            out << text;
        } else {
            std::ofstream f(outPath, std::ios::binary | std::ios::trunc);
            if (!(f << text)) throw std::runtime_error("cannot write '" + outPath + "'");
        }
        return 0;
    }
    if (sub == "diff") {
        const history::RunRecord a = get(args[1]), b = get(args[2]);
        const auto diff = history::settingsDiff(
            parseJson<Json>(store.projectJson(a.id), "run " + std::to_string(a.id) + "'s project"),
            parseJson<Json>(store.projectJson(b.id), "run " + std::to_string(b.id) + "'s project"));
        if (diff.empty()) out << "runs " << a.id << " and " << b.id << " ran the same project settings\n";
        for (const auto& [key, values] : diff) out << key << ": " << values.first << " -> " << values.second << "\n";
        return 0;
    }
    if (sub == "rename" || sub == "note") {
        const int64_t id = parseId(args[1]);
        if (!(sub == "rename" ? store.renameRun(id, args[2]) : store.setNotes(id, args[2])))
            throw std::runtime_error("no run " + args[1] + " in " + dbPath);
        return 0;
    }
    if (sub == "delete") {
        if (!store.deleteRun(parseId(args[1]))) throw std::runtime_error("no run " + args[1] + " in " + dbPath);
        return 0;
    }
    throw UsageError("unknown runs subcommand '" + sub + "'");
}

}  // namespace

cli::CommandRun cli::declareRuns(CLI::App& app) {
    auto a = std::make_shared<RunsArgs>();
    app.footer(
        "The run history that the workbench and strata-train's training runs write: list, show, export, diff, and "
        "the edits the Runs view offers.");
    app.add_option("--history", a->dbPath,
                   "The run history database (default: the workbench's, $XDG_DATA_HOME/Strata/Strata/runs.sqlite).")
        ->type_name("DB");
    // Each subcommand with its positionals, in the order given; --history may follow them (fallthrough).
    struct Positional {
        const char* name;
        const char* help;
    };
    struct Sub {
        const char* name;
        const char* help;
        std::vector<Positional> positionals;
    };
    const Positional id{"ID", "The run's ID (runs list shows them)."};
    const std::vector<Sub> subs = {
        {"list", "Every run, newest last.", {}},
        {"show", "One run: its settings, curves and epochs.", {id}},
        {"export", "One run's step and epoch metrics as CSV (--csv), on stdout or -o FILE.", {id}},
        {"diff", "The settings two runs differ in.", {{"ID_A", "The first run."}, {"ID_B", "The second run."}}},
        {"rename", "Names a run.", {id, {"NAME", "Its new name."}}},
        {"note", "Sets a run's notes.", {id, {"TEXT", "Its notes."}}},
        {"delete", "Deletes a run and its metrics.", {id}},
    };
    for (const Sub& s : subs) {
        CLI::App* sub = app.add_subcommand(s.name, s.help);
        sub->fallthrough();
        sub->footer("");
        for (const Positional& p : s.positionals)
            sub->add_option_function<std::string>(
                   p.name, [a](const std::string& v) { a->args.push_back(v); }, p.help)
                ->type_name("")
                ->required();
        if (std::string(s.name) == "export") {
            sub->add_flag("--csv", a->csv, "Write CSV (the one format it writes).");
            sub->add_option("-o", a->outPath, "The file to write (default: stdout).")->type_name("FILE");
        }
        sub->callback([a, sub] { a->sub = sub->get_name(); });
    }
    app.require_subcommand(0, 1);
    return [a](std::ostream& out, std::ostream& err) {
        if (a->sub.empty())
            throw UsageError("runs needs a subcommand: list, show, export, diff, rename, note or delete");
        return runsCommand(*a, out, err);
    };
}

}  // namespace strata
