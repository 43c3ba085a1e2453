// HistogramPanel: see HistogramPanel.h.
#include "ui/HistogramPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QTimer>
#include <QVBoxLayout>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

namespace strata::ui {

namespace {
constexpr int kRows = 64;
}

HistogramPanel::HistogramPanel(QWidget* parent)
    : QWidget(parent),
      m_tensor(new QComboBox(this)),
      m_kind(new QComboBox(this)),
      m_plot(new QCustomPlot(this)),
      m_health(new QLabel(this)),
      m_info(new QLabel(this)),
      m_timer(new QTimer(this)) {
    setObjectName(QStringLiteral("histogramPanel"));
    m_tensor->setObjectName(QStringLiteral("histogramTensor"));
    m_kind->addItems({tr("values"), tr("gradients")});
    m_kind->setToolTip(tr("The tensor's values or its gradients"));
    m_map = new QCPColorMap(m_plot->xAxis, m_plot->yAxis);
    auto* scale = new QCPColorScale(m_plot);
    m_plot->plotLayout()->addElement(0, 1, scale);
    scale->setLabel(tr("share of values"));
    m_map->setColorScale(scale);
    m_map->setGradient(QCPColorGradient::gpThermal);
    m_map->setInterpolate(false);
    m_plot->xAxis->setLabel(tr("step"));
    m_plot->yAxis->setLabel(tr("value"));
    m_health->setObjectName(QStringLiteral("histogramHealth"));
    m_health->setWordWrap(true);
    m_health->setTextFormat(Qt::RichText);
    m_info->setWordWrap(true);
    m_info->setText(tr("Histograms of every trainable tensor, sampled every 100 steps while training."));

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Tensor"), this));
    top->addWidget(m_tensor, 1);
    top->addWidget(m_kind);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_plot, 1);
    layout->addWidget(m_info);
    layout->addWidget(m_health);

    auto stale = [this] {
        m_stale = true;
        refresh();
    };
    connect(m_tensor, &QComboBox::currentIndexChanged, this, stale);
    connect(m_kind, &QComboBox::currentIndexChanged, this, stale);
    m_timer->setInterval(500);
    connect(m_timer, &QTimer::timeout, this, &HistogramPanel::refresh);
    m_timer->start();
    connect(&m_watcher, &QFutureWatcher<Job>::finished, this, [this] {
        const Job job = m_watcher.result();
        show(job.map, job.steps);
        if (m_stale) refresh();
    });
}

HistogramPanel::~HistogramPanel() { m_watcher.waitForFinished(); }

void HistogramPanel::clear() {
    m_samples.clear();
    m_tensor->clear();
    m_shown = {};
    m_map->data()->clear();
    m_plot->replot();
    m_health->clear();
    m_stale = false;
}

void HistogramPanel::addReport(std::shared_ptr<const HistogramReport> report) {
    if (!report) return;
    m_samples.push_back(report->sample);
    for (const ParameterSample& p : report->sample.parameters) {
        const QString name = QString::fromStdString(p.layer + "." + p.parameter);
        if (m_tensor->findText(name) < 0) m_tensor->addItem(name);
    }
    m_stale = true;
    showHealth(report->health);
    emit healthChanged(report->health);
}

void HistogramPanel::setSamples(const std::vector<HistogramSample>& samples) {
    clear();
    for (const HistogramSample& s : samples)
        addReport(std::make_shared<const HistogramReport>(HistogramReport{s, assessLayers(s)}));
}

QStringList HistogramPanel::tensors() const {
    QStringList out;
    for (int i = 0; i < m_tensor->count(); ++i) out << m_tensor->itemText(i);
    return out;
}

void HistogramPanel::selectTensor(const QString& name, bool gradients) {
    m_tensor->setCurrentText(name);
    m_kind->setCurrentIndex(gradients ? 1 : 0);
}

void HistogramPanel::refreshNow() {
    m_watcher.waitForFinished();
    QCoreApplication::processEvents();
    m_stale = true;
    refresh();
    m_watcher.waitForFinished();
    QCoreApplication::processEvents();
}

// Only while visible and stale, one re-binning at a time, on a pool thread.
void HistogramPanel::refresh() {
    if (!m_stale || !isVisible() || m_watcher.isRunning() || m_tensor->currentIndex() < 0) return;
    m_stale = false;
    const std::string name = m_tensor->currentText().toStdString();
    const bool gradients = m_kind->currentIndex() == 1;
    std::vector<ValueHistogram> columns;
    std::vector<int64_t> steps;
    for (const HistogramSample& s : m_samples)
        for (const ParameterSample& p : s.parameters)
            if (p.layer + "." + p.parameter == name) {
                columns.push_back(gradients ? p.gradients : p.values);
                steps.push_back(s.step);
            }
    m_watcher.setFuture(QtConcurrent::run([columns = std::move(columns), steps = std::move(steps)]() -> Job {
        return Job{heatMap(columns, kRows), steps};
    }));
}

void HistogramPanel::show(const HeatMap& map, const std::vector<int64_t>& steps) {
    m_shown = map;
    if (map.columns == 0) {
        m_map->data()->clear();
        m_plot->replot();
        return;
    }
    // Samples are evenly spaced in steps; each column spans its sample's step to the next.
    const double first = double(steps.front()), last = double(steps.back());
    m_map->data()->setSize(map.columns, map.rows);
    m_map->data()->setRange(QCPRange(first, map.columns > 1 ? last : first + 1),
                            QCPRange(map.lo, map.hi > map.lo ? map.hi : map.lo + 1));
    for (int c = 0; c < map.columns; ++c)
        for (int r = 0; r < map.rows; ++r) m_map->data()->setCell(c, r, map.at(r, c));
    m_map->rescaleDataRange(true);
    m_plot->rescaleAxes();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
    m_info->setText(tr("%1 samples, steps %2 to %3; values %4 to %5.")
                        .arg(map.columns)
                        .arg(steps.front() + 1)
                        .arg(steps.back() + 1)
                        .arg(map.lo, 0, 'g', 3)
                        .arg(map.hi, 0, 'g', 3));
}

void HistogramPanel::showHealth(const std::vector<LayerHealth>& health) {
    QStringList lines;
    for (const LayerHealth& h : health)
        if (!h.text.empty())
            lines << QStringLiteral("<b>%1</b>: %2")
                         .arg(QString::fromStdString(h.layer).toHtmlEscaped(),
                              QString::fromStdString(h.text).toHtmlEscaped());
    m_health->setText(lines.isEmpty() ? tr("Every layer's gradient and activations look healthy.")
                                      : lines.join(QStringLiteral("<br>")));
}

}  // namespace strata::ui
