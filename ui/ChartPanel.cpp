// ChartPanel: see ChartPanel.h.
#include "ui/ChartPanel.h"

#include <QFile>
#include <QFileDialog>
#include <QMenu>
#include <QTextStream>
#include <QVBoxLayout>
#include <cmath>

#include <qcustomplot.h>

namespace strata::ui {

ChartPanel::ChartPanel(const QString& title, const QString& xLabel, const QString& yLabel, QWidget* parent)
    : QWidget(parent), m_title(title) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_plot = new QCustomPlot(this);
    // Two rows of three fit a 1600 x 1000 window (issue 17) and, smaller, the dashboard's share of 1280 x 720.
    m_plot->setMinimumSize(220, 90);
    layout->addWidget(m_plot);

    m_plot->plotLayout()->insertRow(0);
    auto* titleElement = new QCPTextElement(m_plot, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    m_plot->plotLayout()->addElement(0, 0, titleElement);
    m_xLabel = xLabel;
    m_plot->xAxis->setLabel(xLabel);
    m_plot->yAxis->setLabel(yLabel);
    m_plot->legend->setVisible(false);  // shown once a series exists
    QFont legendFont = font();
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.85);
    m_plot->legend->setFont(legendFont);
    m_plot->legend->setBrush(QColor(255, 255, 255, 200));
    m_plot->legend->setRowSpacing(0);  // compact: a chart may be 90 px high (the dashboard at 1280 x 720)
    m_plot->legend->setMargins(QMargins(5, 2, 5, 2));
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    // Long training curves: draw lines without the per-segment path work (the GUI shares the CPU
    // with the engine on small machines).
    m_plot->setPlottingHint(QCP::phFastPolylines, true);

    // Once the user drags or zooms, the view stays where they put it (a click on the legend is not a drag).
    connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        if (e->button() == Qt::LeftButton &&
            !(m_plot->legend->visible() && m_plot->legend->selectTest(e->position(), false) >= 0))
            m_followData = false;
    });
    // A click on a series' legend entry hides or shows that series, as in TensorBoard, so a legend never
    // has to hide a curve the user wants to see.
    connect(m_plot, &QCustomPlot::legendClick, this, [this](QCPLegend*, QCPAbstractLegendItem* item, QMouseEvent*) {
        auto* entry = qobject_cast<QCPPlottableLegendItem*>(item);
        if (!entry) return;
        for (auto it = m_series.cbegin(); it != m_series.cend(); ++it)
            if (it.value() == entry->plottable()) setSeriesVisible(it.key(), !it.value()->visible());
    });
    connect(m_plot, &QCustomPlot::mouseWheel, this, [this](QWheelEvent*) { m_followData = false; });
    connect(m_plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { resetView(); });

    m_plot->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_plot, &QWidget::customContextMenuRequested, this, &ChartPanel::showContextMenu);

    m_marker = new QCPItemStraightLine(m_plot);
    m_marker->setPen(QPen(QColor(40, 150, 60), 1.5, Qt::DashLine));
    m_marker->setVisible(false);
    m_marker->setSelectable(false);
    m_markerLabel = new QCPItemText(m_plot);
    m_markerLabel->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_markerLabel->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    m_markerLabel->setColor(QColor(40, 150, 60));
    m_markerLabel->setPadding(QMargins(3, 2, 3, 2));
    m_markerLabel->setVisible(false);
    m_markerLabel->setSelectable(false);
}

void ChartPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    setCompact(height() < 150);
}

