// SweepPanel: the project's hyperparameter sweep (core/history/Sweep) in the workbench: "Edit sweep" defines it
// (SweepEditor), "Run sweep" runs or resumes it on a worker thread, "Parallel" trials at once (each trial a run
// in the run history, so the Runs view lists them; Stop stops the running trials), the trial table lists every
// trial sorted by the metric, a scatter plot (QCustomPlot) shows the chosen parameter against the metric (a log
// axis when the values span more than a factor of 10), and "Apply best trial" gives the project the best
// trial's values (one undoable edit). The status line describes the open project's sweep.
#pragma once

#include <QFutureWatcher>
#include <QPointer>
#include <QWidget>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/history/Sweep.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace strata::ui {

class ProjectDocument;
class SweepEditor;

class SweepPanel : public QWidget {
    Q_OBJECT
public:
    explicit SweepPanel(ProjectDocument* doc, QWidget* parent = nullptr);
    ~SweepPanel() override;

    void setDatabase(const QString& path) { m_database = path; }
    // The state file of the document's sweep (beside the project file).
    QString statePath() const;
    // Shows the results in the state file; false when there is none.
    bool loadResults();
    void setResults(const std::vector<history::TrialResult>& results, const QString& metric, bool maximize);
    // False when the project has no saved file or sweep, the Parallel field is refused, or one runs already.
    bool start();
    // Stops the running trials (their runs end as stopped, not done, so a later start redoes them) and starts
    // no further one.
    void stop();
    bool isRunning() const { return m_watcher.isRunning(); }
    // Opens the sweep editor on the project's sweep (non-modal); OK writes its definition to the project.
    SweepEditor* editSweep();
    SweepEditor* editor() const;
    // Sets the project's settings to the best finished trial's values (one undoable edit); false, with the
    // reason in the status line, when no trial has finished.
    bool applyBestTrial();
    QPushButton* applyBestButton() const { return m_applyBest; }
    void waitForFinished() { m_watcher.waitForFinished(); }

    QTableWidget* table() const { return m_table; }
    QComboBox* parameterBox() const { return m_parameter; }
    QSpinBox* parallelBox() const { return m_parallel; }  // trials at once (worker threads)
    // The Parallel field's limit: this machine's threads. A number outside 1..maxParallel() is refused with
    // the reason under the field, and Run sweep does not start.
    static int maxParallel();
    bool checkParallel() const;
    QCustomPlot* plot() const { return m_plot; }
    int plottedPoints() const;
    QString statusText() const;

signals:
    void sweepFinished();

private:
    void replot();
    // The status line for the open project's sweep (none defined, its trials, a definition that does not check).
    void describeSweep();

    ProjectDocument* m_doc;
    QString m_database;
    QPushButton *m_editButton, *m_runButton, *m_stopButton, *m_applyBest;
    QPointer<SweepEditor> m_editor;
    QLabel* m_status;
    QSpinBox* m_parallel;
    QTableWidget* m_table;
    QComboBox* m_parameter;
    QCustomPlot* m_plot;
    std::vector<history::TrialResult> m_results;
    QString m_metric = QStringLiteral("val_acc");
    QFutureWatcher<QString> m_watcher;
    std::atomic<bool> m_stop{false};
    std::mutex m_trainersMutex;
    std::vector<Trainer*> m_trainers;  // the running trials' trainers, by worker slot
};

}  // namespace strata::ui
