// FeatureMapPanel: see FeatureMapPanel.h.
#include "ui/FeatureMapPanel.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <exception>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/infer/Activations.h"
#include "ui/GraphScene.h"
#include "ui/PredictPanel.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

// Pixels a map or filter is scaled up to, by the nearest whole factor: 28 x 28 maps to 56, 3 x 3 filters to 30.
constexpr int kMapTile = 56, kFilterTile = 30;
constexpr int kGap = 3;

QString q(const std::string& s) { return QString::fromStdString(s); }

// Black, purple, red, yellow, white: dark for the channel's minimum, white for its maximum.
QRgb heat(double t) {
    static const int stops[5][3] = {{0, 0, 0}, {90, 20, 130}, {210, 40, 40}, {250, 200, 40}, {255, 255, 255}};
    t = std::clamp(t, 0.0, 1.0) * 4.0;
    const int i = std::min(3, int(t));
    const double f = t - i;
    auto mix = [&](int c) { return int(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c]))); };
    return qRgb(mix(0), mix(1), mix(2));
}

// One h x w plane as a picture over its own finite min..max (a constant plane: mid-level), scaled up by a whole
// factor so small maps stay readable; greyscale or heat colours.
QImage planeImage(const float* v, int h, int w, bool heatColours, int tile) {
    float lo = 0, hi = 0;
    bool any = false;
    for (int i = 0; i < h * w; ++i)
        if (std::isfinite(v[i])) {
            lo = any ? std::min(lo, v[i]) : v[i];
            hi = any ? std::max(hi, v[i]) : v[i];
            any = true;
        }
    QImage image(w, h, QImage::Format_RGB32);
    for (int r = 0; r < h; ++r) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
        for (int c = 0; c < w; ++c) {
            const float x = v[r * w + c];
            const double t = !std::isfinite(x) ? 0.0 : hi > lo ? double(x - lo) / double(hi - lo) : 0.5;
            const int g = int(std::lround(255 * t));
            line[c] = heatColours ? heat(t) : qRgb(g, g, g);
        }
    }
    const int side = std::max(h, w);
    const int scale = std::max(1, (tile + side / 2) / side);
    return scale == 1 ? image : image.scaled(w * scale, h * scale, Qt::IgnoreAspectRatio, Qt::FastTransformation);
}

// Tiles in rows that fit `width`, in channel order (left to right, then down).
QPixmap grid(const QVector<QImage>& tiles, int width) {
    if (tiles.isEmpty()) return {};
    const int tw = tiles.front().width(), th = tiles.front().height();
    const int columns = std::clamp((width - kGap) / (tw + kGap), 1, int(tiles.size()));
    const int rows = (int(tiles.size()) + columns - 1) / columns;
    QPixmap pixmap(kGap + columns * (tw + kGap), kGap + rows * (th + kGap));
    pixmap.fill(QColor(60, 60, 60));
    QPainter painter(&pixmap);
    for (int i = 0; i < tiles.size(); ++i)
        painter.drawImage(kGap + (i % columns) * (tw + kGap), kGap + (i / columns) * (th + kGap), tiles[i]);
    return pixmap;
}

QScrollArea* scrolled(QLabel* label, QWidget* parent) {
    auto* area = new QScrollArea(parent);
    area->setWidget(label);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    label->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    return area;
}

}  // namespace

// What a job needs, copied or shared on the GUI thread: nothing in it changes while the job runs.
struct FeatureMapPanel::Job {
    quint64 generation = 0;
    std::string node;
    std::shared_ptr<const ExportModel> model;
    std::shared_ptr<const DataSplit> samples;
    std::vector<float> input;
    QString sampleText;                      // "validation sample 3, true class: Bag"
    std::shared_ptr<ActivationProbe> probe;  // null: compile one
    bool histogramKnown = false;
};

struct FeatureMapPanel::Result {
    Job job;
    std::string type;
    QString error;
    QVector<QImage> filterTiles, mapTiles;
    Shape filterShape, mapShape;
    NodeHistogram histogram;  // samples 0: none
    bool histogramFresh = false;
    // Raised when the selection, sample or model changes: the job ends between two layers (its result is dropped).
    std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
};

