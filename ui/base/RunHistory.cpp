// RunHistory: see RunHistory.h.
#include "ui/base/RunHistory.h"

#include <QAtomicInteger>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QVariant>
#include <cmath>

#include "core/history/RunStore.h"

namespace strata::ui {

namespace {

QVariant real(double v) { return std::isfinite(v) ? QVariant(v) : QVariant(); }

}  // namespace

QString RunHistory::defaultDataDir() {
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty()) dir = QDir::homePath() + "/.strata";
    return dir;
}

QString RunHistory::defaultPath() { return defaultDataDir() + "/runs.sqlite"; }

RunHistory::RunHistory(const QString& path) : m_path(path.isEmpty() ? defaultPath() : path) {
    static QAtomicInteger<int> counter;
    m_connection = QStringLiteral("strata-run-history-%1").arg(counter.fetchAndAddRelaxed(1));
    QDir().mkpath(QFileInfo(m_path).absolutePath());
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), m_connection);
    db.setDatabaseName(m_path);
    if (!db.open()) {
        m_error = db.lastError().text();
        return;
    }
    // The schema (tables, and the columns newer versions added) is core's, shared with strata-train's
    // recorder, so both write one database. WAL keeps the GUI thread's small per-tick transactions cheap.
    const std::string schemaError = history::RunStore::ensureSchema(m_path.toStdString());
    if (!schemaError.empty()) {
        m_error = QString::fromStdString(schemaError);
        return;
    }
    m_open = exec("PRAGMA journal_mode=WAL") && exec("PRAGMA synchronous=NORMAL");
}

int RunHistory::markInterruptedRuns() {
    if (!m_open) return 0;
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    QSqlQuery q(db);
    if (!q.exec("SELECT id, pid FROM runs WHERE status = 'running'")) return 0;
    QList<qint64> ended;
    while (q.next()) {
        const qint64 pid = q.value(1).toLongLong();
        // A run whose workbench process is gone did not end; one of a live workbench (another window) runs on.
        const bool alive = pid > 0 && (pid == QCoreApplication::applicationPid() ||
                                       QFileInfo::exists(QStringLiteral("/proc/%1").arg(pid)));
        if (!alive) ended << q.value(0).toLongLong();
    }
    // The epochs it finished are the epoch rows it wrote: the row said 0 until now (issue 34).
    QSqlQuery u(db);
    u.prepare(
        "UPDATE runs SET status = 'interrupted', message = ?, epochs_completed = (SELECT COUNT(*) FROM metrics m"
        " WHERE m.run_id = runs.id AND m.kind = 'epoch') WHERE id = ?");
    for (const qint64 id : std::as_const(ended)) {
        u.addBindValue(QStringLiteral("The workbench ended before the run did."));
        u.addBindValue(id);
        if (!u.exec()) m_error = u.lastError().text();
    }
    return int(ended.size());
}

RunHistory::~RunHistory() {
    {
        QSqlDatabase db = QSqlDatabase::database(m_connection, false);
        if (db.isOpen()) db.close();
    }
    QSqlDatabase::removeDatabase(m_connection);
}

bool RunHistory::exec(const QString& sql) {
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (q.exec(sql)) return true;
    m_error = q.lastError().text();
    return false;
}

qint64 RunHistory::beginRun(const Project& project, const QString& projectPath, const QString& device,
                            const QString& runFolder, const QDateTime& started) {
    if (!m_open) return 0;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "INSERT INTO runs (started, project_name, project_path, device, project_json, status, run_folder, pid,"
        " project_id) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)");
    q.addBindValue((started.isValid() ? started.toUTC() : QDateTime::currentDateTimeUtc()).toString(Qt::ISODateWithMs));
    q.addBindValue(QString::fromStdString(project.name));
    q.addBindValue(projectPath);
    q.addBindValue(device);
    q.addBindValue(QString::fromStdString(projectToJson(project).dump()));
    q.addBindValue(runFolder);
    q.addBindValue(QCoreApplication::applicationPid());
    q.addBindValue(QString::fromStdString(project.id));
    if (!q.exec()) {
        m_error = q.lastError().text();
        return 0;
    }
    return q.lastInsertId().toLongLong();
}

