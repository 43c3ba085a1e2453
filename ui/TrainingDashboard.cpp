// TrainingDashboard: see TrainingDashboard.h.
#include "ui/TrainingDashboard.h"

#include <QDir>
#include <QFileInfo>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QStyle>
#include <QThread>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/graph/Task.h"
#include "core/train/RunFolder.h"
#include "ui/ChartPanel.h"
#include "ui/DevicePicker.h"
#include "ui/TaskMetricsView.h"
#include "ui/base/EngineWorker.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"

namespace strata::ui {

namespace {

const QColor kTrain(31, 119, 180);
const QColor kTrainEpoch(255, 127, 14);
const QColor kVal(214, 39, 40);
const QColor kLr(148, 103, 189);
const QColor kThroughput(44, 160, 44);
const QColor kDeviceColors[] = {QColor(23, 190, 207), QColor(140, 86, 75), QColor(227, 119, 194), QColor(127, 127, 127),
                                QColor(188, 189, 34)};

QString formatDuration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return QStringLiteral("-");
    const qint64 s = qint64(seconds + 0.5);
    if (s >= 3600)
        return QStringLiteral("%1:%2:%3")
            .arg(s / 3600)
            .arg(s / 60 % 60, 2, 10, QChar('0'))
            .arg(s % 60, 2, 10, QChar('0'));
    return QStringLiteral("%1:%2").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
}

QString percent(double fraction) { return QString::number(fraction * 100.0, 'f', 1) + " %"; }

}  // namespace

TrainingDashboard::TrainingDashboard(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    registerEngineMetaTypes();
    qRegisterMetaType<strata::ui::TrainingDashboard::State>();
    buildUi();

    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("strata-engine"));
    m_worker = new EngineWorker;
    m_worker->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(m_worker, &EngineWorker::runStarted, this, &TrainingDashboard::onRunStarted);
    connect(m_worker, &EngineWorker::stepReported, this, &TrainingDashboard::onStep);
    connect(m_worker, &EngineWorker::epochReported, this, &TrainingDashboard::onEpoch);
    connect(m_worker, &EngineWorker::telemetryReported, this, &TrainingDashboard::onTelemetry);
    connect(m_worker, &EngineWorker::checkpointSaved, this, &TrainingDashboard::onCheckpoint);
    connect(m_worker, &EngineWorker::finished, this, &TrainingDashboard::onFinished);
    connect(m_worker, &EngineWorker::errorOccurred, this, &TrainingDashboard::onError);
    connect(m_worker, &EngineWorker::logMessage, this, &TrainingDashboard::onLog);
    connect(m_worker, &EngineWorker::runEnded, this, &TrainingDashboard::onRunEnded);
    m_thread->start();
    // A refusal or a failed run is about the project it was shown for: another project starts clean.
    connect(m_doc, &ProjectDocument::projectReset, this, [this] {
        if (m_state == State::Idle) clearError();
    });

    m_flushTimer = new QTimer(this);
    m_flushTimer->setInterval(150);
    connect(m_flushTimer, &QTimer::timeout, this, &TrainingDashboard::flush);
    updateButtons();
    connect(m_doc, &ProjectDocument::identityChanged, this, &TrainingDashboard::projectChanged);
}

void TrainingDashboard::setRunHistory(RunHistory* history) { m_doc->setRunHistory(history); }

void TrainingDashboard::projectChanged() {
    // A run still active belongs to the project it started with; MainWindow asks to stop it before another
    // project opens, so this is the first save during a run (its run keeps showing).
    if (m_state != State::Idle) return;
    RunHistory* history = m_doc->runHistory();
    if (m_runId > 0 && history) {
        for (const RunHistory::RunSummary& r : history->runsOfProject(m_doc->projectId(), m_doc->filePath()))
            if (r.id == m_runId) return;  // still this project's run (first save: adopted)
    }
    clearCharts();
    clearError();
    m_runId = 0;
    m_runFolder.clear();
    m_log->clear();
    m_elapsed->clear();
    m_eta->clear();
    m_status->setToolTip(QString());
    if (!showLastRun()) m_status->setText(tr("Idle: no run of this project yet"));
}

TrainingDashboard::~TrainingDashboard() {
    // A run still going is stopped at its next step; the thread ends when start() returns.
    m_worker->stop();
    m_thread->quit();
    m_thread->wait();
}

