// TaskMetricsView: see TaskMetricsView.h.
#include "ui/TaskMetricsView.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPixmap>
#include <algorithm>

#include "ui/ChartPanel.h"

namespace strata::ui {

namespace {

constexpr int kStripPixels = 56;  // each image's side in the strip

QColor seriesColor(int i) {
    static const QColor colors[] = {QColor(31, 119, 180), QColor(255, 127, 14),  QColor(44, 160, 44),
                                    QColor(214, 39, 40),  QColor(148, 103, 189), QColor(140, 86, 75)};
    return colors[i % 6];
}

QString seriesLabel(const QString& name) {
    if (name == QLatin1String("mae")) return QObject::tr("MAE");
    if (name == QLatin1String("rmse")) return QObject::tr("RMSE");
    if (name == QLatin1String("r2")) return QObject::tr("R\u00b2");
    if (name == QLatin1String("micro_f1")) return QObject::tr("micro F1");
    if (name == QLatin1String("macro_f1")) return QObject::tr("macro F1");
    if (name == QLatin1String("psnr")) return QObject::tr("PSNR (dB)");
    return name;  // r2[price]
}

}  // namespace

TaskMetricsView::TaskMetricsView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("taskMetricsView"));
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(0, 0, 0, 0);
    m_chart = new ChartPanel(tr("Task metrics (validation)"), tr("step"), tr("value"), this);
    row->addWidget(m_chart, 2);
    m_strip = new QWidget(this);
    m_stripGrid = new QGridLayout(m_strip);
    m_stripGrid->setSpacing(2);
    const QStringList rows{tr("input"), tr("output"), tr("target")};
    for (int r = 0; r < 3; ++r) m_stripGrid->addWidget(new QLabel(rows[r], m_strip), r, 0);
    row->addWidget(m_strip, 1);
    m_strip->hide();
    hide();
}

void TaskMetricsView::setTask(TaskKind task) {
    m_task = task;
    clear();
    setVisible(task != TaskKind::Classification);
    m_strip->setVisible(task == TaskKind::ImageToImage);
}

bool TaskMetricsView::plotted(const std::string& name) const {
    switch (m_task) {
        case TaskKind::Regression: return name == "mae" || name == "rmse" || name == "r2" || name.rfind("r2[", 0) == 0;
        case TaskKind::MultiLabel: return name == "micro_f1" || name == "macro_f1";
        case TaskKind::ImageToImage: return name == "psnr";
        case TaskKind::Classification: break;
    }
    return false;
}

void TaskMetricsView::addEpoch(const EpochEvent& e, double x) {
    if (m_task == TaskKind::Classification) return;
    for (const NamedMetric& m : e.valMetrics) {
        if (!plotted(m.name)) continue;
        const QString name = QString::fromStdString(m.name);
        if (!m_chart->hasSeries(name))
            m_chart->addSeries(name, seriesLabel(name), seriesColor(static_cast<int>(m_chart->seriesNames().size())),
                               ChartPanel::Style::LineWithDots);
        m_chart->append(name, {x}, {m.value});
    }
    m_chart->refresh();
    if (e.strip.count > 0) showStrip(e.strip);
}

QStringList TaskMetricsView::seriesNames() const { return m_chart->seriesNames(); }

void TaskMetricsView::clear() {
    for (const QString& s : m_chart->seriesNames()) m_chart->removeSeries(s);
    m_chart->refresh();
    clearStrip();
}

void TaskMetricsView::clearStrip() {
    for (auto& row : m_stripLabels)
        for (QLabel* l : row) l->deleteLater();
    m_stripLabels.clear();
    m_stripImages.clear();
    m_stripColumns = 0;
}

QImage TaskMetricsView::planesToImage(const float* values, const std::vector<int64_t>& dims) {
    const int64_t c = dims.size() == 3 ? dims[0] : 1;
    const int h = static_cast<int>(dims[dims.size() - 2]), w = static_cast<int>(dims.back());
    QImage img(w, h, QImage::Format_RGB32);
    auto px = [&](int64_t ch, int y, int x) {
        return static_cast<int>(std::clamp(values[(ch * h + y) * w + x], 0.0f, 255.0f) + 0.5f);
    };
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const int r = px(0, y, x);
            img.setPixel(x, y, c >= 3 ? qRgb(r, px(1, y, x), px(2, y, x)) : qRgb(r, r, r));
        }
    return img;
}

void TaskMetricsView::showStrip(const ImageStrip& strip) {
    if (strip.dims.size() < 2) return;
    int64_t per = 1;
    for (int64_t d : strip.dims) per *= d;
    if (m_stripLabels.size() != 3 || m_stripColumns != strip.count) {
        clearStrip();
        m_stripLabels.resize(3);
        m_stripImages.resize(3);
        for (int r = 0; r < 3; ++r)
            for (int col = 0; col < strip.count; ++col) {
                auto* l = new QLabel(m_strip);
                l->setFixedSize(kStripPixels, kStripPixels);
                m_stripGrid->addWidget(l, r, col + 1);
                m_stripLabels[r].append(l);
            }
        m_stripColumns = strip.count;
    }
    const std::vector<float>* rows[3] = {&strip.inputs, &strip.outputs, &strip.targets};
    for (int r = 0; r < 3; ++r) {
        m_stripImages[r].clear();
        for (int col = 0; col < strip.count; ++col) {
            const QImage img = planesToImage(rows[r]->data() + col * per, strip.dims);
            m_stripImages[r].append(img);
            m_stripLabels[r][col]->setPixmap(QPixmap::fromImage(
                img.scaled(kStripPixels, kStripPixels, Qt::KeepAspectRatio, Qt::FastTransformation)));
        }
    }
}

QImage TaskMetricsView::stripImage(int row, int column) const {
    if (row < 0 || row >= m_stripImages.size() || column < 0 || column >= m_stripImages[row].size()) return {};
    return m_stripImages[row][column];
}

}  // namespace strata::ui
