// TrainingDashboard: starts, pauses, resumes and stops a training run of the
// open project and shows it live: loss, accuracy, learning rate, throughput
// and each device's utilization and memory, plus elapsed time, ETA and an
// error banner. The engine runs in an EngineWorker on its own thread; its
// events are buffered here and appended to the charts on a UI timer, so the
// engine never waits for painting. Every point is kept.
#pragma once

#include <QDateTime>
#include <QElapsedTimer>
#include <QHash>
#include <QPointer>
#include <QString>
#include <QVector>
#include <QWidget>
#include <functional>
#include <optional>
#include <utility>

#include "core/graph/Project.h"
#include "core/train/RunFolder.h"
#include "core/train/TrainingObserver.h"

class QLabel;
class QPushButton;
class QThread;
class QTimer;
class QFrame;

namespace strata::ui {

class ChartPanel;
class DevicePicker;
class TaskMetricsView;
class EngineWorker;
class ProjectDocument;
class RunHistory;

class TrainingDashboard : public QWidget {
    Q_OBJECT
public:
    enum class State { Idle, Starting, Running, Paused, Stopping };

    explicit TrainingDashboard(ProjectDocument* doc, QWidget* parent = nullptr);
    ~TrainingDashboard() override;

    // The picker whose ticked device a run uses; without one the project's training.device is used.
    void setDevicePicker(DevicePicker* picker);
    // Where runs and their metrics are recorded (not owned; nullptr: not recorded): the document's run history
    // (ProjectDocument::setRunHistory), where Export, Predict and Optimize find the project's runs too.
    void setRunHistory(RunHistory* history);
    // The history id of the run shown: the current or last run, or the one showLastRun read back (0: none). A
    // run is recorded from its first step, or at its end when it finished or was stopped before one: a run
    // refused before its first step is not listed.
    qint64 runId() const { return m_runId; }
    // The checkpoint folder of the current or last run: the project's checkpoint folder, else a run folder
    // of its own (RunFolder.h) under the project's folder or, unsaved, under the per-user data folder (the
    // run history's folder when one is set).
    QString runFolder() const { return m_runFolder; }
    // Whether a folder can be written, which decides where a run of a read-only project goes (tests run as root,
    // who may write anywhere, and say which folders are read-only).
    void setWritableCheck(WritableCheck writable) { m_writable = std::move(writable); }
    // Shows the curves of the open project's last recorded run (from the run history), when idle: a
    // reopened project shows where it stood. False when there is none (the charts are then empty). Done by
    // itself when another project is opened or the project is saved as a copy.
    bool showLastRun();

    State state() const { return m_state; }
    bool isRunning() const { return m_state != State::Idle; }

    // Number of points a series holds: train_loss, val_loss, train_acc_batch, train_acc_epoch,
    // val_acc, lr, samples_per_s, util:<device>, mem:<device>. -1 for an unknown series.
    int pointCount(const QString& series) const;
    // The chart by name: loss, accuracy, lr, throughput, utilization, memory.
    ChartPanel* chart(const QString& name) const;
    // Tasks other than classification: their metrics and image strip (TaskMetricsView.h), under the charts.
    TaskMetricsView* taskView() const { return m_taskView; }
    QString errorText() const;
    bool errorVisible() const;
    QString statusText() const;
    QString etaText() const;
    // Data-parallel runs: "2 replicas: all-reduce 0.4 ms, 91% hidden" (the last step's); "" otherwise.
    QString commText() const;
    QString elapsedText() const;
    // Seconds the current or last run has been running, paused time not counted.
    double activeSeconds() const;

    QPushButton* startButton() const { return m_start; }
    QPushButton* pauseButton() const { return m_pause; }
    QPushButton* stopButton() const { return m_stop; }
    QPushButton* saveButton() const { return m_save; }
    EngineWorker* worker() const { return m_worker; }

    // How often buffered events reach the charts (default 150 ms).
    void setRefreshIntervalMs(int ms);