void ChartPanel::setCompact(bool compact) {
    if (compact == m_compact) return;
    m_compact = compact;
    m_plot->legend->setFillOrder(compact ? QCPLayoutGrid::foColumnsFirst : QCPLayoutGrid::foRowsFirst, true);
    m_plot->legend->setWrap(0);
    for (QCPAxis* axis : {m_plot->yAxis, m_plot->yAxis2}) axis->ticker()->setTickCount(compact ? 3 : 5);
    m_plot->xAxis->setLabel(compact ? QString() : m_xLabel);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void ChartPanel::setRightAxisLabel(const QString& label) {
    m_dirty = true;
    m_hasRightAxis = true;
    m_plot->yAxis2->setVisible(true);
    m_plot->yAxis2->setLabel(label);
}

void ChartPanel::addSeries(const QString& name, const QString& label, const QColor& color, Style style, Axis axis) {
    m_dirty = true;
    if (m_series.contains(name)) return;
    if (axis == Axis::Right && !m_hasRightAxis) setRightAxisLabel(QString());
    QCPGraph* graph = m_plot->addGraph(m_plot->xAxis, axis == Axis::Right ? m_plot->yAxis2 : m_plot->yAxis);
    graph->setName(label);
    QPen pen(color);
    pen.setWidthF(style == Style::Line ? 1.2 : 1.8);
    graph->setPen(pen);
    if (style == Style::Dots) {
        graph->setLineStyle(QCPGraph::lsNone);
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
    } else if (style == Style::LineWithSmallDots) {
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
    } else if (style == Style::LineWithDots) {
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
    }
    m_series.insert(name, graph);
    m_order.append(name);
    m_plot->legend->setVisible(true);
}

void ChartPanel::removeSeries(const QString& name) {
    QCPGraph* graph = m_series.take(name);
    if (!graph) return;
    m_order.removeAll(name);
    m_plot->removeGraph(graph);
    m_dirty = true;
}

void ChartPanel::append(const QString& name, const QVector<double>& keys, const QVector<double>& values) {
    QCPGraph* graph = m_series.value(name);
    if (!graph || keys.isEmpty()) return;
    graph->addData(keys, values, /*alreadySorted=*/true);
    m_dirty = true;
}

void ChartPanel::setSeriesVisible(const QString& name, bool visible) {
    QCPGraph* graph = m_series.value(name);
    if (!graph || graph->visible() == visible) return;
    graph->setVisible(visible);
    // The legend entry stays, greyed, so the series can be clicked back.
    if (auto* entry = m_plot->legend->itemWithPlottable(graph))
        entry->setTextColor(visible ? QColor(Qt::black) : QColor(150, 150, 150));
    m_dirty = true;
    refresh();
}

bool ChartPanel::seriesVisible(const QString& name) const {
    const QCPGraph* graph = m_series.value(name);
    return graph && graph->visible();
}

int ChartPanel::pointCount(const QString& name) const {
    const QCPGraph* graph = m_series.value(name);
    return graph ? graph->data()->size() : -1;
}

QStringList ChartPanel::seriesNames() const { return m_order; }

void ChartPanel::setMarker(double x, const QString& label) {
    m_dirty = true;
    m_marker->point1->setCoords(x, 0);
    m_marker->point2->setCoords(x, 1);
    m_marker->setVisible(true);
    m_markerLabel->position->setTypeX(QCPItemPosition::ptPlotCoords);
    m_markerLabel->position->setCoords(x, 0.02);
    m_markerLabel->setText(label);
    m_markerLabel->setVisible(!label.isEmpty());
}

void ChartPanel::clearMarker() {
    m_dirty = true;
    m_marker->setVisible(false);
    m_markerLabel->setVisible(false);
}

bool ChartPanel::markerVisible() const { return m_marker->visible(); }
double ChartPanel::markerX() const { return m_marker->point1->coords().x(); }

void ChartPanel::clear() {
    for (QCPGraph* graph : std::as_const(m_series)) graph->data()->clear();
    clearMarker();
    m_dirty = true;
    m_followData = true;
    refresh();
}

void ChartPanel::refresh() {
    if (!m_dirty) return;
    if (m_followData) rescaleToData();
    if (!isVisible()) return;  // stays dirty: repainted on the first refresh once shown
    m_plot->replot(QCustomPlot::rpQueuedReplot);
    m_dirty = false;
}

void ChartPanel::rescaleToData() {
    // Our own rescale: QCustomPlot keeps the old span for flat data (a constant learning rate
    // would sit in a -2..2 window), and every range gets a little air.
    auto widen = [](QCPRange r, bool any) {
        if (!any) return QCPRange(0, 1);
        if (r.size() > 0) return QCPRange(r.lower - r.size() * 0.05, r.upper + r.size() * 0.05);
        const double pad = r.lower != 0 ? std::abs(r.lower) * 0.1 : 1.0;
        return QCPRange(r.lower - pad, r.upper + pad);
    };
    QCPRange keys, left, right;
    bool anyKey = false, anyLeft = false, anyRight = false;
    for (QCPGraph* graph : std::as_const(m_series)) {
        if (graph->data()->isEmpty() || !graph->visible()) continue;  // hidden from the legend: not scaled to
        bool found = false;
        const QCPRange k = graph->getKeyRange(found);
        if (found) {
            keys = anyKey ? QCPRange(std::min(keys.lower, k.lower), std::max(keys.upper, k.upper)) : k;
            anyKey = true;
        }
        const QCPRange v = graph->getValueRange(found);
        if (!found) continue;
        const bool onRight = graph->valueAxis() == m_plot->yAxis2;
        QCPRange& target = onRight ? right : left;
        bool& any = onRight ? anyRight : anyLeft;
        target = any ? QCPRange(std::min(target.lower, v.lower), std::max(target.upper, v.upper)) : v;
        any = true;
    }
    if (!anyKey) {  // no data (cleared for another run or project): the empty chart's axes, not the last run's
        m_plot->xAxis->setRange(0, 5);
        m_plot->yAxis->setRange(m_fixedUpper > m_fixedLower ? QCPRange(m_fixedLower, m_fixedUpper) : QCPRange(0, 5));
        if (m_hasRightAxis) m_plot->yAxis2->setRange(0, 5);
        return;
    }
    m_plot->xAxis->setRange(keys.size() > 0 ? keys : QCPRange(keys.lower - 1, keys.upper + 1));
    if (m_fixedUpper > m_fixedLower)
        m_plot->yAxis->setRange(m_fixedLower, m_fixedUpper);
    else
        m_plot->yAxis->setRange(widen(left, anyLeft));
    if (m_hasRightAxis) m_plot->yAxis2->setRange(widen(right, anyRight));
}

void ChartPanel::setFixedLeftRange(double lower, double upper) {
    m_dirty = true;
    m_fixedLower = lower;
    m_fixedUpper = upper;
    m_plot->yAxis->setRange(lower, upper);
}

void ChartPanel::setLegendCorner(Qt::Alignment corner) {
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, corner);
}

void ChartPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    refresh();  // changes that arrived while hidden
}

void ChartPanel::resetView() {
    m_followData = true;
    m_dirty = true;
    refresh();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

bool ChartPanel::savePng(const QString& path, int width, int height) {
    m_plot->replot();
    return m_plot->savePng(path, width, height);
}

bool ChartPanel::saveCsv(const QString& path) const {
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) return false;
    QTextStream out(&file);
    out << "series,x,y\n";
    for (const QString& name : m_order) {
        const QCPGraph* graph = m_series.value(name);
        for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
            out << name << ',' << QString::number(it->key, 'g', 17) << ',' << QString::number(it->value, 'g', 17)
                << '\n';
    }
    out.flush();
    return file.error() == QFile::NoError;
}

void ChartPanel::showContextMenu(const QPoint& pos) {
    QMenu menu(this);
    QString base = m_title.toLower().replace(QLatin1Char(' '), QLatin1Char('_')).remove(QLatin1Char('/'));
    menu.addAction(tr("Save as PNG..."), this, [this, base] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save chart"), base + ".png", tr("PNG (*.png)"));
        if (!path.isEmpty()) savePng(path);
    });
    menu.addAction(tr("Save data as CSV..."), this, [this, base] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save data"), base + ".csv", tr("CSV (*.csv)"));
        if (!path.isEmpty()) saveCsv(path);
    });
    menu.addSeparator();
    menu.addAction(tr("Reset view"), this, &ChartPanel::resetView);
    menu.exec(m_plot->mapToGlobal(pos));
}

}  // namespace strata::ui
