// HistogramPanel: the Histograms dock. Weight and gradient histograms of the current run (sampled on the engine
// thread every N steps: core/train/ParameterHistograms) as a heat map per tensor: steps across, values up, the
// share of the tensor's values in each cell as colour; a tensor and "values" or "gradients" are chosen above it.
// Below, the layers with a verdict (vanishing or exploding gradient, dead ReLU), which the canvas shows as badges
// (LayerHealthOverlay). Samples are only stored as they arrive; the heat map is re-binned on a pool thread, and
// only while the dock is visible, so a closed dock costs the GUI thread nearly nothing.
#pragma once

#include <QFutureWatcher>
#include <QVector>
#include <QWidget>
#include <memory>

#include "core/train/ParameterHistograms.h"

class QComboBox;
class QCustomPlot;
class QCPColorMap;
class QLabel;
class QTimer;

namespace strata::ui {

class HistogramPanel : public QWidget {
    Q_OBJECT
public:
    explicit HistogramPanel(QWidget* parent = nullptr);
    ~HistogramPanel() override;

    void clear();
    void addReport(std::shared_ptr<const HistogramReport> report);
    // The samples of a finished run, from its folder's histograms.jsonl (replaces what is shown).
    void setSamples(const std::vector<HistogramSample>& samples);
    int sampleCount() const { return int(m_samples.size()); }
    QStringList tensors() const;
    void selectTensor(const QString& name, bool gradients);
    // The heat map shown: columns (samples) and rows, after the pool thread's last re-binning.
    int heatMapColumns() const { return m_shown.columns; }
    const HeatMap& heatMapShown() const { return m_shown; }
    // Re-bins now if the view is stale (tests; the timer does it every half second while visible).
    void refreshNow();
    bool isComputing() const { return m_watcher.isRunning(); }

signals:
    // The newest sample's verdicts (the canvas badges follow them).
    void healthChanged(const std::vector<strata::LayerHealth>& health);

private:
    void refresh();
    void show(const HeatMap& map, const std::vector<int64_t>& steps);
    void showHealth(const std::vector<LayerHealth>& health);

    QComboBox *m_tensor, *m_kind;
    QCustomPlot* m_plot;
    QCPColorMap* m_map;
    QLabel *m_health, *m_info;
    QTimer* m_timer;
    std::vector<HistogramSample> m_samples;
    bool m_stale = false;
    struct Job {
        HeatMap map;
        std::vector<int64_t> steps;
    };
    QFutureWatcher<Job> m_watcher;
    HeatMap m_shown;
};

}  // namespace strata::ui
