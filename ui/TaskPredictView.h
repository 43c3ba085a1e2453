// TaskPredictView: the Predict dock's view of a model whose task is not classification (core/graph/Task.h), a tab
// of its own beside the Predict panel's. It runs the model over the project's validation split on a worker thread
// and shows, for regression, predicted against actual (a scatter with the diagonal) and the residuals' histogram
// for the chosen target, with MAE, RMSE and R^2 in the data's units; for multi-label, each label's precision,
// recall and F1 at a threshold the user sets and its best threshold on validation, and one sample's probability
// per label; for image to image, one sample's input, output and target with its PSNR. The numbers are
// core/train/TaskMetrics', as the dashboard's and strata-train's.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QString>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/graph/Project.h"
#include "core/train/TaskMetrics.h"

class QComboBox;
class QCustomPlot;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QStackedWidget;
class QTableWidget;

namespace strata::ui {

class TaskPredictView : public QWidget {
    Q_OBJECT
public:
    explicit TaskPredictView(QWidget* parent = nullptr);
    ~TaskPredictView() override;

    // Loads `modelFile` (a checkpoint or export) and evaluates it on the validation split of its project's dataset
    // (relative paths against `projectPath`), on a worker thread; ready() when done. A classification model only
    // clears the view.
    void setModel(const QString& modelFile, const QString& projectPath);
    void clear();
    bool isBusy() const;
    // Blocks until the evaluation started by setModel has finished and is shown (tests, scripted reviews).
    void waitForResult();

    TaskKind task() const;
    QString errorText() const;
    QString metricsText() const;
    // Regression: the chosen target's scatter (predicted against actual, data units) and residual histogram.
    QCustomPlot* scatterPlot() const { return m_scatter; }
    QCustomPlot* residualPlot() const { return m_residuals; }
    QComboBox* targetPicker() const { return m_target; }
    // Multi-label: the per-label table (label, precision, recall, F1, best threshold) and the sample's table
    // (label, probability, truth); the threshold the table uses.
    QTableWidget* labelTable() const { return m_labels; }
    QTableWidget* sampleTable() const { return m_sampleProbabilities; }
    QDoubleSpinBox* thresholdEdit() const { return m_threshold; }
    QSpinBox* sampleEdit() const { return m_sample; }
    // Image to image: the sample's images (0 input, 1 output, 2 target).
    QImage sampleImage(int which) const;

signals:
    void ready(bool ok);

private:
    struct Result;
    void finish();
    void showRegression();
    void showMultiLabel();
    void showSample();

    QFutureWatcher<void>* m_watcher = nullptr;
    std::shared_ptr<Result> m_pending, m_result;
    QLabel* m_status = nullptr;
    QLabel* m_metrics = nullptr;
    QStackedWidget* m_pages = nullptr;
    QComboBox* m_target = nullptr;
    QCustomPlot* m_scatter = nullptr;
    QCustomPlot* m_residuals = nullptr;
    QDoubleSpinBox* m_threshold = nullptr;
    QTableWidget* m_labels = nullptr;
    QWidget* m_sampleRow = nullptr;
    QSpinBox* m_sample = nullptr;
    QTableWidget* m_sampleProbabilities = nullptr;
    QLabel* m_images[3] = {nullptr, nullptr, nullptr};
    QImage m_sampleImages[3];
    QString m_error;
};

}  // namespace strata::ui
