// RunStore: see RunStore.h.
#include "core/history/RunStore.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include "core/io/JsonInput.h"
#include "core/train/RunFolder.h"

namespace strata::history {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Columns added after the first release of the history, with their types. ensureSchema adds the ones a
// database lacks. source defaults to 'gui': every run recorded before the CLI wrote here came from the GUI.
const std::vector<std::pair<const char*, const char*>> kAddedRunColumns = {
    {"source", "TEXT DEFAULT 'gui'"},
    {"name", "TEXT"},
    {"notes", "TEXT"},
    {"final_train_loss", "REAL"},
    {"final_train_acc", "REAL"},
    {"final_val_loss", "REAL"},
    {"final_val_acc", "REAL"},
    {"samples_per_second", "REAL"},
    {"run_folder", "TEXT"},  // where the run's checkpoints are (the workbench's and strata-train's default)
    {"pid", "INTEGER"},      // the recording process: a 'running' row whose process is gone was interrupted
    {"host", "TEXT"},        // the recording process's host: only there can recover() tell whether it is gone
    {"project_id", "TEXT"},  // Project::id: a run belongs to the project, wherever its file has moved since
};

// The tables as the first release created them (ui/base/RunHistory); never edited, only added to.
const char* kCreateSql =
    "CREATE TABLE IF NOT EXISTS runs ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, project_name TEXT,"
    " project_path TEXT, device TEXT, project_json TEXT, status TEXT, message TEXT,"
    " epochs_completed INTEGER, best_epoch INTEGER, best_val_loss REAL, best_val_acc REAL,"
    " seconds REAL);"
    "CREATE TABLE IF NOT EXISTS metrics ("
    " run_id INTEGER NOT NULL REFERENCES runs(id), kind TEXT NOT NULL, step INTEGER, epoch INTEGER,"
    " loss REAL, accuracy REAL, learning_rate REAL, samples_per_second REAL, val_loss REAL,"
    " val_accuracy REAL, elapsed_seconds REAL);"
    "CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id, kind);";

// Columns added to the metrics table after the first release, in the order they were added.
const std::pair<const char*, const char*> kAddedMetricColumns[] = {
    // Tasks other than classification: every validation metric of the epoch (EpochEvent::valMetrics), as
    // valMetricsJson writes them; NULL for classification and for epochs of an older Strata.
    {"val_metrics", "TEXT"},
};

const char* kRunColumns =
    "id, started, project_name, project_path, device, COALESCE(source, 'gui'), status, message, name, notes,"
    " epochs_completed, best_epoch, best_val_loss, best_val_acc, final_train_loss, final_train_acc,"
    " final_val_loss, final_val_acc, samples_per_second, seconds, project_id, run_folder, host,"
    " (SELECT MAX(m.step) FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'step'),"
    " (SELECT m.val_metrics FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
    " ORDER BY m.epoch DESC LIMIT 1)";

// The runs of one project (RunStore::runsOfProject); four placeholders: the project id twice, then its path
// twice. Either may be empty: it then matches nothing.
const char* kProjectRunsWhere =
    "((? <> '' AND project_id = ?) OR (COALESCE(project_id, '') = '' AND ? <> '' AND project_path = ?))";

// Fills a finished (or interrupted) run's final metrics and mean throughput from its epoch rows; one
// placeholder, the run id.
const char* kSummarizeSql =
    "UPDATE runs SET"
    " final_train_loss = (SELECT loss FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
    "  ORDER BY m.epoch DESC LIMIT 1),"
    " final_train_acc = (SELECT accuracy FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
    "  ORDER BY m.epoch DESC LIMIT 1),"
    " final_val_loss = (SELECT val_loss FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
    "  ORDER BY m.epoch DESC LIMIT 1),"
    " final_val_acc = (SELECT val_accuracy FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
    "  ORDER BY m.epoch DESC LIMIT 1),"
    " samples_per_second = (SELECT AVG(samples_per_second) FROM metrics m WHERE m.run_id = runs.id"
    "  AND m.kind = 'epoch')"
    " WHERE id = ?";

// A prepared statement, finalized on scope exit; errors throw with the database's message.
class Statement {
public:
    Statement(sqlite3* db, const std::string& sql) : m_db(db) {
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &m_stmt, nullptr) != SQLITE_OK)
            throw std::runtime_error(std::string("run history: ") + sqlite3_errmsg(db) + " in: " + sql);
    }
    ~Statement() { sqlite3_finalize(m_stmt); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    Statement& bind(int i, int64_t v) {
        sqlite3_bind_int64(m_stmt, i, v);
        return *this;
    }
    Statement& bind(int i, double v) {
        if (std::isfinite(v))
            sqlite3_bind_double(m_stmt, i, v);
        else
            sqlite3_bind_null(m_stmt, i);
        return *this;
    }
    Statement& bind(int i, const std::string& v) {
        sqlite3_bind_text(m_stmt, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    Statement& bindNull(int i) {
        sqlite3_bind_null(m_stmt, i);
        return *this;
    }
    // True while there is a row; false when done.
    bool step() {
        const int rc = sqlite3_step(m_stmt);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw std::runtime_error(std::string("run history: ") + sqlite3_errmsg(m_db));
    }
    void run() {
        step();
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }
    int64_t integer(int col) const { return sqlite3_column_int64(m_stmt, col); }
    double real(int col) const {
        return sqlite3_column_type(m_stmt, col) == SQLITE_NULL ? kNaN : sqlite3_column_double(m_stmt, col);
    }
    std::string text(int col) const {
        const auto* p = sqlite3_column_text(m_stmt, col);
        return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
    }

private:
    sqlite3* m_db;
    sqlite3_stmt* m_stmt = nullptr;
};

sqlite3* openDatabase(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
        const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
        sqlite3_close(db);
        throw std::runtime_error("cannot open run history '" + path + "': " + why);
    }
    // The GUI and a CLI run may write at once; WAL lets readers go on during a write and keeps the database
    // consistent when a writer is killed mid-transaction.
    sqlite3_busy_timeout(db, 5000);
    return db;
}

void execOn(sqlite3* db, const std::string& sql, const std::string& path) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string why = err ? err : sqlite3_errmsg(db);
        sqlite3_free(err);
        throw std::runtime_error("run history '" + path + "': " + why);
    }
}

