// TaskMetricsView: the dashboard's view of a run's task when it is not classification (core/graph/Task.h): a chart
// of the task's validation metrics per epoch (regression MAE, RMSE and R^2, each target's R^2 with several;
// multi-label micro and macro F1; image to image PSNR) and, for image to image, a strip of a few validation images
// each epoch: input, output and target, one row each. Hidden for classification, whose accuracy the dashboard's
// own charts show. The TrainingDashboard owns one and hands it every epoch.
#pragma once

#include <QImage>
#include <QVector>
#include <QWidget>

#include "core/graph/Settings.h"
#include "core/train/TrainingObserver.h"

class QLabel;
class QGridLayout;

namespace strata::ui {

class ChartPanel;

class TaskMetricsView : public QWidget {
    Q_OBJECT
public:
    explicit TaskMetricsView(QWidget* parent = nullptr);

    // The task of the run about to start (or shown): hides the view for classification, and clears it.
    void setTask(TaskKind task);
    TaskKind task() const { return m_task; }
    // One epoch's metrics at x (the dashboard's step axis) and, image to image, its strip.
    void addEpoch(const EpochEvent& e, double x);
    void clear();

    ChartPanel* chart() const { return m_chart; }
    // The metrics plotted, by the name the engine gives them ("r2", "micro_f1", "psnr").
    QStringList seriesNames() const;
    // The strip's images: row 0 input, 1 output, 2 target; null when there is none.
    QImage stripImage(int row, int column) const;
    int stripColumns() const { return m_stripColumns; }
    // Raw pixel planes ([C, H, W], C 1 or 3, values 0..255, clamped) as an image.
    static QImage planesToImage(const float* values, const std::vector<int64_t>& dims);

private:
    void showStrip(const ImageStrip& strip);
    void clearStrip();
    // Which of an epoch's metrics are plotted.
    bool plotted(const std::string& name) const;

    TaskKind m_task = TaskKind::Classification;
    ChartPanel* m_chart = nullptr;
    QWidget* m_strip = nullptr;
    QGridLayout* m_stripGrid = nullptr;
    QVector<QVector<QLabel*>> m_stripLabels;  // [row][column]
    QVector<QVector<QImage>> m_stripImages;
    int m_stripColumns = 0;
};

}  // namespace strata::ui
