// RunHistory: see RunHistory.h.
#include "ui/base/RunHistory.h"

#include <QDir>
#include <QStandardPaths>
#include <cmath>
#include <exception>

#include "core/history/RunRecorder.h"
#include "core/history/RunStore.h"

namespace strata::ui {

namespace {

// The recorders' messages (the history is behind, caught up, where the writes went): the workbench has no
// place for them in view, so they go where strata-train's would, to stderr.
class StderrLog : public TrainingObserver {
public:
    void onLog(const std::string& message) override { qWarning("strata: %s", message.c_str()); }
};

QString text(const std::string& s) { return QString::fromStdString(s); }
double orZero(double v) { return std::isfinite(v) ? v : 0.0; }

RunHistory::RunSummary summaryOf(const history::RunRecord& r) {
    RunHistory::RunSummary s;
    s.id = r.id;
    s.started = QDateTime::fromString(text(r.started), Qt::ISODateWithMs);
    s.projectName = text(r.projectName);
    s.projectPath = text(r.projectPath);
    s.projectId = text(r.projectId);
    s.device = text(r.device);
    s.name = text(r.name);
    s.status = text(r.status);
    s.runFolder = text(r.runFolder);
    s.message = text(r.message);
    s.epochsCompleted = r.epochsCompleted;
    s.bestEpoch = r.bestEpoch;
    s.steps = r.lastStep;
    s.bestValLoss = orZero(r.bestValLoss);
    s.bestValAccuracy = orZero(r.bestValAccuracy);
    s.seconds = orZero(r.seconds);
    return s;
}

QVector<RunHistory::RunSummary> summariesOf(const std::vector<history::RunRecord>& records) {
    QVector<RunHistory::RunSummary> out;
    out.reserve(qsizetype(records.size()));
    for (const history::RunRecord& r : records) out.append(summaryOf(r));
    return out;
}

}  // namespace

QString RunHistory::defaultDataDir() {
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty()) dir = QDir::homePath() + "/.strata";
    return dir;
}

QString RunHistory::defaultPath() { return defaultDataDir() + "/runs.sqlite"; }

RunHistory::RunHistory(const QString& path)
    : m_path(path.isEmpty() ? defaultPath() : path), m_log(std::make_unique<StderrLog>()) {
    try {
        m_store = std::make_unique<history::RunStore>(m_path.toStdString());
    } catch (const std::exception& e) {
        m_error = QString::fromStdString(e.what());
    }
}

RunHistory::~RunHistory() {
    for (auto& [run, recorder] : m_recorders) {
        try {
            recorder->leaveRunning();
        } catch (const std::exception& e) {
            qWarning("strata: run history: run %lld: %s", static_cast<long long>(run), e.what());
        }
    }
    m_recorders.clear();  // before the store they write to
}

template <typename T, typename F>
T RunHistory::attempt(T fallback, F&& f) const {
    if (!m_store) return fallback;
    try {
        return f(*m_store);
    } catch (const std::exception& e) {
        m_error = QString::fromStdString(e.what());
        return fallback;
    }
}

QStringList RunHistory::recover() {
    return attempt(QStringList(), [](history::RunStore& store) {
        QStringList said;
        for (const std::string& line : store.recover()) said << text(line);
        return said;
    });
}

history::RunRecorder* RunHistory::recorder(qint64 run) {
    const auto it = m_recorders.find(run);
    if (it != m_recorders.end()) return it->second.get();
    if (run > 0) m_error = QStringLiteral("run %1 is not being recorded here").arg(run);
    return nullptr;
}

qint64 RunHistory::beginRun(const Project& project, const QString& projectPath, const QString& device,
                            const QString& runFolder, const QDateTime& started) {
    const std::string when = started.isValid() ? started.toUTC().toString(Qt::ISODateWithMs).toStdString() : "";
    return attempt(qint64(0), [&](history::RunStore& store) {
        auto recorder =
            std::make_unique<history::RunRecorder>(store, m_log.get(), project, projectPath.toStdString(),
                                                   device.toStdString(), "gui", runFolder.toStdString(), when);
        const qint64 run = recorder->runId();
        m_recorders[run] = std::move(recorder);
        return run;
    });
}

void RunHistory::addSteps(qint64 run, const QVector<StepEvent>& steps) {
    if (history::RunRecorder* r = recorder(run); r && !steps.isEmpty())
        r->addSteps(std::vector<StepEvent>(steps.begin(), steps.end()));
}

void RunHistory::addEpoch(qint64 run, const EpochEvent& epoch) {
    if (history::RunRecorder* r = recorder(run)) r->onEpoch(epoch);
}

void RunHistory::finishRun(qint64 run, const QString& status, const QString& message, const FinishedEvent& f) {
    if (history::RunRecorder* r = recorder(run)) {
        r->finishRun(status.toStdString(), message.toStdString(), f);
        m_recorders.erase(run);
    }
}

QVector<RunHistory::RunSummary> RunHistory::runs() const {
    return attempt(QVector<RunSummary>(), [](history::RunStore& s) { return summariesOf(s.runs()); });
}

QVector<RunHistory::RunSummary> RunHistory::runsOfProject(const QString& projectId, const QString& projectPath) const {
    return attempt(QVector<RunSummary>(), [&](history::RunStore& s) {
        return summariesOf(s.runsOfProject(projectId.toStdString(), projectPath.toStdString()));
    });
}

int RunHistory::adoptUnsavedRuns(const QString& projectId, const QString& projectPath) {
    return attempt(0, [&](history::RunStore& s) {
        return int(s.adoptUnsavedRuns(projectId.toStdString(), projectPath.toStdString()));
    });
}

int RunHistory::adoptRunsOfFile(const QString& projectPath, const QString& projectId) {
    return attempt(0, [&](history::RunStore& s) {
        return int(s.adoptRunsOfFile(projectPath.toStdString(), projectId.toStdString()));
    });
}

int RunHistory::metricCount(qint64 run, const QString& kind) const {
    return attempt(-1, [&](history::RunStore& s) { return int(s.metricCount(run, kind.toStdString())); });
}

QString RunHistory::projectJson(qint64 run) const {
    return attempt(QString(), [&](history::RunStore& s) { return text(s.projectJson(run)); });
}

qint64 RunHistory::lastRunOf(const QString& projectId, const QString& projectPath) const {
    return attempt(qint64(0), [&](history::RunStore& s) {
        return qint64(s.lastRunOf(projectId.toStdString(), projectPath.toStdString()));
    });
}

QVector<StepEvent> RunHistory::stepsOf(qint64 run) const {
    return attempt(QVector<StepEvent>(), [&](history::RunStore& s) {
        const std::vector<StepEvent> steps = s.stepEvents(run);
        return QVector<StepEvent>(steps.begin(), steps.end());
    });
}

QVector<QPair<EpochEvent, qint64>> RunHistory::epochsOf(qint64 run) const {
    return attempt(QVector<QPair<EpochEvent, qint64>>(), [&](history::RunStore& s) {
        QVector<QPair<EpochEvent, qint64>> out;
        for (const auto& [event, x] : s.epochEvents(run)) out.append({event, qint64(x)});
        return out;
    });
}

}  // namespace strata::ui