void TrainingDashboard::buildUi() {
    auto* root = new QVBoxLayout(this);

    auto* bar = new QHBoxLayout;
    m_start = new QPushButton(style()->standardIcon(QStyle::SP_MediaPlay), tr("Start"), this);
    m_pause = new QPushButton(style()->standardIcon(QStyle::SP_MediaPause), tr("Pause"), this);
    m_stop = new QPushButton(style()->standardIcon(QStyle::SP_MediaStop), tr("Stop"), this);
    m_save = new QPushButton(style()->standardIcon(QStyle::SP_DialogSaveButton), tr("Save checkpoint now"), this);
    m_start->setToolTip(tr("Train the project on the ticked device"));
    m_save->setToolTip(tr("Write a checkpoint after the current step"));
    connect(m_start, &QPushButton::clicked, this, [this] { startTraining(); });
    connect(m_pause, &QPushButton::clicked, this, &TrainingDashboard::togglePause);
    connect(m_stop, &QPushButton::clicked, this, &TrainingDashboard::stopTraining);
    connect(m_save, &QPushButton::clicked, this, &TrainingDashboard::saveCheckpointNow);
    for (QPushButton* b : {m_start, m_pause, m_stop, m_save}) bar->addWidget(b);
    bar->addSpacing(12);
    m_status = new QLabel(tr("Idle"), this);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // Ignored width: a status text that changes every tick must not relayout the whole dashboard.
    m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    bar->addWidget(m_status, 1);
    m_comm = new QLabel(this);
    m_comm->setToolTip(
        tr("Data parallel: the replicas, and the last step's gradient all-reduce: its time and the "
           "share of it that ran while backward was still computing"));
    m_comm->hide();
    bar->addWidget(m_comm);
    bar->addSpacing(8);
    m_elapsed = new QLabel(this);
    m_eta = new QLabel(this);
    for (QLabel* label : {m_elapsed, m_eta})
        label->setMinimumWidth(label->fontMetrics().horizontalAdvance(QStringLiteral("Elapsed 00:00:00")));
    bar->addWidget(m_elapsed);
    bar->addSpacing(8);
    bar->addWidget(m_eta);
    root->addLayout(bar);

    m_banner = new QFrame(this);
    m_banner->setObjectName(QStringLiteral("errorBanner"));
    m_banner->setStyleSheet(
        QStringLiteral("#errorBanner { background: #fde7e9; border: 1px solid #d13438; border-radius: 4px; }"
                       "#errorBanner QLabel { color: #a4262c; }"));
    auto* bannerLayout = new QHBoxLayout(m_banner);
    bannerLayout->setContentsMargins(8, 6, 6, 6);
    auto* icon = new QLabel(m_banner);
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxCritical).pixmap(20, 20));
    bannerLayout->addWidget(icon, 0, Qt::AlignTop);
    m_bannerText = new QLabel(m_banner);
    m_bannerText->setWordWrap(true);
    m_bannerText->setTextInteractionFlags(Qt::TextSelectableByMouse);
    bannerLayout->addWidget(m_bannerText, 1);
    auto* close = new QToolButton(m_banner);
    close->setText(QStringLiteral("\u2715"));
    close->setAutoRaise(true);
    close->setToolTip(tr("Dismiss"));
    connect(close, &QToolButton::clicked, this, &TrainingDashboard::clearError);
    bannerLayout->addWidget(close, 0, Qt::AlignTop);
    m_banner->setVisible(false);
    root->addWidget(m_banner);

    auto* grid = new QGridLayout;
    grid->setSpacing(6);
    auto addChart = [&](const QString& name, ChartPanel* chart, int row, int col) {
        m_charts.insert(name, chart);
        grid->addWidget(chart, row, col);
    };
    auto* loss = new ChartPanel(tr("Loss"), tr("step"), tr("loss"), this);
    loss->addSeries("train_loss", tr("train (batch)"), kTrain);
    loss->addSeries("val_loss", tr("validation (epoch)"), kVal, ChartPanel::Style::LineWithDots);
    addChart("loss", loss, 0, 0);
    auto* acc = new ChartPanel(tr("Accuracy"), tr("step"), tr("accuracy"), this);
    acc->addSeries("train_acc_batch", tr("train (batch)"), kTrain.lighter(150));
    acc->addSeries("train_acc_epoch", tr("train (epoch)"), kTrainEpoch, ChartPanel::Style::LineWithDots);
    acc->addSeries("val_acc", tr("validation (epoch)"), kVal, ChartPanel::Style::LineWithDots);
    acc->setLegendCorner(Qt::AlignBottom | Qt::AlignRight);  // accuracy climbs into the top corner
    addChart("accuracy", acc, 0, 1);
    auto* lr = new ChartPanel(tr("Learning rate"), tr("step"), tr("learning rate"), this);
    lr->addSeries("lr", tr("learning rate"), kLr);
    addChart("lr", lr, 0, 2);
    auto* throughput = new ChartPanel(tr("Throughput"), tr("step"), tr("samples/s"), this);
    throughput->addSeries("samples_per_s", tr("samples/s"), kThroughput);
    throughput->setLegendCorner(Qt::AlignBottom | Qt::AlignRight);
    addChart("throughput", throughput, 1, 0);
    auto* utilization = new ChartPanel(tr("Device utilization"), tr("time (s)"), tr("%"), this);
    utilization->setFixedLeftRange(0, 105);
    addChart("utilization", utilization, 1, 1);
    addChart("memory", new ChartPanel(tr("Device memory"), tr("time (s)"), tr("GiB used"), this), 1, 2);
    // Three columns by two rows: all six charts in view at once in a 1600 x 1000 window (issue 17).
    for (ChartPanel* chart : std::as_const(m_charts))
        for (const QString& series : chart->seriesNames()) m_seriesChart.insert(series, chart);
    root->addLayout(grid, 1);
    m_taskView = new TaskMetricsView(this);
    root->addWidget(m_taskView, 1);

    m_log = new QLabel(this);
    m_log->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_log->setStyleSheet(QStringLiteral("color: palette(dark);"));
    m_log->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    root->addWidget(m_log);
}