void RunHistory::addSteps(qint64 run, const QVector<StepEvent>& steps) {
    if (!m_open || run <= 0 || steps.isEmpty()) return;
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    db.transaction();
    QSqlQuery q(db);
    q.prepare(
        "INSERT INTO metrics (run_id, kind, step, epoch, loss, accuracy, learning_rate, samples_per_second,"
        " elapsed_seconds) VALUES (?, 'step', ?, ?, ?, ?, ?, ?, ?)");
    for (const StepEvent& s : steps) {
        q.addBindValue(run);
        q.addBindValue(qint64(s.step));
        q.addBindValue(s.epoch);
        q.addBindValue(real(s.loss));
        q.addBindValue(real(s.accuracy));
        q.addBindValue(real(s.learningRate));
        q.addBindValue(real(s.samplesPerSecond));
        q.addBindValue(real(s.elapsedSeconds));
        if (!q.exec()) m_error = q.lastError().text();
    }
    db.commit();
}

void RunHistory::addEpoch(qint64 run, const EpochEvent& e) {
    if (!m_open || run <= 0) return;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "INSERT INTO metrics (run_id, kind, epoch, loss, accuracy, samples_per_second, val_loss, val_accuracy,"
        " elapsed_seconds) VALUES (?, 'epoch', ?, ?, ?, ?, ?, ?, ?)");
    q.addBindValue(run);
    q.addBindValue(e.epoch);
    q.addBindValue(real(e.trainLoss));
    q.addBindValue(real(e.trainAccuracy));
    q.addBindValue(real(e.samplesPerSecond));
    q.addBindValue(e.hasValidation ? real(e.valLoss) : QVariant());
    q.addBindValue(e.hasValidation ? real(e.valAccuracy) : QVariant());
    q.addBindValue(real(e.seconds));
    if (!q.exec()) m_error = q.lastError().text();
}

void RunHistory::finishRun(qint64 run, const QString& status, const QString& message, const FinishedEvent& f) {
    if (!m_open || run <= 0) return;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "UPDATE runs SET status = ?, message = ?, epochs_completed = ?, best_epoch = ?, best_val_loss = ?,"
        " best_val_acc = ?, seconds = ? WHERE id = ?");
    q.addBindValue(status);
    q.addBindValue(message);
    q.addBindValue(f.epochsCompleted);
    q.addBindValue(f.bestEpoch);
    q.addBindValue(f.bestEpoch > 0 ? real(f.bestValLoss) : QVariant());
    q.addBindValue(f.bestEpoch > 0 ? real(f.bestValAccuracy) : QVariant());
    q.addBindValue(real(f.seconds));
    q.addBindValue(run);
    if (!q.exec()) m_error = q.lastError().text();
    QSqlQuery summary(QSqlDatabase::database(m_connection));
    summary.prepare(QString::fromLatin1(history::RunStore::summarizeSql()));
    summary.addBindValue(run);
    if (!summary.exec()) m_error = summary.lastError().text();
}

QVector<RunHistory::RunSummary> RunHistory::selectRuns(const QString& where, const QVariantList& values) const {
    QVector<RunSummary> out;
    if (!m_open) return out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "SELECT id, started, project_name, project_path, device, status, message, epochs_completed,"
        " best_epoch, best_val_loss, best_val_acc, seconds, run_folder, project_id, name, (SELECT MAX(m.step) FROM"
        " metrics m WHERE m.run_id = runs.id AND m.kind = 'step') FROM runs" +
        (where.isEmpty() ? QString() : QStringLiteral(" WHERE ") + where) + " ORDER BY id DESC");
    for (const QVariant& v : values) q.addBindValue(v);
    if (!q.exec()) return out;
    while (q.next()) {
        RunSummary r;
        r.id = q.value(0).toLongLong();
        r.started = QDateTime::fromString(q.value(1).toString(), Qt::ISODateWithMs);
        r.projectName = q.value(2).toString();
        r.projectPath = q.value(3).toString();
        r.device = q.value(4).toString();
        r.status = q.value(5).toString();
        r.message = q.value(6).toString();
        r.epochsCompleted = q.value(7).toInt();
        r.bestEpoch = q.value(8).toInt();
        r.bestValLoss = q.value(9).toDouble();
        r.bestValAccuracy = q.value(10).toDouble();
        r.seconds = q.value(11).toDouble();
        r.runFolder = q.value(12).toString();
        r.projectId = q.value(13).toString();
        r.name = q.value(14).toString();
        r.steps = q.value(15).toLongLong();
        out.append(r);
    }
    return out;
}

QVector<RunHistory::RunSummary> RunHistory::runs() const { return selectRuns({}, {}); }

QVector<RunHistory::RunSummary> RunHistory::runsOfProject(const QString& projectId, const QString& projectPath) const {
    // Bound as strings, never NULL: the condition compares them with ''.
    const QString id = projectId.isNull() ? QStringLiteral("") : projectId;
    const QString path = projectPath.isNull() ? QStringLiteral("") : projectPath;
    return selectRuns(QString::fromLatin1(history::RunStore::projectRunsWhereSql()), {id, id, path, path});
}