// The workbench lists the open project's runs on every open and after every run: by project id, or by path for
// runs recorded without one.
void ensureProjectIndex(sqlite3* db, const std::string& path) {
    execOn(db,
           "CREATE INDEX IF NOT EXISTS runs_project_id ON runs(project_id);"
           "CREATE INDEX IF NOT EXISTS runs_project_path ON runs(project_path);",
           path);
}

void ensureSchemaOn(sqlite3* db, const std::string& path) {
    execOn(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", path);
    execOn(db, kCreateSql, path);
    std::set<std::string> have;
    {
        Statement q(db, "PRAGMA table_info(runs)");
        while (q.step()) have.insert(q.text(1));
    }
    for (const auto& [column, type] : kAddedRunColumns)
        if (!have.count(column)) execOn(db, std::string("ALTER TABLE runs ADD COLUMN ") + column + " " + type, path);
    have.clear();
    {
        Statement q(db, "PRAGMA table_info(metrics)");
        while (q.step()) have.insert(q.text(1));
    }
    for (const auto& [column, type] : kAddedMetricColumns)
        if (!have.count(column)) execOn(db, std::string("ALTER TABLE metrics ADD COLUMN ") + column + " " + type, path);
    ensureProjectIndex(db, path);
}

std::string nowIso() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    return buf;
}

// gethostname, reduced to the characters a file name may hold (NULL-free, no separators).
std::string hostName() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
    std::string h;
    for (const char* c = buf; *c; ++c)
        h += (std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '_') ? *c : '_';
    return h.empty() ? "localhost" : h;
}

// Seconds since the epoch of an ISO 8601 UTC time as nowIso (and Qt's ISODateWithMs) writes it; -1 when not one.
double parseIso(const std::string& text) {
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &ms) < 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

// What /proc says of process `pid`: its state letter ('Z': a zombie, dead but not yet reaped) and when it
// started, in seconds since the epoch (its start time after boot plus /proc/stat's boot time; -1 when unknown).
struct ProcessInfo {
    char state = '?';
    double started = -1;
};

ProcessInfo processInfo(int64_t pid) {
    ProcessInfo info;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return info;
    // The command name (field 2) is in parentheses and may hold spaces: fields count from its closing one.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return info;
    std::istringstream rest(line.substr(close + 1));
    std::string field;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 3) info.state = field.empty() ? '?' : field[0];
        if (i == 22) ticks = std::strtoull(field.c_str(), nullptr, 10);
    }
    std::ifstream machine("/proc/stat");
    double boot = -1;
    while (std::getline(machine, line))
        if (line.rfind("btime ", 0) == 0) boot = std::strtod(line.c_str() + 6, nullptr);
    const long hz = sysconf(_SC_CLK_TCK);
    if (boot >= 0 && ticks > 0 && hz > 0) info.started = boot + static_cast<double>(ticks) / static_cast<double>(hz);
    return info;
}

// Whether the process that began a run at `started` (ISO) still runs: its pid exists, is not a zombie (an MPI
// rank its launcher has ended but not yet reaped) and did not start after the run (a pid reused by a later
// process, common in containers, is not the run's).
bool runProcessAlive(int64_t pid, const std::string& started) {
    if (pid <= 0 || pid > INT_MAX) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
    const ProcessInfo process = processInfo(pid);
    if (process.state == 'Z' || process.state == 'X') return false;
    const double run = parseIso(started);
    constexpr double kClockSlack = 2.0;  // boot time in whole seconds, start in clock ticks
    return !(process.started > 0 && run > 0 && process.started > run + kClockSlack);
}

double number(const Json& j) { return j.is_number() ? j.get<double>() : kNaN; }

// An epoch's task metrics as stored (the val_metrics column, a pending file's epoch line): [[name, value], ...]
// in the engine's order, a value that is not finite as null.
Json valMetricsJson(const std::vector<NamedMetric>& metrics) {
    Json a = Json::array();
    for (const NamedMetric& m : metrics)
        a.push_back(Json::array({m.name, std::isfinite(m.value) ? Json(m.value) : Json(nullptr)}));
    return a;
}