void TrainingDashboard::setDevicePicker(DevicePicker* picker) {
    m_picker = picker;
    // "Tick a device" goes once one is ticked.
    connect(picker, &DevicePicker::selectionChanged, this, [this] {
        if (m_picker && m_picker->selectionError().isEmpty()) dropBannerIf(BannerCause::Devices);
    });
}

void TrainingDashboard::recordRun() {
    if (!m_toRecord || !m_recording) return;
    const PendingRecord r = *std::exchange(m_toRecord, std::nullopt);
    m_runId = m_recording->beginRun(r.project, r.path, r.device, r.runFolder, r.started);
}

void TrainingDashboard::refuseStart(const QString& reason, BannerCause cause) {
    showError(reason);
    m_bannerCause = cause;
    emit startRefused(reason);
}

void TrainingDashboard::dropBannerIf(BannerCause cause) {
    if (m_bannerCause == cause) clearError();
}

void TrainingDashboard::setRefreshIntervalMs(int ms) { m_flushTimer->setInterval(ms); }

int TrainingDashboard::pointCount(const QString& series) const {
    ChartPanel* chart = m_seriesChart.value(series);
    return chart ? chart->pointCount(series) : -1;
}

ChartPanel* TrainingDashboard::chart(const QString& name) const { return m_charts.value(name); }
QString TrainingDashboard::errorText() const { return m_bannerText->text(); }
bool TrainingDashboard::errorVisible() const { return !m_banner->isHidden(); }
QString TrainingDashboard::statusText() const { return m_status->text(); }
QString TrainingDashboard::etaText() const { return m_eta->text(); }
QString TrainingDashboard::commText() const { return m_comm->text(); }
QString TrainingDashboard::elapsedText() const { return m_elapsed->text(); }

void TrainingDashboard::showError(const QString& message) {
    m_bannerText->setText(message);
    m_banner->setVisible(true);
}

void TrainingDashboard::clearError() {
    m_bannerCause = BannerCause::None;
    m_bannerText->clear();
    m_banner->setVisible(false);
}

void TrainingDashboard::setState(State state) {
    if (m_state == state) return;
    if (state == State::Paused) m_pausedSince = m_clock.elapsed();
    if (m_state == State::Paused && m_pausedSince >= 0) {
        m_pausedMs += m_clock.elapsed() - m_pausedSince;
        m_pausedSince = -1;
    }
    m_state = state;
    updateButtons();
    emit stateChanged(state);
}