FeatureMapPanel::FeatureMapPanel(ProjectDocument* doc, GraphScene* scene, PredictPanel* predict, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_scene(scene), m_predict(predict) {
    setObjectName(QStringLiteral("featureMapPanel"));
    m_header = new QLabel(this);
    m_header->setTextFormat(Qt::RichText);
    m_header->setWordWrap(true);
    m_message = new QLabel(this);
    m_message->setObjectName(QStringLiteral("featureMapMessage"));
    m_message->setWordWrap(true);
    m_loadRun = new QPushButton(tr("Load the project's model"), this);
    m_loadRun->setObjectName(QStringLiteral("featureMapLoadRun"));
    m_loadRun->setToolTip(tr("Loads the run picked in the Predict dock (its best checkpoint)"));
    connect(m_loadRun, &QPushButton::clicked, m_predict, [this] { m_predict->loadModel(); });

    m_filterView = new QLabel;
    m_mapView = new QLabel;
    m_filterBox = new QGroupBox(tr("Filters"), this);
    (new QVBoxLayout(m_filterBox))->addWidget(scrolled(m_filterView, m_filterBox));
    m_mapBox = new QGroupBox(tr("Feature maps"), this);
    (new QVBoxLayout(m_mapBox))->addWidget(scrolled(m_mapView, m_mapBox));
    m_histogramBox = new QGroupBox(tr("Activations"), this);
    m_plot = new QCustomPlot(m_histogramBox);
    m_plot->setMinimumSize(220, 140);
    m_bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
    m_bars->setPen(Qt::NoPen);
    m_bars->setBrush(QColor(40, 110, 190));
    m_plot->xAxis->setLabel(tr("output value"));
    m_plot->yAxis->setLabel(tr("count"));
    m_histogramInfo = new QLabel(m_histogramBox);
    m_histogramInfo->setWordWrap(true);
    auto* hl = new QVBoxLayout(m_histogramBox);
    hl->addWidget(m_plot, 1);
    hl->addWidget(m_histogramInfo);

    auto* messageRow = new QHBoxLayout;
    messageRow->addWidget(m_message, 1);
    messageRow->addWidget(m_loadRun);
    auto* views = new QHBoxLayout;
    views->addWidget(m_filterBox, 2);
    views->addWidget(m_mapBox, 4);
    views->addWidget(m_histogramBox, 3);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_header);
    layout->addLayout(messageRow);
    layout->addLayout(views, 1);

    connect(&m_watcher, &QFutureWatcher<void>::finished, this, &FeatureMapPanel::finished);
    connect(m_scene, &QGraphicsScene::selectionChanged, this, &FeatureMapPanel::markStale);
    connect(m_predict, &PredictPanel::modelLoaded, this, &FeatureMapPanel::markStale);
    connect(m_predict, &PredictPanel::predictionReady, this, &FeatureMapPanel::markStale);
    // A renamed node, another project (the Predict dock has dropped its model by now: it was connected first).
    connect(m_doc, &ProjectDocument::analysisChanged, this, &FeatureMapPanel::markStale);
    connect(m_doc, &ProjectDocument::identityChanged, this, &FeatureMapPanel::markStale);
    clearViews();
    showMessage({});
}

FeatureMapPanel::~FeatureMapPanel() { m_watcher.waitForFinished(); }

QString FeatureMapPanel::messageText() const { return m_message->isHidden() ? QString() : m_message->text(); }

void FeatureMapPanel::markStale() {
    ++m_generation;
    if (m_running) *m_running->cancel = true;
    m_stale = true;
    refresh();
}

void FeatureMapPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    refresh();
}

void FeatureMapPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    layoutGrids();
}

void FeatureMapPanel::refreshNow() {
    for (;;) {
        m_watcher.waitForFinished();
        QCoreApplication::processEvents();  // delivers finished(), which may start the next job
        if (m_running) continue;
        if (!m_stale || !isVisible()) return;
        refresh();
    }
}

void FeatureMapPanel::showMessage(const QString& text) {
    m_message->setText(text);
    m_message->setVisible(!text.isEmpty());
    m_loadRun->setVisible(!text.isEmpty() && !m_predict->hasModel() && !m_predict->isBusy());
}

void FeatureMapPanel::clearViews() {
    m_shownNode.clear();
    m_filterTiles.clear();
    m_mapTiles.clear();
    m_histogram = {};
    m_filterBox->hide();
    m_mapBox->hide();
    m_histogramBox->hide();
    m_header->clear();
}