std::vector<NamedMetric> valMetricsOf(const Json& a) {
    std::vector<NamedMetric> out;
    if (!a.is_array()) return out;
    for (const Json& m : a)
        if (m.is_array() && m.size() == 2 && m[0].is_string()) out.push_back({m[0].get<std::string>(), number(m[1])});
    return out;
}

// The column's text back; a value that does not parse (a database edited by hand) gives no metrics.
std::vector<NamedMetric> valMetricsOfText(const std::string& text) {
    if (text.empty()) return {};
    return valMetricsOf(Json::parse(text, nullptr, false));
}

Json pendingLine(int64_t run, const PendingWrite& w) {
    Json j;
    j["run"] = run;
    switch (w.kind) {
        case PendingWrite::Kind::Steps: {
            j["kind"] = "steps";
            Json rows = Json::array();
            for (const StepEvent& s : w.steps)
                rows.push_back(Json::array(
                    {s.step, s.epoch, s.loss, s.accuracy, s.learningRate, s.samplesPerSecond, s.elapsedSeconds}));
            j["rows"] = std::move(rows);
            break;
        }
        case PendingWrite::Kind::Epoch: {
            const EpochEvent& e = w.epoch;
            j["kind"] = "epoch";
            j["epoch"] = e.epoch;
            j["train_loss"] = e.trainLoss;
            j["train_acc"] = e.trainAccuracy;
            j["has_validation"] = e.hasValidation;
            j["val_loss"] = e.valLoss;
            j["val_acc"] = e.valAccuracy;
            j["seconds"] = e.seconds;
            j["samples_per_s"] = e.samplesPerSecond;
            if (!e.valMetrics.empty()) j["val_metrics"] = valMetricsJson(e.valMetrics);
            break;
        }
        case PendingWrite::Kind::Finish: {
            const FinishedEvent& f = w.finished;
            j["kind"] = "finish";
            j["status"] = w.status;
            j["message"] = w.message;
            j["epochs"] = f.epochsCompleted;
            j["best_epoch"] = f.bestEpoch;
            j["best_val_loss"] = f.bestValLoss;
            j["best_val_acc"] = f.bestValAccuracy;
            j["seconds"] = f.seconds;
            break;
        }
    }
    return j;
}

PendingWrite pendingWriteOf(const Json& j) {
    PendingWrite w;
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "steps") {
        w.kind = PendingWrite::Kind::Steps;
        for (const Json& r : j.at("rows")) {
            if (!r.is_array() || r.size() != 7) throw std::runtime_error("a step row is not 7 values");
            StepEvent s;
            s.step = r[0].get<int64_t>();
            s.epoch = r[1].get<int>();
            s.loss = number(r[2]);
            s.accuracy = number(r[3]);
            s.learningRate = number(r[4]);
            s.samplesPerSecond = number(r[5]);
            s.elapsedSeconds = number(r[6]);
            w.steps.push_back(s);
        }
    } else if (kind == "epoch") {
        w.kind = PendingWrite::Kind::Epoch;
        EpochEvent& e = w.epoch;
        e.epoch = j.at("epoch").get<int>();
        e.trainLoss = number(j.at("train_loss"));
        e.trainAccuracy = number(j.at("train_acc"));
        e.hasValidation = j.at("has_validation").get<bool>();
        e.valLoss = number(j.at("val_loss"));
        e.valAccuracy = number(j.at("val_acc"));
        e.seconds = number(j.at("seconds"));
        e.samplesPerSecond = number(j.at("samples_per_s"));
        if (j.contains("val_metrics")) e.valMetrics = valMetricsOf(j.at("val_metrics"));
    } else if (kind == "finish") {
        w.kind = PendingWrite::Kind::Finish;
        w.status = j.at("status").get<std::string>();
        w.message = j.at("message").get<std::string>();
        FinishedEvent& f = w.finished;
        f.epochsCompleted = j.at("epochs").get<int>();
        f.bestEpoch = j.at("best_epoch").get<int>();
        f.bestValLoss = number(j.at("best_val_loss"));
        f.bestValAccuracy = number(j.at("best_val_acc"));
        f.seconds = number(j.at("seconds"));
    } else {
        throw std::runtime_error("unknown kind '" + kind.substr(0, 20) + "'");
    }
    return w;
}

RunRecord readRun(const Statement& q) {
    RunRecord r;
    r.id = q.integer(0);
    r.started = q.text(1);
    r.projectName = q.text(2);
    r.projectPath = q.text(3);
    r.device = q.text(4);
    r.source = q.text(5);
    r.status = q.text(6);
    r.message = q.text(7);
    r.name = q.text(8);
    r.notes = q.text(9);
    r.epochsCompleted = static_cast<int>(q.integer(10));
    r.bestEpoch = static_cast<int>(q.integer(11));
    r.bestValLoss = q.real(12);
    r.bestValAccuracy = q.real(13);
    r.finalTrainLoss = q.real(14);
    r.finalTrainAccuracy = q.real(15);
    r.finalValLoss = q.real(16);
    r.finalValAccuracy = q.real(17);
    r.samplesPerSecond = q.real(18);
    r.seconds = q.real(19);
    r.projectId = q.text(20);
    r.runFolder = q.text(21);
    r.host = q.text(22);
    r.lastStep = q.integer(23);
    r.finalValMetrics = valMetricsOfText(q.text(24));
    return r;
}

}  // namespace

