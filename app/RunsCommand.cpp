// strata-train runs: the run history (core/history/RunStore) headless: list, show, export, diff, and the
// edits the Runs view offers (rename, note, delete).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/history/RunStore.h"
#include "core/io/JsonInput.h"

namespace strata {

namespace {

using cli::UsageError;

const char* kRunsUsage =
    "usage: strata-train runs list [--history DB]\n"
    "       strata-train runs show ID [--history DB]\n"
    "       strata-train runs export ID --csv [-o FILE] [--history DB]\n"
    "       strata-train runs diff ID_A ID_B [--history DB]\n"
    "       strata-train runs rename ID NAME | note ID TEXT | delete ID [--history DB]\n"
    "  DB: the run history database (default: the workbench's, $XDG_DATA_HOME/Strata/Strata/runs.sqlite)\n";

std::string num(double v, int precision) {
    if (!std::isfinite(v)) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
}

std::string pct(double v) { return std::isfinite(v) ? num(100 * v, 2) + "%" : "-"; }

int64_t parseId(const std::string& text) { return cli::parseInteger("run ID", text, 1, INT64_MAX); }

int runsCommand(const std::vector<std::string>& argsIn, std::ostream& out, std::ostream& err) {
    std::vector<std::string> args;
    std::string dbPath = history::RunStore::defaultPath(), outPath;
    bool csv = false;
    for (size_t i = 0; i < argsIn.size(); ++i) {
        const std::string& a = argsIn[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= argsIn.size()) throw UsageError(a + " needs a value");
            return argsIn[++i];
        };
        if (a == "--history") {
            dbPath = value();
            if (dbPath == "off") throw UsageError("runs needs a history database, not --history off");
        } else if (a == "--csv") {
            csv = true;
        } else if (a == "-o") {
            outPath = value();
        } else if (a.size() > 1 && a[0] == '-') {
            throw UsageError("unknown option " + a);
        } else {
            args.push_back(a);
        }
    }
    if (args.empty()) throw UsageError("runs needs a subcommand");
    const std::string& sub = args[0];
    auto want = [&](size_t n) {
        if (args.size() != n + 1) throw UsageError("runs " + sub + " takes " + std::to_string(n) + " argument(s)");
    };
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
        want(0);
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
        want(1);
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
        const auto steps = store.metrics(r.id, "step");
        const auto epochs = store.metrics(r.id, "epoch");
        out << "  curves           " << steps.size() << " step points, " << epochs.size() << " epoch points\n";
        const std::string json = store.projectJson(r.id);
        if (!json.empty()) {
            const Json project = parseJson<Json>(json, "run " + std::to_string(r.id) + "'s project");
            if (project.contains("training")) out << "  training         " << project["training"].dump() << "\n";
            if (project.contains("dataset")) out << "  dataset          " << project["dataset"].dump() << "\n";
        }
        for (const history::MetricRow& m : epochs)
            out << "  epoch " << std::setw(4) << m.epoch << "  train loss " << num(m.loss, 4) << " acc "
                << pct(m.accuracy) << " | val loss " << num(m.valLoss, 4) << " acc " << pct(m.valAccuracy) << " | "
                << num(m.samplesPerSecond, 0) << " samples/s\n";
        return 0;
    }
    if (sub == "export") {
        want(1);
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
        want(2);
        const history::RunRecord a = get(args[1]), b = get(args[2]);
        const auto diff = history::settingsDiff(
            parseJson<Json>(store.projectJson(a.id), "run " + std::to_string(a.id) + "'s project"),
            parseJson<Json>(store.projectJson(b.id), "run " + std::to_string(b.id) + "'s project"));
        if (diff.empty()) out << "runs " << a.id << " and " << b.id << " ran the same project settings\n";
        for (const auto& [key, values] : diff) out << key << ": " << values.first << " -> " << values.second << "\n";
        return 0;
    }
    if (sub == "rename" || sub == "note") {
        want(2);
        const int64_t id = parseId(args[1]);
        if (!(sub == "rename" ? store.renameRun(id, args[2]) : store.setNotes(id, args[2])))
            throw std::runtime_error("no run " + args[1] + " in " + dbPath);
        return 0;
    }
    if (sub == "delete") {
        want(1);
        if (!store.deleteRun(parseId(args[1]))) throw std::runtime_error("no run " + args[1] + " in " + dbPath);
        return 0;
    }
    throw UsageError("unknown runs subcommand '" + sub + "'");
}

}  // namespace

int runRunsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return runsCommand(args, out, err);
    } catch (const UsageError& e) {
        err << "strata-train runs: " << e.what() << "\n" << kRunsUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train runs: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
