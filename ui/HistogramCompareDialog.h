// HistogramCompareDialog: the Runs view's "Compare histograms". For two or more runs, one tensor's weight or
// gradient histogram at the last sample (or the last at or before a chosen step) of each run, re-binned onto one
// value range (core/train/ParameterHistograms: compareRunHistograms) and overlaid, one line per run in its own
// colour; runs without histograms.jsonl, or without that tensor or step, are named with the reason. The files are
// read on a pool thread when the dialog opens; re-binning a few histograms is cheap enough for the GUI thread.
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QPair>
#include <QVector>
#include <vector>

#include "core/train/ParameterHistograms.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;

namespace strata::ui {

class HistogramCompareDialog : public QDialog {
    Q_OBJECT
public:
    // runs: (label, run folder) in the order shown.
    explicit HistogramCompareDialog(const QVector<QPair<QString, QString>>& runs, QWidget* parent = nullptr);
    ~HistogramCompareDialog() override;

    bool isLoading() const { return !m_loaded; }
    QStringList tensors() const;
    // step: 0-based; -1: each run's last sample.
    void select(const QString& tensor, bool gradients, qint64 step = -1);
    const HistogramComparison& comparison() const { return m_comparison; }
    // One line per run: the step compared, or why it has nothing to compare.
    QString notesText() const;
    QCustomPlot* plot() const { return m_plot; }

signals:
    void loaded();

private:
    void showLoaded();
    void refresh();

    QComboBox *m_tensor, *m_kind;
    QSpinBox* m_step;
    QCustomPlot* m_plot;
    QLabel* m_notes;
    QFutureWatcher<std::vector<RunHistograms>> m_watcher;
    std::vector<RunHistograms> m_runs;
    HistogramComparison m_comparison;
    bool m_loaded = false;  // the files are read and shown
};

}  // namespace strata::ui