RunStore::RunStore(const std::string& path) : m_path(path), m_db(openDatabase(path)) {
    try {
        ensureSchemaOn(m_db, m_path);
    } catch (...) {
        sqlite3_close(m_db);
        throw;
    }
}

RunStore::~RunStore() { sqlite3_close(m_db); }

// The per-user data folder is RunFolder's, where runs of read-only projects go: one folder for all of a user's runs.
std::string RunStore::defaultPath() { return defaultUserDataDir() + "/runs.sqlite"; }

std::string RunStore::ensureSchema(const std::string& path) {
    try {
        RunStore store(path);
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

void RunStore::exec(const std::string& sql) { execOn(m_db, sql, m_path); }

int64_t RunStore::beginRun(const Project& project, const std::string& projectPath, const std::string& device,
                           const std::string& source, const std::string& runFolder, const std::string& started) {
    Statement q(m_db,
                "INSERT INTO runs (started, project_name, project_path, device, project_json, status, source,"
                " run_folder, pid, host, project_id) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)");
    q.bind(1, started.empty() ? nowIso() : started).bind(2, project.name).bind(3, projectPath).bind(4, device);
    q.bind(5, projectToJson(project).dump()).bind(6, source).bind(7, runFolder);
    q.bind(8, static_cast<int64_t>(::getpid())).bind(9, hostName()).bind(10, project.id);
    q.run();
    return sqlite3_last_insert_rowid(m_db);
}

// The writes themselves, inside the caller's transaction (or statement).
namespace {

void insertSteps(sqlite3* db, int64_t run, const std::vector<StepEvent>& steps) {
    Statement q(db,
                "INSERT INTO metrics (run_id, kind, step, epoch, loss, accuracy, learning_rate,"
                " samples_per_second, elapsed_seconds) VALUES (?, 'step', ?, ?, ?, ?, ?, ?, ?)");
    for (const StepEvent& s : steps) {
        q.bind(1, run).bind(2, s.step).bind(3, int64_t{s.epoch}).bind(4, s.loss).bind(5, s.accuracy);
        q.bind(6, s.learningRate).bind(7, s.samplesPerSecond).bind(8, s.elapsedSeconds);
        q.run();
    }
}

void insertEpoch(sqlite3* db, int64_t run, const EpochEvent& e) {
    Statement q(db,
                "INSERT INTO metrics (run_id, kind, epoch, loss, accuracy, samples_per_second, val_loss,"
                " val_accuracy, elapsed_seconds, val_metrics) VALUES (?, 'epoch', ?, ?, ?, ?, ?, ?, ?, ?)");
    q.bind(1, run).bind(2, int64_t{e.epoch}).bind(3, e.trainLoss).bind(4, e.trainAccuracy);
    q.bind(5, e.samplesPerSecond).bind(6, e.hasValidation ? e.valLoss : kNaN);
    q.bind(7, e.hasValidation ? e.valAccuracy : kNaN).bind(8, e.seconds);
    if (e.hasValidation && !e.valMetrics.empty())
        q.bind(9, valMetricsJson(e.valMetrics).dump());
    else
        q.bindNull(9);
    q.run();
}

void updateFinished(sqlite3* db, int64_t run, const std::string& status, const std::string& message,
                    const FinishedEvent& f) {
    Statement q(db,
                "UPDATE runs SET status = ?, message = ?, epochs_completed = ?, best_epoch = ?, best_val_loss = ?,"
                " best_val_acc = ?, seconds = ? WHERE id = ?");
    q.bind(1, status).bind(2, message).bind(3, int64_t{f.epochsCompleted}).bind(4, int64_t{f.bestEpoch});
    q.bind(5, f.bestEpoch > 0 ? f.bestValLoss : kNaN).bind(6, f.bestEpoch > 0 ? f.bestValAccuracy : kNaN);
    q.bind(7, f.seconds).bind(8, run);
    q.run();
    Statement s(db, kSummarizeSql);
    s.bind(1, run);
    s.run();
}

}  // namespace

void RunStore::addSteps(int64_t run, const std::vector<StepEvent>& steps) {
    if (steps.empty()) return;
    exec("BEGIN IMMEDIATE");
    try {
        insertSteps(m_db, run, steps);
        exec("COMMIT");
    } catch (...) {
        sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

void RunStore::addEpoch(int64_t run, const EpochEvent& e) { insertEpoch(m_db, run, e); }

void RunStore::finishRun(int64_t run, const std::string& status, const std::string& message, const FinishedEvent& f) {
    updateFinished(m_db, run, status, message, f);
}

void RunStore::applyPending(int64_t run, const std::vector<PendingWrite>& writes, bool replace) {
    if (writes.empty()) return;
    int64_t firstStep = std::numeric_limits<int64_t>::max();
    int firstEpoch = std::numeric_limits<int>::max();
    for (const PendingWrite& w : writes) {
        for (const StepEvent& s : w.steps) firstStep = std::min(firstStep, s.step);
        if (w.kind == PendingWrite::Kind::Epoch) firstEpoch = std::min(firstEpoch, w.epoch.epoch);
    }
    exec("BEGIN IMMEDIATE");
    try {
        // Rows a previous application of these writes left (a replay after a crash between the commit and the
        // pending file's removal) are replaced.
        if (replace && firstStep != std::numeric_limits<int64_t>::max()) {
            Statement d(m_db, "DELETE FROM metrics WHERE run_id = ? AND kind = 'step' AND step >= ?");
            d.bind(1, run).bind(2, firstStep);
            d.run();
        }
        if (replace && firstEpoch != std::numeric_limits<int>::max()) {
            Statement d(m_db, "DELETE FROM metrics WHERE run_id = ? AND kind = 'epoch' AND epoch >= ?");
            d.bind(1, run).bind(2, int64_t{firstEpoch});
            d.run();
        }
        for (const PendingWrite& w : writes) {
            switch (w.kind) {
                case PendingWrite::Kind::Steps: insertSteps(m_db, run, w.steps); break;
                case PendingWrite::Kind::Epoch: insertEpoch(m_db, run, w.epoch); break;
                case PendingWrite::Kind::Finish: updateFinished(m_db, run, w.status, w.message, w.finished); break;
            }
        }
        exec("COMMIT");
    } catch (...) {
        sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

void RunStore::setBusyTimeout(int milliseconds) { sqlite3_busy_timeout(m_db, milliseconds); }

std::string RunStore::pendingFilePath(const std::string& dbPath, int64_t run) {
    return dbPath + ".pending-" + hostName() + "-" + std::to_string(::getpid()) + "-" + std::to_string(run) + ".jsonl";
}

void RunStore::appendPendingFile(const std::string& file, int64_t run, const std::vector<PendingWrite>& writes) {
    std::string text;
    for (const PendingWrite& w : writes) text += pendingLine(run, w).dump() + "\n";
    std::FILE* f = std::fopen(file.c_str(), "ab");
    if (!f) throw std::runtime_error("cannot write '" + file + "': " + std::strerror(errno));
    const bool written =
        std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
    const int err = errno;
    std::fclose(f);
    if (!written) throw std::runtime_error("cannot write '" + file + "': " + std::strerror(err));
}

std::vector<PendingWrite> RunStore::readPendingFile(const std::string& file, int64_t& run) {
    // Our own files, but read as any input: a regular file of bounded size, lines of bounded length.
    constexpr uintmax_t kMaxBytes = uintmax_t(4) << 30;
    constexpr size_t kMaxLine = size_t(64) << 20;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec))
        throw std::runtime_error("pending writes '" + file + "': not a regular file");
    if (std::filesystem::file_size(file, ec) > kMaxBytes)
        throw std::runtime_error("pending writes '" + file + "': larger than 4 GiB");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read pending writes '" + file + "'");
    std::vector<PendingWrite> out;
    run = 0;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        if (line.size() > kMaxLine)
            throw std::runtime_error("pending writes '" + file + "', line " + std::to_string(n) + ": too long");
        try {
            const Json j = parseJson<Json>(line, file);
            const int64_t r = j.at("run").get<int64_t>();
            if (run != 0 && r != run) throw std::runtime_error("another run's write (" + std::to_string(r) + ")");
            run = r;
            out.push_back(pendingWriteOf(j));
        } catch (const std::exception& e) {
            // A line cut by a crash while it was appended is the last one: what came before is kept.
            if (in.peek() == std::char_traits<char>::eof() && line.back() != '}') break;
            throw std::runtime_error("pending writes '" + file + "', line " + std::to_string(n) + ": " + e.what());
        }
    }
    if (run == 0 && !out.empty()) throw std::runtime_error("pending writes '" + file + "': no run id");
    return out;
}

std::vector<std::string> RunStore::recover() {
    std::vector<std::string> said;
    const std::string host = hostName();
    std::set<int64_t> stillPending;  // runs whose pending file could not be replayed: not judged below
    // 1. Pending files of processes that are gone: "<db name>.pending-<host>-<pid>-<run>.jsonl".
    const std::filesystem::path db(m_path);
    const std::string prefix = db.filename().string() + ".pending-";
    std::error_code ec;
    const std::filesystem::path folder = db.parent_path().empty() ? std::filesystem::path(".") : db.parent_path();
    std::vector<std::filesystem::path> files;
    for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 6 &&
            name.compare(name.size() - 6, 6, ".jsonl") == 0)
            files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) {
        const std::string name = file.filename().string();
        const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - 6);  // host-pid-run
        const size_t b = middle.rfind('-');
        const size_t a = b == std::string::npos || b == 0 ? std::string::npos : middle.rfind('-', b - 1);
        if (a == std::string::npos) continue;
        const std::string fileHost = middle.substr(0, a);
        const int64_t pid = std::strtoll(middle.c_str() + a + 1, nullptr, 10);
        const int64_t run = std::strtoll(middle.c_str() + b + 1, nullptr, 10);
        if (fileHost != host) continue;  // only its own host can tell whether the process is gone
        const std::optional<RunRecord> record = this->run(run);
        if (!record) {
            said.push_back("run history: removed " + file.string() + " (its run " + std::to_string(run) +
                           " was deleted)");
            std::filesystem::remove(file, ec);
            continue;
        }
        if (runProcessAlive(pid, record->started)) continue;  // its recorder may still write it
        try {
            int64_t fileRun = 0;
            const std::vector<PendingWrite> writes = readPendingFile(file.string(), fileRun);
            if (fileRun != 0 && fileRun != run)
                throw std::runtime_error("it holds writes of run " + std::to_string(fileRun));
            applyPending(run, writes, /*replace=*/true);
            std::filesystem::remove(file, ec);
            said.push_back("run history: run " + std::to_string(run) + ": " + std::to_string(writes.size()) +
                           " write(s) left pending by process " + std::to_string(pid) + " replayed");
        } catch (const std::exception& e) {
            stillPending.insert(run);
            said.push_back("run history: run " + std::to_string(run) + ": pending writes not replayed yet (" +
                           e.what() + "); the next start tries again");
        }
    }

    // 2. Runs still 'running' whose process is gone.
    struct Open {
        int64_t id, pid;
        std::string started;
    };
    std::vector<Open> gone;
    try {
        Statement q(m_db, "SELECT id, pid, host, started FROM runs WHERE status = 'running'");
        while (q.step()) {
            const std::string runHost = q.text(2);
            if (!runHost.empty() && runHost != host) continue;
            Open o{q.integer(0), q.integer(1), q.text(3)};
            if (!stillPending.count(o.id) && !runProcessAlive(o.pid, o.started)) gone.push_back(o);
        }
        for (const Open& o : gone) {
            exec("BEGIN IMMEDIATE");
            try {
                Statement u(m_db,
                            "UPDATE runs SET status = 'interrupted',"
                            " epochs_completed = COALESCE((SELECT MAX(epoch) FROM metrics m WHERE m.run_id = runs.id"
                            "  AND m.kind = 'epoch'), 0),"
                            " best_epoch = (SELECT epoch FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'epoch'"
                            "  AND m.val_loss IS NOT NULL ORDER BY m.val_loss, m.epoch LIMIT 1),"
                            " best_val_loss = (SELECT MIN(val_loss) FROM metrics m WHERE m.run_id = runs.id"
                            "  AND m.kind = 'epoch'),"
                            " best_val_acc = (SELECT val_accuracy FROM metrics m WHERE m.run_id = runs.id"
                            "  AND m.kind = 'epoch' AND m.val_loss IS NOT NULL ORDER BY m.val_loss, m.epoch LIMIT 1),"
                            " seconds = (SELECT MAX(elapsed_seconds) FROM metrics m WHERE m.run_id = runs.id"
                            "  AND m.kind = 'step')"
                            " WHERE id = ? AND status = 'running'");
                u.bind(1, o.id);
                u.run();
                Statement s(m_db, kSummarizeSql);
                s.bind(1, o.id);
                s.run();
                Statement e(m_db, "SELECT epochs_completed FROM runs WHERE id = ?");
                e.bind(1, o.id);
                const int64_t epochs = e.step() ? e.integer(0) : 0;
                const std::string message = "the process (pid " + std::to_string(o.pid) +
                                            ") ended before the run did (killed or crashed); " +
                                            (epochs > 0 ? "the last epoch it finished is " + std::to_string(epochs)
                                                        : std::string("it finished no epoch"));
                Statement m(m_db, "UPDATE runs SET message = ? WHERE id = ?");
                m.bind(1, message).bind(2, o.id);
                m.run();
                exec("COMMIT");
                said.push_back("run history: run " + std::to_string(o.id) + " marked interrupted: " + message);
            } catch (...) {
                sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
                throw;
            }
        }
    } catch (const std::exception& e) {
        said.push_back(std::string("run history: runs of ended processes not marked yet (") + e.what() +
                       "); the next start tries again");
    }
    return said;
}

