// RunsPanel: the Runs view. Every run in the run history (core/history/RunStore: the workbench's and
// strata-train's) in a sortable, filterable table (RunsModel, a QAbstractTableModel: one row object per
// run, no widget per cell, so 1,000 runs load and sort in milliseconds). Selecting runs overlays their
// curves in the dashboard's loss and accuracy charts, one colour per run, each legend entry naming the
// settings that differ between the selected runs; two selected runs can be diffed; a run can be renamed,
// annotated, deleted, and its project opened exactly as it ran. With a document, the view lists the open
// project's runs (by its id, or its path for runs recorded without one) unless "All projects" is ticked, and
// another project's overlays go when another project opens. Runs of tasks other than classification show their
// last epoch's metrics in a column, overlay their summary metrics per epoch on the dashboard's task chart
// (TaskMetricsView), and the diff of two runs lists their metrics side by side.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/history/RunStore.h"

class QCheckBox;
class QLineEdit;
class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace strata::ui {

class ProjectDocument;
class HistogramCompareDialog;
class TrainingDashboard;

class RunsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Id,
        Name,
        Project,
        Started,
        Device,
        Source,
        Status,
        Epochs,
        BestValAcc,
        FinalValAcc,
        FinalValLoss,
        ValMetrics,  // tasks other than classification: the last epoch's summary metrics ("r2 0.87, mae 2.1, ...")
        SamplesPerSecond,
        Duration,
        Notes,
        ColumnCount
    };
    using QAbstractTableModel::QAbstractTableModel;
    void setRuns(std::vector<history::RunRecord> runs);
    const history::RunRecord& run(int row) const { return m_runs[size_t(row)]; }
    int rowOfRun(qint64 id) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    // DisplayRole: the text; Qt::UserRole: the value to sort by (numbers as numbers, missing ones last).
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<history::RunRecord> m_runs;
};

class RunsPanel : public QWidget {
    Q_OBJECT
public:
    explicit RunsPanel(QWidget* parent = nullptr);
    ~RunsPanel() override;

    // Opens the run history (the dashboard's database); empty: none, the panel says so.
    bool setDatabase(const QString& path);
    QString databasePath() const;
    void setDashboard(TrainingDashboard* dashboard) { m_dashboard = dashboard; }
    // The open project: the view lists its runs only (unless allProjectsCheck is ticked) and follows it.
    void setDocument(ProjectDocument* doc);
    QCheckBox* allProjectsCheck() const { return m_allProjects; }

    RunsModel* model() const { return m_model; }
    QSortFilterProxyModel* proxy() const { return m_proxy; }
    QTableView* table() const { return m_table; }
    void setFilterText(const QString& text);
    QString statusText() const;
    void selectRuns(const QList<qint64>& ids);
    QList<qint64> selectedRuns() const;

    // The selected runs' curves over the dashboard charts; returns the legend labels, in selection order.
    // Blocking (tests, benchmarks); selecting runs or the Overlay button use the background load below.
    QStringList overlaySelected();
    // Loads the selected runs' curves on a pool thread (QtConcurrent), the status line saying so, then
    // overlays them and emits overlayLoaded; a newer selection discards an older load.
    void overlaySelectedInBackground();
    void clearOverlay();
    // "key: A -> B" lines naming exactly the settings that differ between two runs.
    QStringList settingsDiff(qint64 a, qint64 b) const;
    // Tasks other than classification: "name: A -> B" for every validation metric of the two runs' last epochs
    // (R^2, MAE, F1s, each label's precision...), "-" where a run lacks one; the diff dialog shows them under the
    // settings. Empty when neither run recorded any.
    QStringList metricsDiff(qint64 a, qint64 b) const;
    bool renameRun(qint64 id, const QString& name);
    bool annotateRun(qint64 id, const QString& notes);
    bool deleteRuns(const QList<qint64>& ids);
    // Two or more selected runs' weight or gradient histograms overlaid (the Compare histograms button); the
    // dialog (non-modal, deleted when closed), or null with fewer than two runs selected.
    HistogramCompareDialog* compareHistograms();
    // The project JSON a run trained (emits openProjectRequested); false when the run has none.
    bool openRunProject(qint64 id);

public slots:
    void reload();

signals:
    void openProjectRequested(const strata::Project& project, const QString& title);
    void overlayLoaded(const QStringList& labels);

private:
    struct OverlayRun {
        qint64 id = 0;
        QString label;
        QVector<double> x, loss, epochX, valAccuracy;
        // Tasks other than classification: each summary metric (no per-label ones) per epoch, at epochX.
        std::vector<std::pair<QString, QVector<double>>> taskMetrics;
    };
    using Overlay = std::vector<OverlayRun>;
    static Overlay loadOverlay(const history::RunStore& store, const QList<qint64>& ids);
    QStringList applyOverlay(const Overlay& overlay);
    void showDiffDialog();
    void updateButtons();

    std::unique_ptr<history::RunStore> m_store;
    RunsModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QTableView* m_table;
    QLineEdit* m_filter;
    QCheckBox* m_allProjects;
    ProjectDocument* m_doc = nullptr;
    QLabel* m_status;
    QPushButton *m_overlayButton, *m_diffButton, *m_renameButton, *m_notesButton, *m_deleteButton, *m_openButton,
        *m_compareButton;
    TrainingDashboard* m_dashboard = nullptr;
    QStringList m_overlaySeries;      // "<chart>|<series>" of the current overlay
    quint64 m_overlayGeneration = 0;  // bumped by every overlay request; a background load applies only if current
};

}  // namespace strata::ui