    // Asked by startTraining once the device selection is valid (the workbench's data check): `refusal` refuses
    // the run (banner, startRefused); `waiting` puts it off, saying why in the status line (the check calls
    // startTraining again when it has its answer); both empty: the run starts.
    struct StartVerdict {
        QString refusal, waiting;
    };
    void setStartCheck(std::function<StartVerdict(qint64 maxSteps)> check) { m_startCheck = std::move(check); }
    // The check's refusal goes when what it was about has been fixed.
    void dropStartRefusal() { dropBannerIf(BannerCause::Refused); }

public slots:
    // Starts a run of the document's project (a copy: edits during the run do not change it).
    // maxSteps > 0 stops after that many steps. Refused (with a message in the banner) while a run
    // is active or when the device selection is not valid.
    void startTraining(qint64 maxSteps = 0);
    void togglePause();
    void stopTraining();
    void saveCheckpointNow();
    // Writes every chart to <folder>/<chart>.png and .csv; returns false if one could not be written.
    bool exportCharts(const QString& folder);

signals:
    // Start was refused (a run is active, the device selection, the data check): `reason` is in the banner too.
    void startRefused(const QString& reason);
    // Emitted when a run has ended, whether it finished, was stopped or failed.
    void trainingFinished();
    void trainingStarted();
    void stateChanged(strata::ui::TrainingDashboard::State state);

private:
    void buildUi();
    void setState(State state);
    void updateButtons();
    void showError(const QString& message);
    void clearError();
    // What the banner is about, so that it goes when that does (issue 34: no stale refusals).
    enum class BannerCause { None, RunActive, Devices, Refused, RunError };
    void refuseStart(const QString& reason, BannerCause cause);
    void dropBannerIf(BannerCause cause);
    void flush();
    void updateTimes();
    void clearCharts();
    // Another project (or a copy): when idle, the previous project's curves and status go, and its last run shows.
    void projectChanged();
    void ensureDeviceSeries(const QString& device);

    void onRunStarted(const QString& device);
    void onStep(const StepEvent& e);
    void onEpoch(const EpochEvent& e);
    void onTelemetry(const TelemetryEvent& e);
    void onCheckpoint(const CheckpointEvent& e);
    void onFinished(const FinishedEvent& e);
    void onError(const QString& message);
    void onLog(const QString& message);
    void onRunEnded(bool ok);

    ProjectDocument* m_doc;
    QPointer<DevicePicker> m_picker;
    RunHistory* m_recording = nullptr;  // where the active run's points go (the document's history at its start)
    qint64 m_runId = 0;
    QString m_runFolder;
    WritableCheck m_writable = folderWritable;
    FinishedEvent m_finished;
    QString m_errorMessage;
    QThread* m_thread = nullptr;
    EngineWorker* m_worker = nullptr;
    State m_state = State::Idle;

    QPushButton *m_start = nullptr, *m_pause = nullptr, *m_stop = nullptr, *m_save = nullptr;
    QLabel *m_status = nullptr, *m_elapsed = nullptr, *m_eta = nullptr, *m_log = nullptr;
    QLabel* m_comm = nullptr;  // data parallel: replicas, all-reduce time, hidden share (hidden otherwise)
    QFrame* m_banner = nullptr;
    QLabel* m_bannerText = nullptr;
    BannerCause m_bannerCause = BannerCause::None;
    // The run to record once it has a step (recordRun).
    struct PendingRecord {
        Project project;
        QString path, device, runFolder;
        QDateTime started;
    };
    std::optional<PendingRecord> m_toRecord;
    void recordRun();
    std::function<StartVerdict(qint64)> m_startCheck;
    TaskMetricsView* m_taskView = nullptr;
    QHash<QString, ChartPanel*> m_charts;       // by chart name
    QHash<QString, ChartPanel*> m_seriesChart;  // by series name
    QTimer* m_flushTimer = nullptr;

    // Filled by the queued signals, drained by flush().
    struct EpochPoint {
        EpochEvent event;
        double x = 0;  // global step at the end of the epoch
    };
    QVector<StepEvent> m_pendingSteps;
    QVector<EpochPoint> m_pendingEpochs;
    QVector<TelemetryEvent> m_pendingTelemetry;

    QElapsedTimer m_clock;
    qint64 m_pausedMs = 0, m_pausedSince = -1;  // paused time is not counted as elapsed
    qint64 m_maxSteps = 0;
    int m_epochs = 0;
    StepEvent m_lastStep;
    bool m_haveStep = false;
    int64_t m_lastStepSeen = 0;
    QString m_runDevice;
    QString m_finalStatus;
    bool m_runFailed = false;
};

}  // namespace strata::ui

Q_DECLARE_METATYPE(strata::ui::TrainingDashboard::State)