// Only while visible, one job at a time; the selection, sample and model are read here, on the GUI thread.
void FeatureMapPanel::refresh() {
    // m_running, not the watcher: a job whose end has not been delivered yet still holds the probe.
    if (!m_stale || !isVisible() || m_running) return;
    m_stale = false;
    const QList<int> ids = m_scene->selectedNodeIds();
    const Node* node = ids.size() == 1 ? m_doc->graph().node(ids.front()) : nullptr;
    if (!node) {
        clearViews();
        showMessage(ids.size() > 1 ? tr("%1 nodes selected: select one to see inside it.").arg(ids.size())
                                   : tr("Select a node on the canvas to see its filters, feature maps or activations "
                                        "in the model the Predict dock has loaded."));
        return;
    }
    PredictPanel::CurrentSample current = m_predict->currentSample();
    if (!current.model) {
        clearViews();
        showMessage(m_predict->isBusy() ? tr("The Predict dock is loading a model...")
                                        : tr("No trained model: train the project or pick a run in the Predict dock."));
        return;
    }
    if (current.model != m_probeModel) {  // another model: nothing computed for the last one applies
        m_probeModel = current.model;
        m_probe.reset();
        m_histograms.clear();
    }
    Job job;
    job.generation = m_generation;
    job.node = node->name;
    job.model = current.model;
    job.samples = current.samples;
    job.input = std::move(current.input);
    job.sampleText = current.text;
    job.probe = m_probe;
    job.histogramKnown = m_histograms.count(node->name) > 0;
    auto result = std::make_shared<Result>();
    result->job = std::move(job);
    if (result->job.histogramKnown) result->histogram = m_histograms.at(node->name);
    m_running = result;
    m_header->setText(tr("<b>%1</b>: computing...").arg(q(node->name).toHtmlEscaped()));
    m_watcher.setFuture(QtConcurrent::run([result] {
        Result& r = *result;
        const Job& j = r.job;
        try {
            if (!r.job.probe) r.job.probe = std::make_shared<ActivationProbe>(*j.model);
            ActivationProbe& probe = *r.job.probe;
            probe.setInterruptFlag(r.cancel.get());
            // The probe outlives this job's flag: unset on every way out.
            const std::unique_ptr<ActivationProbe, void (*)(ActivationProbe*)> unset(
                &probe, [](ActivationProbe* p) { p->setInterruptFlag(nullptr); });
            r.type = probe.node(j.node).type;
            if (!j.input.empty() && int64_t(j.input.size()) == probe.inputShape().numel()) {
                const NodeActivation a = probe.captureOne(j.input.data(), j.node);
                r.mapShape = a.shape;
                if (a.shape.rank() == 3) {
                    const int h = int(a.shape[1]), w = int(a.shape[2]);
                    for (int64_t c = 0; c < a.shape[0]; ++c)
                        r.mapTiles << planeImage(a.values.data() + c * h * w, h, w, true, kMapTile);
                }
            }
            if (r.type == "Conv2D") {
                const ConvFilters f = convFilters(*j.model, j.node);
                r.filterShape = Shape{f.out, f.in, f.kh, f.kw};
                for (int64_t k = 0; k < f.out; ++k)
                    r.filterTiles << planeImage(filterMeanOverInputs(f, k).data(), int(f.kh), int(f.kw), false,
                                                kFilterTile);
            }
            if (!j.histogramKnown && j.samples->count > 0) {
                // Samples spread evenly over the split, so a split sorted by class still shows every class.
                const int64_t n = std::min<int64_t>(kHistogramSamples, j.samples->count);
                const int64_t per = j.samples->sampleShape.numel();
                std::vector<float> inputs(size_t(n * per));
                for (int64_t i = 0; i < n; ++i)
                    std::copy_n(j.samples->inputs.begin() + (i * j.samples->count / n) * per, per,
                                inputs.begin() + i * per);
                r.histogram = probe.histogram(inputs.data(), n, j.node, kHistogramBins);
                r.histogramFresh = true;
            }
        } catch (const ModelInterrupted&) {  // dropped: finished() sees the generation has moved on
        } catch (const std::exception& e) {
            r.error = q(e.what());
        }
    }));
}

void FeatureMapPanel::finished() {
    const std::shared_ptr<Result> r = m_running;
    m_running.reset();
    if (!r) return;
    // What the job compiled or counted stays useful for the same model, whether its result is shown or not.
    if (r->job.model == m_probeModel) {
        if (r->job.probe) m_probe = r->job.probe;
        if (r->histogramFresh) m_histograms[r->job.node] = r->histogram;
    }
    if (r->job.generation != m_generation) {  // the selection, sample or model changed meanwhile: drop it
        refresh();
        return;
    }
    showResult(*r);
    emit updated();
    refresh();
}

