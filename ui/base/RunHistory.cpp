// RunHistory: see RunHistory.h.
#include "ui/base/RunHistory.h"

#include <QAtomicInteger>
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

QString RunHistory::defaultPath() {
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    if (dir.isEmpty()) dir = QDir::homePath() + "/.strata";
    return dir + "/runs.sqlite";
}

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

qint64 RunHistory::beginRun(const Project& project, const QString& projectPath, const QString& device) {
    if (!m_open) return 0;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(
        "INSERT INTO runs (started, project_name, project_path, device, project_json, status) "
        "VALUES (?, ?, ?, ?, ?, 'running')");
    q.addBindValue(QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs));
    q.addBindValue(QString::fromStdString(project.name));
    q.addBindValue(projectPath);
    q.addBindValue(device);
    q.addBindValue(QString::fromStdString(projectToJson(project).dump()));
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

QVector<RunHistory::RunSummary> RunHistory::runs() const {
    QVector<RunSummary> out;
    if (!m_open) return out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec("SELECT id, started, project_name, project_path, device, status, message, epochs_completed,"
                " best_epoch, best_val_loss, best_val_acc, seconds FROM runs ORDER BY id DESC"))
        return out;
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
        out.append(r);
    }
    return out;
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

}  // namespace strata::ui