void TrainingDashboard::updateButtons() {
    const bool active = m_state == State::Running || m_state == State::Paused || m_state == State::Starting;
    m_start->setEnabled(m_state == State::Idle);
    m_pause->setEnabled(active);
    m_stop->setEnabled(active);
    m_save->setEnabled(m_state == State::Running || m_state == State::Paused);
    const bool paused = m_state == State::Paused;
    m_pause->setText(paused ? tr("Resume") : tr("Pause"));
    m_pause->setIcon(style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
}

void TrainingDashboard::startTraining(qint64 maxSteps) {
    if (m_state != State::Idle) {
        refuseStart(tr("A training run is already active; stop it before starting another."), BannerCause::RunActive);
        return;
    }
    QString device;
    if (m_picker) {
        const QString problem = m_picker->selectionError();
        if (!problem.isEmpty()) {
            refuseStart(problem, BannerCause::Devices);
            return;
        }
        device = m_picker->runDevice();
    } else {
        device = QString::fromStdString(m_doc->project().training.device);
    }
    if (m_startCheck) {
        const StartVerdict verdict = m_startCheck(maxSteps);
        if (!verdict.refusal.isEmpty()) {
            refuseStart(verdict.refusal, BannerCause::Refused);
            return;
        }
        if (!verdict.waiting.isEmpty()) {
            m_status->setText(verdict.waiting);
            return;
        }
    }
    if (device.isEmpty()) device = QStringLiteral("cpu");
    if (const std::string problem =
            checkpointFolderProblem(m_doc->project(), m_doc->filePath().toStdString(), m_writable);
        !problem.empty()) {
        refuseStart(tr("%1. Set Checkpoint folder in the training settings to a folder you can write, or empty it to "
                       "keep the run in your data folder; or save the project somewhere writable (File > Save As).")
                        .arg(QString::fromStdString(problem)),
                    BannerCause::Refused);
        return;
    }

    clearError();
    clearCharts();
    const Project project = m_doc->project();  // the run's own copy
    m_taskView->setTask(project.dataset.task);
    const QString path = m_doc->filePath();
    m_maxSteps = maxSteps;
    m_epochs = project.training.epochs;
    m_haveStep = false;
    m_lastStepSeen = 0;
    m_runDevice = device;
    m_finalStatus.clear();
    m_runFailed = false;
    m_finished = FinishedEvent{};
    m_errorMessage.clear();
    m_recording = m_doc->runHistory();
    const QString userData = m_recording ? QFileInfo(m_recording->path()).absolutePath() : RunHistory::defaultDataDir();
    // A read-only project (an installed example) keeps its runs in the per-user data folder, where strata-train
    // puts them too.
    const bool perUser = project.training.checkpointDir.empty() &&
                         runsPlace(project, path.toStdString(), userData.toStdString(), m_writable).perUser;
    m_runFolder = QString::fromStdString(checkpointFolderForRun(project, path.toStdString(), userData.toStdString(),
                                                                std::chrono::system_clock::now(), m_writable));
    const QString runFolder = project.training.checkpointDir.empty() ? m_runFolder : QString();
    // Recorded from its first step (recordRun), with the project's id and path (Export, Predict and Optimize
    // find it by them): a run refused before its first step (memory, data, resume) is no failed run.
    m_runId = 0;
    m_toRecord =
        m_recording
            ? std::optional<PendingRecord>({project, path, device, m_runFolder, QDateTime::currentDateTimeUtc()})
            : std::nullopt;
    m_clock.start();
    m_pausedMs = 0;
    m_pausedSince = -1;
    m_status->setText(tr("Starting on %1...").arg(device));
    m_log->clear();
    if (perUser)
        m_log->setText(
            tr("Checkpoints: %1 (the project's folder is not writable)").arg(QDir::toNativeSeparators(m_runFolder)));
    setState(State::Starting);
    m_flushTimer->start();
    updateTimes();

    EngineWorker* worker = m_worker;
    QMetaObject::invokeMethod(
        worker,
        [worker, project, path, device, maxSteps, runFolder] {
            worker->start(project, path, device, maxSteps, runFolder);
        },
        Qt::QueuedConnection);
    emit trainingStarted();
}

void TrainingDashboard::togglePause() {
    if (m_state == State::Running || m_state == State::Starting) {
        m_worker->pause();
        setState(State::Paused);
        m_status->setText(tr("Paused"));
    } else if (m_state == State::Paused) {
        m_worker->resume();
        setState(m_haveStep ? State::Running : State::Starting);
        m_status->setText(tr("Resuming..."));
    }
}

void TrainingDashboard::stopTraining() {
    if (m_state == State::Idle || m_state == State::Stopping) return;
    m_worker->stop();
    setState(State::Stopping);
    m_status->setText(tr("Stopping..."));
}

void TrainingDashboard::saveCheckpointNow() {
    if (m_state != State::Running && m_state != State::Paused) return;
    m_worker->saveNow();
    m_log->setText(tr("Checkpoint requested; it is written after the current step."));
}

void TrainingDashboard::clearCharts() {
    m_taskView->clear();
    m_comm->clear();
    m_comm->hide();
    m_pendingSteps.clear();
    m_pendingEpochs.clear();
    m_pendingTelemetry.clear();
    // Device series belong to the run that sampled them: the next run adds its own (ensureDeviceSeries).
    for (const QString& series : m_seriesChart.keys())
        if (series.startsWith(QLatin1String("util:")) || series.startsWith(QLatin1String("mem:")))
            m_seriesChart.take(series)->removeSeries(series);
    for (ChartPanel* chart : std::as_const(m_charts)) chart->clear();
}

void TrainingDashboard::ensureDeviceSeries(const QString& device) {
    const QString util = QStringLiteral("util:") + device;
    if (m_seriesChart.contains(util)) return;
    const int index = int(m_charts.value("utilization")->seriesNames().size()) % int(std::size(kDeviceColors));
    const QColor color = kDeviceColors[index];
    // Samples come a few times a second: dots make the first ones visible.
    m_charts.value("utilization")->addSeries(util, device, color, ChartPanel::Style::LineWithSmallDots);
    m_charts.value("memory")->addSeries(QStringLiteral("mem:") + device, device, color,
                                        ChartPanel::Style::LineWithSmallDots);
    m_seriesChart.insert(util, m_charts.value("utilization"));
    m_seriesChart.insert(QStringLiteral("mem:") + device, m_charts.value("memory"));
}

void TrainingDashboard::onRunStarted(const QString& device) {
    m_status->setText(tr("Loading data and compiling on %1...").arg(device));
}

void TrainingDashboard::onStep(const StepEvent& e) {
    m_pendingSteps.append(e);
    m_lastStepSeen = e.step;
}

void TrainingDashboard::onEpoch(const EpochEvent& e) { m_pendingEpochs.append({e, double(m_lastStepSeen)}); }

void TrainingDashboard::onTelemetry(const TelemetryEvent& e) {
    m_pendingTelemetry.append(e);
    if (m_picker) m_picker->showTelemetry(e);
}

void TrainingDashboard::onCheckpoint(const CheckpointEvent& e) {
    m_log->setText(tr("Checkpoint saved: %1 (epoch %2, step %3)%4")
                       .arg(QString::fromStdString(e.path))
                       .arg(e.epoch)
                       .arg(e.step)
                       .arg(e.best ? tr(", best so far") : QString()));
}

void TrainingDashboard::onFinished(const FinishedEvent& e) {
    m_finished = e;
    QString text = e.stoppedByUser ? tr("Stopped") : e.earlyStopped ? tr("Stopped early") : tr("Finished");
    text += tr(" after %n epoch(s) in %1", nullptr, e.epochsCompleted).arg(formatDuration(e.seconds));
    if (e.bestEpoch > 0)
        text += tr("; best epoch %1 (validation loss %2, accuracy %3)")
                    .arg(e.bestEpoch)
                    .arg(e.bestValLoss, 0, 'g', 4)
                    .arg(percent(e.bestValAccuracy));
    m_finalStatus = text;
}

void TrainingDashboard::onError(const QString& message) {
    m_runFailed = true;
    m_errorMessage = message;
    showError(tr("Training stopped on an error: %1").arg(message));
    m_bannerCause = BannerCause::RunError;
}

void TrainingDashboard::onLog(const QString& message) { m_log->setText(message); }

void TrainingDashboard::onRunEnded(bool ok) {
    flush();
    m_flushTimer->stop();
    if (!ok || m_runFailed)
        m_status->setText(tr("Failed"));
    else
        m_status->setText(m_finalStatus.isEmpty() ? tr("Finished") : m_finalStatus);
    m_status->setToolTip(m_status->text());  // the label may be narrower than the summary
    m_eta->clear();
    if (ok && !m_runFailed) recordRun();  // finished or stopped, with or without a step
    m_toRecord.reset();
    if (m_recording && m_runId > 0) {
        const bool failed = !ok || m_runFailed;
        const QString status = failed                     ? QStringLiteral("failed")
                               : m_finished.stoppedByUser ? QStringLiteral("stopped")
                                                          : QStringLiteral("finished");
        m_recording->finishRun(m_runId, status, failed ? m_errorMessage : m_finalStatus, m_finished);
    }
    dropBannerIf(BannerCause::RunActive);  // the run it was about has ended
    m_recording = nullptr;
    setState(State::Idle);
    m_doc->notifyRunsChanged();
    emit trainingFinished();
}

bool TrainingDashboard::showLastRun() {
    RunHistory* history = m_doc->runHistory();
    if (!history || m_state != State::Idle) return false;
    const qint64 run = history->lastRunOf(m_doc->projectId(), m_doc->filePath());
    if (run <= 0) return false;
    const QVector<StepEvent> steps = history->stepsOf(run);
    if (steps.isEmpty()) return false;
    clearCharts();
    m_pendingSteps = steps;
    for (const auto& [event, x] : history->epochsOf(run)) m_pendingEpochs.append({event, double(x)});
    m_recording = nullptr;  // the points come from the history: flush must not record them again
    flush();
    m_runId = run;
    QString when, status, folder;
    for (const RunHistory::RunSummary& r : history->runs())
        if (r.id == run) {
            when = QLocale().toString(r.started.toLocalTime(), QLocale::ShortFormat);
            status = r.status;
            folder = r.runFolder;
        }
    m_runFolder = folder;
    m_status->setText(tr("Last run: run %1, %2 (%3)").arg(run).arg(when, status));
    return true;
}

void TrainingDashboard::flush() {
    updateTimes();
    if (m_pendingSteps.isEmpty() && m_pendingEpochs.isEmpty() && m_pendingTelemetry.isEmpty()) return;

    if (!m_pendingSteps.isEmpty()) {
        const qsizetype n = m_pendingSteps.size();
        QVector<double> x(n), loss(n), acc(n), lr(n), rate(n);
        for (qsizetype i = 0; i < n; ++i) {
            const StepEvent& s = m_pendingSteps[i];
            x[i] = double(s.step);
            loss[i] = s.loss;
            acc[i] = s.accuracy;
            lr[i] = s.learningRate;
            rate[i] = s.samplesPerSecond;
        }
        m_charts["loss"]->append("train_loss", x, loss);
        m_charts["accuracy"]->append("train_acc_batch", x, acc);
        m_charts["lr"]->append("lr", x, lr);
        m_charts["throughput"]->append("samples_per_s", x, rate);
        recordRun();
        if (m_recording && m_runId > 0) m_recording->addSteps(m_runId, m_pendingSteps);
        m_lastStep = m_pendingSteps.last();
        m_haveStep = true;
        m_pendingSteps.clear();
        if (m_state == State::Starting) setState(State::Running);
    }

    for (const EpochPoint& p : std::as_const(m_pendingEpochs)) {
        const EpochEvent& e = p.event;
        if (m_recording && m_runId > 0) m_recording->addEpoch(m_runId, e);
        m_taskView->addEpoch(e, p.x);
        const QVector<double> x{p.x};
        m_charts["accuracy"]->append("train_acc_epoch", x, {e.trainAccuracy});
        if (e.hasValidation) {
            m_charts["loss"]->append("val_loss", x, {e.valLoss});
            m_charts["accuracy"]->append("val_acc", x, {e.valAccuracy});
        }
        if (e.best) {
            const QString label = tr("best: epoch %1").arg(e.epoch);
            m_charts["loss"]->setMarker(p.x, label);
            m_charts["accuracy"]->setMarker(p.x, label);
        }
        if (m_taskView->task() != TaskKind::Classification) {
            // No accuracy: the task's score, named (R2, micro F1, PSNR).
            m_log->setText(tr("Epoch %1: train loss %2%3 (%4 samples/s)")
                               .arg(e.epoch)
                               .arg(e.trainLoss, 0, 'g', 4)
                               .arg(e.hasValidation
                                        ? tr("; validation loss %1, %2 %3")
                                              .arg(e.valLoss, 0, 'g', 4)
                                              .arg(QString::fromStdString(taskScoreName(m_taskView->task())))
                                              .arg(e.valAccuracy, 0, 'g', 4)
                                        : QString())
                               .arg(e.samplesPerSecond, 0, 'f', 0));
            continue;
        }
        m_log->setText(
            tr("Epoch %1: train loss %2, accuracy %3%4 (%5 samples/s)")
                .arg(e.epoch)
                .arg(e.trainLoss, 0, 'g', 4)
                .arg(percent(e.trainAccuracy))
                .arg(e.hasValidation
                         ? tr("; validation loss %1, accuracy %2").arg(e.valLoss, 0, 'g', 4).arg(percent(e.valAccuracy))
                         : QString())
                .arg(e.samplesPerSecond, 0, 'f', 0));
    }
    m_pendingEpochs.clear();

    for (const TelemetryEvent& t : std::as_const(m_pendingTelemetry)) {
        const QString device = QString::fromStdString(t.device);
        if (!t.available) {
            m_log->setText(tr("Telemetry unavailable for %1: %2").arg(device, QString::fromStdString(t.reason)));
            continue;
        }
        ensureDeviceSeries(device);
        const QVector<double> x{t.timeSeconds};
        m_charts["utilization"]->append(QStringLiteral("util:") + device, x, {t.utilizationPercent});
        if (t.memoryTotalBytes > 0 || t.memoryUsedBytes > 0)
            m_charts["memory"]->append(QStringLiteral("mem:") + device, x,
                                       {t.memoryUsedBytes / (1024.0 * 1024.0 * 1024.0)});
    }
    m_pendingTelemetry.clear();

    if (m_haveStep && m_state != State::Paused && m_state != State::Stopping) {
        const StepEvent& s = m_lastStep;
        QString where =
            m_maxSteps > 0 ? tr("step %1 of at most %2").arg(s.step).arg(m_maxSteps) : tr("step %1").arg(s.step);
        m_status->setText(tr("Epoch %1/%2, %3 (%4/%5 in epoch), loss %6, %7 samples/s")
                              .arg(s.epoch)
                              .arg(m_epochs)
                              .arg(where)
                              .arg(s.stepInEpoch)
                              .arg(s.stepsPerEpoch)
                              .arg(s.loss, 0, 'g', 4)
                              .arg(s.samplesPerSecond, 0, 'f', 0));
        // Data parallel: what the gradient all-reduce cost this step, and how much of it ran behind backward.
        if (s.ranks > 1) {
            m_comm->setText(tr("%1 replicas: all-reduce %2 ms, %3% hidden")
                                .arg(s.ranks)
                                .arg(s.commSeconds * 1000.0, 0, 'f', 1)
                                .arg(s.hiddenFraction * 100.0, 0, 'f', 0));
            m_comm->show();
        }
    }
    for (ChartPanel* chart : std::as_const(m_charts)) chart->refresh();
}

double TrainingDashboard::activeSeconds() const {
    if (!m_clock.isValid()) return 0;
    const qint64 now = m_clock.elapsed();
    const qint64 paused = m_pausedMs + (m_pausedSince >= 0 ? now - m_pausedSince : 0);
    return double(now - paused) / 1000.0;
}

void TrainingDashboard::updateTimes() {
    if (m_state == State::Idle) return;
    m_elapsed->setText(tr("Elapsed %1").arg(formatDuration(activeSeconds())));
    if (!m_haveStep || m_lastStep.step <= 0 || m_lastStep.stepsPerEpoch <= 0) {
        m_eta->setText(tr("ETA -"));
        return;
    }
    int64_t total = int64_t(m_epochs) * m_lastStep.stepsPerEpoch;
    if (m_maxSteps > 0 && m_maxSteps < total) total = m_maxSteps;
    const double perStep = m_lastStep.elapsedSeconds / double(m_lastStep.step);
    m_eta->setText(tr("ETA %1").arg(formatDuration(perStep * double(std::max<int64_t>(0, total - m_lastStep.step)))));
}

bool TrainingDashboard::exportCharts(const QString& folder) {
    QDir dir(folder);
    if (!dir.exists() && !dir.mkpath(QStringLiteral("."))) return false;
    bool ok = true;
    for (auto it = m_charts.constBegin(); it != m_charts.constEnd(); ++it) {
        ok = it.value()->savePng(dir.filePath(it.key() + ".png"), 800, 500) && ok;
        ok = it.value()->saveCsv(dir.filePath(it.key() + ".csv")) && ok;
    }
    return ok;
}

}  // namespace strata::ui