void FeatureMapPanel::showResult(const Result& r) {
    clearViews();
    const QString node = q(r.job.node).toHtmlEscaped();
    QString model = m_predict->modelRunText();
    if (model.isEmpty()) model = QFileInfo(m_predict->modelSource()).fileName();
    if (!r.error.isEmpty()) {
        m_header->setText(tr("<b>%1</b> in %2").arg(node, model.toHtmlEscaped()));
        showMessage(r.error);
        return;
    }
    m_shownNode = q(r.job.node);
    QString header = tr("<b>%1</b> (%2) in %3").arg(node, q(r.type).toHtmlEscaped(), model.toHtmlEscaped());
    if (!r.mapTiles.isEmpty())
        header += tr(", %1. <small>Each tile over its own range: filters (the mean over input channels) black to "
                     "white, maps dark to bright.</small>")
                      .arg(r.job.sampleText.toHtmlEscaped());
    m_header->setText(header);
    QString message;
    m_filterTiles = r.filterTiles;
    m_mapTiles = r.mapTiles;
    if (!r.filterTiles.isEmpty()) {
        m_filterBox->setTitle(tr("Filters %1").arg(q(r.filterShape.toString())));
        m_filterBox->setToolTip(
            tr("[filters, input channels, height, width]: each tile is a filter averaged over its "
               "%n input channel(s), from its minimum (black) to its maximum (white)",
               nullptr, int(r.filterShape[1])));
        m_filterBox->show();
    }
    if (!r.mapTiles.isEmpty()) {
        m_mapBox->setTitle(tr("Feature maps %1").arg(q(r.mapShape.toString())));
        m_mapBox->setToolTip(tr("One tile per channel, left to right, then down, for %1; each from its minimum (dark) "
                                "to its maximum (bright)")
                                 .arg(r.job.sampleText));
        m_mapBox->show();
    } else if (r.job.input.empty()) {
        message = tr("Pick a sample in the Predict dock to see this node's outputs for it.");
    }
    m_histogram = r.histogram;
    if (r.histogram.samples > 0) {
        const ValueHistogram& h = r.histogram.values;
        QVector<double> keys, values;
        const double width = h.counts.empty() ? 1 : (double(h.hi) - double(h.lo)) / double(h.counts.size());
        for (size_t i = 0; i < h.counts.size(); ++i) {
            keys << double(h.lo) + (double(i) + 0.5) * width;
            values << double(h.counts[i]);
        }
        m_bars->setWidth(width > 0 ? width : 1);
        m_bars->setData(keys, values);
        m_plot->rescaleAxes();
        m_plot->yAxis->setRangeLower(0);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
        m_histogramBox->setTitle(r.histogram.samples == 1
                                     ? tr("Outputs over 1 validation sample")
                                     : tr("Outputs over %L1 validation samples").arg(r.histogram.samples));
        m_histogramInfo->setText(tr("%L1 values from %2 to %3, mean %4, RMS %5; %6% exactly 0%7")
                                     .arg(h.count)
                                     .arg(h.lo, 0, 'g', 3)
                                     .arg(h.hi, 0, 'g', 3)
                                     .arg(h.mean, 0, 'g', 3)
                                     .arg(h.rms, 0, 'g', 3)
                                     .arg(h.count > 0 ? 100.0 * double(h.zeros) / double(h.count) : 0.0, 0, 'f', 1)
                                     .arg(h.nonFinite > 0 ? tr("; %1 not finite").arg(h.nonFinite) : QString()));
        m_histogramBox->show();
    } else if (r.job.samples->count == 0) {
        message += (message.isEmpty() ? QString() : QStringLiteral(" ")) +
                   tr("No validation samples for a histogram: the Predict dock could not load the data set.");
    }
    showMessage(message);
    layoutGrids();
}

void FeatureMapPanel::layoutGrids() {
    auto place = [](QLabel* view, const QVector<QImage>& tiles) {
        const auto* area =
            qobject_cast<QScrollArea*>(view->parentWidget() ? view->parentWidget()->parentWidget() : nullptr);
        const int width = area ? area->viewport()->width() - area->verticalScrollBar()->sizeHint().width() : 400;
        view->setPixmap(grid(tiles, std::max(width, 60)));
    };
    place(m_filterView, m_filterTiles);
    place(m_mapView, m_mapTiles);
}

}  // namespace strata::ui