int RunHistory::adoptUnsavedRuns(const QString& projectId, const QString& projectPath) {
    if (!m_open || projectId.isEmpty() || projectPath.isEmpty()) return 0;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("UPDATE runs SET project_path = ? WHERE project_id = ? AND COALESCE(project_path, '') = ''");
    q.addBindValue(projectPath);
    q.addBindValue(projectId);
    if (!q.exec()) {
        m_error = q.lastError().text();
        return 0;
    }
    return q.numRowsAffected();
}

int RunHistory::adoptRunsOfFile(const QString& projectPath, const QString& projectId) {
    if (!m_open || projectId.isEmpty() || projectPath.isEmpty()) return 0;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("UPDATE runs SET project_id = ? WHERE project_path = ? AND COALESCE(project_id, '') = ''");
    q.addBindValue(projectId);
    q.addBindValue(projectPath);
    if (!q.exec()) {
        m_error = q.lastError().text();
        return 0;
    }
    return q.numRowsAffected();
}

int RunHistory::metricCount(qint64 run, const QString& kind) const {
    if (!m_open) return -1;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("SELECT COUNT(*) FROM metrics WHERE run_id = ? AND kind = ?");
    q.addBindValue(run);
    q.addBindValue(kind);
    if (!q.exec() || !q.next()) return -1;
    return q.value(0).toInt();
}

QString RunHistory::projectJson(qint64 run) const {
    if (!m_open) return {};
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("SELECT project_json FROM runs WHERE id = ?");
    q.addBindValue(run);
    if (!q.exec() || !q.next()) return {};
    return q.value(0).toString();
}

qint64 RunHistory::lastRunOf(const QString& projectId, const QString& projectPath) const {
    if (!m_open) return 0;
    const QString id = projectId.isNull() ? QStringLiteral("") : projectId;
    const QString path = projectPath.isNull() ? QStringLiteral("") : projectPath;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("SELECT r.id FROM runs r WHERE ") +
              QString::fromLatin1(history::RunStore::projectRunsWhereSql()) +
              " AND EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.id AND m.kind = 'step') ORDER BY r.id DESC"
              " LIMIT 1");
    for (const QString& v : {id, id, path, path}) q.addBindValue(v);
    return q.exec() && q.next() ? q.value(0).toLongLong() : 0;
}

QVector<StepEvent> RunHistory::stepsOf(qint64 run) const {
    QVector<StepEvent> out;
    if (!m_open) return out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "SELECT step, epoch, loss, accuracy, learning_rate, samples_per_second, elapsed_seconds FROM metrics"
        " WHERE run_id = ? AND kind = 'step' ORDER BY step");
    q.addBindValue(run);
    if (!q.exec()) return out;
    auto num = [&q](int i) { return q.value(i).isNull() ? std::nan("") : q.value(i).toDouble(); };
    while (q.next()) {
        StepEvent s;
        s.step = q.value(0).toLongLong();
        s.epoch = q.value(1).toInt();
        s.loss = num(2);
        s.accuracy = num(3);
        s.learningRate = num(4);
        s.samplesPerSecond = num(5);
        s.elapsedSeconds = num(6);
        out.append(s);
    }
    return out;
}

QVector<QPair<EpochEvent, qint64>> RunHistory::epochsOf(qint64 run) const {
    QVector<QPair<EpochEvent, qint64>> out;
    if (!m_open) return out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "SELECT e.epoch, e.loss, e.accuracy, e.samples_per_second, e.val_loss, e.val_accuracy, e.elapsed_seconds,"
        " (SELECT MAX(s.step) FROM metrics s WHERE s.run_id = e.run_id AND s.kind = 'step' AND s.epoch <= e.epoch),"
        " (SELECT best_epoch FROM runs WHERE id = e.run_id)"
        " FROM metrics e WHERE e.run_id = ? AND e.kind = 'epoch' ORDER BY e.epoch");
    q.addBindValue(run);
    if (!q.exec()) return out;
    auto num = [&q](int i) { return q.value(i).isNull() ? std::nan("") : q.value(i).toDouble(); };
    while (q.next()) {
        EpochEvent e;
        e.epoch = q.value(0).toInt();
        e.trainLoss = num(1);
        e.trainAccuracy = num(2);
        e.samplesPerSecond = num(3);
        e.hasValidation = !q.value(4).isNull();
        e.valLoss = num(4);
        e.valAccuracy = num(5);
        e.seconds = num(6);
        e.best = e.epoch == q.value(8).toInt();
        out.append({e, q.value(7).toLongLong()});
    }
    return out;
}

}  // namespace strata::ui