std::vector<RunRecord> RunStore::runs() const {
    std::vector<RunRecord> out;
    Statement q(m_db, std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id DESC");
    while (q.step()) out.push_back(readRun(q));
    return out;
}

std::optional<RunRecord> RunStore::run(int64_t id) const {
    Statement q(m_db, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
    q.bind(1, id);
    if (!q.step()) return std::nullopt;
    return readRun(q);
}

std::vector<MetricRow> RunStore::metrics(int64_t run, const std::string& kind) const {
    std::vector<MetricRow> out;
    Statement q(m_db,
                "SELECT kind, step, epoch, loss, accuracy, learning_rate, samples_per_second, val_loss,"
                " val_accuracy, elapsed_seconds, val_metrics FROM metrics WHERE run_id = ? AND kind = ?"
                " ORDER BY COALESCE(step, 0), epoch, rowid");
    q.bind(1, run).bind(2, kind);
    while (q.step()) {
        MetricRow m;
        m.kind = q.text(0);
        m.step = q.integer(1);
        m.epoch = static_cast<int>(q.integer(2));
        m.loss = q.real(3);
        m.accuracy = q.real(4);
        m.learningRate = q.real(5);
        m.samplesPerSecond = q.real(6);
        m.valLoss = q.real(7);
        m.valAccuracy = q.real(8);
        m.elapsedSeconds = q.real(9);
        m.valMetrics = valMetricsOfText(q.text(10));
        out.push_back(m);
    }
    return out;
}

int64_t RunStore::metricCount(int64_t run, const std::string& kind) const {
    Statement q(m_db, "SELECT COUNT(*) FROM metrics WHERE run_id = ? AND kind = ?");
    q.bind(1, run).bind(2, kind);
    return q.step() ? q.integer(0) : 0;
}

std::vector<StepEvent> RunStore::stepEvents(int64_t run) const {
    std::vector<StepEvent> out;
    for (const MetricRow& m : metrics(run, "step")) {
        StepEvent s;
        s.step = m.step;
        s.epoch = m.epoch;
        s.loss = m.loss;
        s.accuracy = m.accuracy;
        s.learningRate = m.learningRate;
        s.samplesPerSecond = m.samplesPerSecond;
        s.elapsedSeconds = m.elapsedSeconds;
        out.push_back(s);
    }
    return out;
}

std::vector<std::pair<EpochEvent, int64_t>> RunStore::epochEvents(int64_t run) const {
    std::vector<std::pair<EpochEvent, int64_t>> out;
    Statement q(m_db,
                "SELECT e.epoch, e.loss, e.accuracy, e.samples_per_second, e.val_loss, e.val_accuracy,"
                " e.elapsed_seconds, (SELECT MAX(s.step) FROM metrics s WHERE s.run_id = e.run_id AND s.kind = 'step'"
                " AND s.epoch <= e.epoch), (SELECT best_epoch FROM runs WHERE id = e.run_id), e.val_metrics"
                " FROM metrics e WHERE e.run_id = ? AND e.kind = 'epoch' ORDER BY e.epoch");
    q.bind(1, run);
    while (q.step()) {
        EpochEvent e;
        e.epoch = static_cast<int>(q.integer(0));
        e.trainLoss = q.real(1);
        e.trainAccuracy = q.real(2);
        e.samplesPerSecond = q.real(3);
        e.hasValidation = !std::isnan(q.real(4));
        e.valLoss = q.real(4);
        e.valAccuracy = q.real(5);
        e.seconds = q.real(6);
        e.best = e.epoch == q.integer(8);
        e.valMetrics = valMetricsOfText(q.text(9));
        out.emplace_back(e, q.integer(7));
    }
    return out;
}

std::string RunStore::projectJson(int64_t run) const {
    Statement q(m_db, "SELECT project_json FROM runs WHERE id = ?");
    q.bind(1, run);
    return q.step() ? q.text(0) : std::string();
}

bool RunStore::deleteRun(int64_t run) {
    exec("BEGIN IMMEDIATE");
    try {
        Statement m(m_db, "DELETE FROM metrics WHERE run_id = ?");
        m.bind(1, run);
        m.run();
        Statement r(m_db, "DELETE FROM runs WHERE id = ?");
        r.bind(1, run);
        r.run();
        const bool found = sqlite3_changes(m_db) > 0;
        exec("COMMIT");
        return found;
    } catch (...) {
        sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

bool RunStore::renameRun(int64_t run, const std::string& name) {
    Statement q(m_db, "UPDATE runs SET name = ? WHERE id = ?");
    q.bind(1, name).bind(2, run);
    q.run();
    return sqlite3_changes(m_db) > 0;
}

bool RunStore::setNotes(int64_t run, const std::string& notes) {
    Statement q(m_db, "UPDATE runs SET notes = ? WHERE id = ?");
    q.bind(1, notes).bind(2, run);
    q.run();
    return sqlite3_changes(m_db) > 0;
}

std::vector<int64_t> RunStore::runIdsOfProject(const std::string& projectId, const std::string& projectPath) const {
    std::vector<int64_t> out;
    Statement q(m_db, std::string("SELECT id FROM runs WHERE ") + kProjectRunsWhere + " ORDER BY id DESC");
    q.bind(1, projectId).bind(2, projectId).bind(3, projectPath).bind(4, projectPath);
    while (q.step()) out.push_back(q.integer(0));
    return out;
}

std::vector<RunRecord> RunStore::runsOfProject(const std::string& projectId, const std::string& projectPath) const {
    std::vector<RunRecord> out;
    Statement q(m_db,
                std::string("SELECT ") + kRunColumns + " FROM runs WHERE " + kProjectRunsWhere + " ORDER BY id DESC");
    q.bind(1, projectId).bind(2, projectId).bind(3, projectPath).bind(4, projectPath);
    while (q.step()) out.push_back(readRun(q));
    return out;
}

int64_t RunStore::lastRunOf(const std::string& projectId, const std::string& projectPath) const {
    Statement q(m_db, std::string("SELECT id FROM runs WHERE ") + kProjectRunsWhere +
                          " AND EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = runs.id AND m.kind = 'step')"
                          " ORDER BY id DESC LIMIT 1");
    q.bind(1, projectId).bind(2, projectId).bind(3, projectPath).bind(4, projectPath);
    return q.step() ? q.integer(0) : 0;
}

int64_t RunStore::adoptUnsavedRuns(const std::string& projectId, const std::string& projectPath) {
    if (projectId.empty() || projectPath.empty()) return 0;
    Statement q(m_db, "UPDATE runs SET project_path = ? WHERE project_id = ? AND COALESCE(project_path, '') = ''");
    q.bind(1, projectPath).bind(2, projectId);
    q.run();
    return sqlite3_changes(m_db);
}

int64_t RunStore::adoptRunsOfFile(const std::string& projectPath, const std::string& projectId) {
    if (projectId.empty() || projectPath.empty()) return 0;
    Statement q(m_db, "UPDATE runs SET project_id = ? WHERE project_path = ? AND COALESCE(project_id, '') = ''");
    q.bind(1, projectId).bind(2, projectPath);
    q.run();
    return sqlite3_changes(m_db);
}

std::string RunStore::integrityCheck() const {
    Statement q(m_db, "PRAGMA integrity_check");
    std::string out;
    while (q.step()) out += (out.empty() ? "" : "; ") + q.text(0);
    return out;
}

namespace {

void diffInto(const Json* a, const Json* b, const std::string& path,
              std::vector<std::pair<std::string, std::pair<std::string, std::string>>>& out) {
    auto text = [](const Json* j) { return j ? j->dump() : std::string("(absent)"); };
    if (a && b && a->is_object() && b->is_object()) {
        std::vector<std::string> keys;
        for (auto it = a->begin(); it != a->end(); ++it) keys.push_back(it.key());
        for (auto it = b->begin(); it != b->end(); ++it)
            if (!a->contains(it.key())) keys.push_back(it.key());
        for (const std::string& k : keys) {
            if (k == "position") continue;            // where a node sits on the canvas is not a setting
            if (path.empty() && k == "id") continue;  // the project's id says which project, not how it trained
            const Json* ca = a->contains(k) ? &(*a)[k] : nullptr;
            const Json* cb = b->contains(k) ? &(*b)[k] : nullptr;
            diffInto(ca, cb, path.empty() ? k : path + "." + k, out);
        }
        return;
    }
    if (a && b && a->is_array() && b->is_array()) {
        // Arrays of named objects (graph nodes) are matched by name, so inserting a layer names that layer,
        // not every layer after it.
        auto named = [](const Json& arr) {
            for (const Json& e : arr)
                if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) return false;
            return !arr.empty();
        };
        if (named(*a) && named(*b)) {
            std::map<std::string, const Json*> ia, ib;
            std::vector<std::string> order;
            for (const Json& e : *a) {
                ia[e["name"].get<std::string>()] = &e;
                order.push_back(e["name"].get<std::string>());
            }
            for (const Json& e : *b) {
                const std::string n = e["name"].get<std::string>();
                if (!ia.count(n)) order.push_back(n);
                ib[n] = &e;
            }
            for (const std::string& n : order) {
                const auto fa = ia.find(n);
                const auto fb = ib.find(n);
                diffInto(fa == ia.end() ? nullptr : fa->second, fb == ib.end() ? nullptr : fb->second,
                         path + "[" + n + "]", out);
            }
            return;
        }
        if (a->size() == b->size()) {
            for (size_t i = 0; i < a->size(); ++i)
                diffInto(&(*a)[i], &(*b)[i], path + "[" + std::to_string(i) + "]", out);
            return;
        }
    }
    if (!a || !b || *a != *b) out.push_back({path, {text(a), text(b)}});
}

std::string cell(double v) {
    if (!std::isfinite(v)) return {};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

}  // namespace

std::vector<std::pair<std::string, std::pair<std::string, std::string>>> settingsDiff(const Json& a, const Json& b) {
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> out;
    diffInto(&a, &b, "", out);
    return out;
}

std::string metricsCsv(const std::vector<MetricRow>& rows) {
    // The task metrics' columns follow the fixed ones, in the order the rows first name them.
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (const MetricRow& m : rows)
        for (const NamedMetric& v : m.valMetrics)
            if (seen.insert(v.name).second) names.push_back(v.name);
    // A label's name may hold a comma or a quote (RFC 4180 quoting).
    auto quoted = [](const std::string& text) {
        if (text.find_first_of(",\"\n") == std::string::npos) return text;
        std::string q = "\"";
        for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    };
    std::ostringstream s;
    s << "kind,step,epoch,loss,accuracy,learning_rate,samples_per_second,val_loss,val_accuracy,elapsed_seconds";
    for (const std::string& n : names) s << ',' << quoted("val_" + n);
    s << '\n';
    for (const MetricRow& m : rows) {
        s << m.kind << ',' << (m.kind == "step" ? std::to_string(m.step) : std::string()) << ',' << m.epoch << ','
          << cell(m.loss) << ',' << cell(m.accuracy) << ',' << cell(m.learningRate) << ',' << cell(m.samplesPerSecond)
          << ',' << cell(m.valLoss) << ',' << cell(m.valAccuracy) << ',' << cell(m.elapsedSeconds);
        for (const std::string& n : names) s << ',' << cell(metricValue(m.valMetrics, n));
        s << '\n';
    }
    return s.str();
}

}  // namespace strata::history
