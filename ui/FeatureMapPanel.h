// FeatureMapPanel: the Feature maps dock. It follows the canvas selection and shows what the Predict dock's model does
// at that node: for a Conv2D its filters (each averaged over its input channels, greyscale over its own range) and its
// feature maps for the Predict dock's current sample (one heat-coloured tile per channel, each over its own min..max);
// for any other node with [C, H, W] outputs the maps alone; and for every node a histogram of its outputs over
// validation samples. The numbers come from core/infer/Activations, on a pool thread, one job at a time, and only while
// the dock is shown; a job for a selection or sample that has changed meanwhile is dropped when it ends.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QVector>
#include <QWidget>
#include <map>
#include <memory>
#include <string>

#include "core/infer/Activations.h"

class QCustomPlot;
class QCPBars;
class QGroupBox;
class QLabel;
class QPushButton;

namespace strata::ui {

class GraphScene;
class PredictPanel;
class ProjectDocument;

class FeatureMapPanel : public QWidget {
    Q_OBJECT
public:
    // Validation samples a histogram runs over (spread evenly over the split).
    static constexpr int kHistogramSamples = 256;
    static constexpr int kHistogramBins = 40;

    FeatureMapPanel(ProjectDocument* doc, GraphScene* scene, PredictPanel* predict, QWidget* parent = nullptr);
    ~FeatureMapPanel() override;

    // What is shown (tests): the node, the tiles of each grid, the histogram's bars and the values they count, and
    // the line that says what to do when something is missing (empty when nothing is).
    QString nodeName() const { return m_shownNode; }
    int filterCount() const { return int(m_filterTiles.size()); }
    int featureMapCount() const { return int(m_mapTiles.size()); }
    QImage featureMap(int channel) const { return m_mapTiles.value(channel); }
    int histogramBins() const { return int(m_histogram.values.counts.size()); }
    int64_t histogramCount() const { return m_histogram.values.count; }
    int64_t histogramSamples() const { return m_histogram.samples; }
    QString messageText() const;
    bool isComputing() const { return m_running != nullptr; }
    // Starts a job for the current selection and sample if the view is stale, and waits for the jobs to end (tests).
    void refreshNow();

signals:
    // A job's result is on screen.
    void updated();

private:
    struct Job;
    struct Result;
    void markStale();
    void refresh();
    void finished();
    void showResult(const Result& r);
    void showMessage(const QString& text);
    void layoutGrids();
    void clearViews();
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

    ProjectDocument* m_doc;
    GraphScene* m_scene;
    PredictPanel* m_predict;

    QLabel* m_header = nullptr;
    QLabel* m_message = nullptr;
    QPushButton* m_loadRun = nullptr;
    QGroupBox* m_filterBox = nullptr;
    QGroupBox* m_mapBox = nullptr;
    QGroupBox* m_histogramBox = nullptr;
    QLabel* m_filterView = nullptr;
    QLabel* m_mapView = nullptr;
    QCustomPlot* m_plot = nullptr;
    QCPBars* m_bars = nullptr;
    QLabel* m_histogramInfo = nullptr;

    bool m_stale = true;
    quint64 m_generation = 0;  // bumped by every change of selection, sample or model
    QFutureWatcher<void> m_watcher;
    std::shared_ptr<Result> m_running;
    // Kept between jobs for the same model (used by one job at a time): the compiled probe, and the histograms
    // already computed, by node name.
    std::shared_ptr<const ExportModel> m_probeModel;
    std::shared_ptr<ActivationProbe> m_probe;
    std::map<std::string, NodeHistogram> m_histograms;

    QString m_shownNode;
    QVector<QImage> m_filterTiles, m_mapTiles;
    NodeHistogram m_histogram;
};

}  // namespace strata::ui
