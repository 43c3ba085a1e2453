// LrFinderDialog: Train > Find Learning Rate. Runs the learning-rate range test (core/train/LrFinder) on a worker
// thread from a copy of the project's initial weights, draws the loss (raw and smoothed) against the learning
// rate on a log axis as the points arrive, marks the suggestions (steepest descent of the smoothed loss, and the
// minimum / 10) and applies either with one click as an undoable edit of training.learning_rate. Closing the
// dialog stops the sweep; the project's model and checkpoints are never written.
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QMutex>
#include <QVector>
#include <atomic>

#include "core/train/LrFinder.h"

class QCustomPlot;
class QCPItemStraightLine;
class QLabel;
class QPushButton;
class QTimer;

namespace strata::ui {

class ProjectDocument;

class LrFinderDialog : public QDialog {
    Q_OBJECT
public:
    explicit LrFinderDialog(ProjectDocument* doc, QWidget* parent = nullptr);
    ~LrFinderDialog() override;

    // Starts a sweep of the document's project; false while one runs.
    bool start(const LrFindOptions& options = {});
    bool isRunning() const { return m_watcher.isRunning(); }
    void cancel() { m_cancel = true; }
    // Blocks until the sweep ends (tests, shutdown); its finished signal still comes from the event loop.
    void wait() { m_watcher.waitForFinished(); }
    const LrFindResult& result() const { return m_result; }
    int plottedPoints() const;
    QPushButton* applySteepestButton() const { return m_applySteepest; }
    QPushButton* applyMinimumButton() const { return m_applyMinimum; }

signals:
    void finished();
    void failed(const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    struct Outcome {
        LrFindResult result;
        QString error;
    };
    void takePoints();
    void showResult();
    void apply(double learningRate);

    ProjectDocument* m_doc;
    QCustomPlot* m_plot;
    QLabel* m_status;
    QPushButton *m_applySteepest, *m_applyMinimum, *m_rerun;
    QCPItemStraightLine *m_steepestLine = nullptr, *m_minimumLine = nullptr;
    QTimer* m_timer;
    QFutureWatcher<Outcome> m_watcher;
    std::atomic<bool> m_cancel{false};
    // Points from the worker, taken by the GUI timer in batches.
    QMutex m_mutex;
    QVector<LrFindPoint> m_pending;
    LrFindResult m_result;
};

}  // namespace strata::ui
