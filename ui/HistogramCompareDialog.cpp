// HistogramCompareDialog: see HistogramCompareDialog.h.
#include "ui/HistogramCompareDialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

namespace strata::ui {

namespace {
constexpr int kBins = 64;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
}  // namespace

HistogramCompareDialog::HistogramCompareDialog(const QVector<QPair<QString, QString>>& runs, QWidget* parent)
    : QDialog(parent),
      m_tensor(new QComboBox(this)),
      m_kind(new QComboBox(this)),
      m_step(new QSpinBox(this)),
      m_plot(new QCustomPlot(this)),
      m_notes(new QLabel(this)) {
    setObjectName(QStringLiteral("histogramCompareDialog"));
    setWindowTitle(tr("Histograms of %1 runs").arg(runs.size()));
    resize(700, 560);
    m_tensor->setObjectName(QStringLiteral("compareTensor"));
    m_kind->addItems({tr("values"), tr("gradients")});
    m_step->setRange(0, 0);
    m_step->setSpecialValueText(tr("last sample"));
    m_step->setPrefix(tr("step "));
    m_step->setToolTip(tr("Each run's last sample taken at or before this step"));
    m_notes->setWordWrap(true);
    m_notes->setText(tr("Reading the runs' histograms..."));
    m_plot->legend->setVisible(true);
    m_plot->xAxis->setLabel(tr("value"));
    m_plot->yAxis->setLabel(tr("share of the tensor's values"));
    m_plot->setMinimumSize(560, 320);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Tensor"), this));
    top->addWidget(m_tensor, 1);
    top->addWidget(m_kind);
    top->addWidget(m_step);
    auto* box = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(box, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_plot, 1);
    layout->addWidget(m_notes);
    layout->addWidget(box);

    connect(m_tensor, &QComboBox::currentIndexChanged, this, &HistogramCompareDialog::refresh);
    connect(m_kind, &QComboBox::currentIndexChanged, this, &HistogramCompareDialog::refresh);
    connect(m_step, &QSpinBox::valueChanged, this, &HistogramCompareDialog::refresh);
    connect(&m_watcher, &QFutureWatcherBase::finished, this, &HistogramCompareDialog::showLoaded);
    std::vector<std::pair<std::string, std::string>> list;
    for (const auto& [label, folder] : runs) list.emplace_back(label.toStdString(), folder.toStdString());
    m_watcher.setFuture(QtConcurrent::run([list = std::move(list)] {
        std::vector<RunHistograms> out;
        for (const auto& [label, folder] : list) out.push_back(readRunHistograms(label, folder));
        return out;
    }));
}

HistogramCompareDialog::~HistogramCompareDialog() { m_watcher.waitForFinished(); }

QStringList HistogramCompareDialog::tensors() const {
    QStringList out;
    for (int i = 0; i < m_tensor->count(); ++i) out << m_tensor->itemText(i);
    return out;
}

void HistogramCompareDialog::select(const QString& tensor, bool gradients, qint64 step) {
    const QSignalBlocker a(m_tensor), b(m_kind), c(m_step);
    m_tensor->setCurrentText(tensor);
    m_kind->setCurrentIndex(gradients ? 1 : 0);
    m_step->setValue(step < 0 ? 0 : int(step + 1));
    refresh();
}

QString HistogramCompareDialog::notesText() const { return m_notes->text(); }

void HistogramCompareDialog::showLoaded() {
    m_runs = m_watcher.result();
    m_loaded = true;
    // Every tensor any run has, in the order first seen; the step range up to the latest sample.
    const QSignalBlocker block(m_tensor);
    int64_t last = 0;
    for (const RunHistograms& r : m_runs) {
        for (const std::string& name : histogramTensorNames(r.samples))
            if (m_tensor->findText(QString::fromStdString(name)) < 0) m_tensor->addItem(QString::fromStdString(name));
        if (!r.samples.empty()) last = std::max(last, r.samples.back().step + 1);
    }
    m_step->setRange(0, int(last));
    refresh();
    emit loaded();
}

void HistogramCompareDialog::refresh() {
    if (isLoading()) return;
    const int64_t step = m_step->value() == 0 ? -1 : m_step->value() - 1;
    m_comparison =
        compareRunHistograms(m_runs, m_tensor->currentText().toStdString(), m_kind->currentIndex() == 1, step, kBins);
    m_plot->clearGraphs();
    const HeatMap& m = m_comparison.shares;
    const double width = (double(m.hi) - m.lo) / std::max(m.rows, 1);
    QStringList notes;
    for (size_t i = 0; i < m_runs.size(); ++i) {
        const QString label = QString::fromStdString(m_runs[i].label);
        if (m_comparison.steps[i] < 0) {
            notes << tr("%1: %2").arg(label, QString::fromStdString(m_comparison.missing[i]));
            continue;
        }
        notes << tr("%1: step %2").arg(label).arg(m_comparison.steps[i] + 1);
        QCPGraph* g = m_plot->addGraph();
        g->setName(tr("%1 (step %2)").arg(label).arg(m_comparison.steps[i] + 1));
        g->setPen(QPen(QColor(kColours[i % 10]), 2));
        g->setLineStyle(QCPGraph::lsStepCenter);
        QVector<double> xs, ys;
        for (int r = 0; r < m.rows; ++r) {
            xs << m.lo + (r + 0.5) * width;
            ys << m.at(r, int(i));
        }
        g->setData(xs, ys);
    }
    if (m_tensor->count() == 0) notes.prepend(tr("None of these runs kept histograms."));
    m_notes->setText(notes.join(QLatin1Char('\n')));
    m_plot->rescaleAxes();
    m_plot->yAxis->setRangeLower(0);
    m_plot->replot();
}

}  // namespace strata::ui
