// TaskPredictView: see TaskPredictView.h.
#include "ui/TaskPredictView.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPixmap>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/graph/Task.h"
#include "core/infer/Predict.h"
#include "ui/TaskMetricsView.h"

namespace strata::ui {

namespace {

constexpr int64_t kMaxSamples = 2000;  // validation samples evaluated (image to image holds three copies)
constexpr int kResidualBins = 20;

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

// What a worker thread computed for the view.
struct TaskPredictView::Result {
    TaskKind task = TaskKind::Classification;
    std::vector<std::string> names;
    int64_t count = 0, outputs = 0;
    std::vector<float> predicted;  // regression: data units; multi-label: logits; image: pixels (raw 0..255)
    std::vector<float> actual;     // regression: data units; multi-label: 0/1; image: pixels
    std::vector<float> inputs;     // image: the inputs the model saw, as pixels
    std::vector<int64_t> dims;
    Normalization inputNormalization;
    double threshold = 0.5;
    QString description, error;
};

TaskPredictView::TaskPredictView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("taskPredictView"));
    auto* root = new QVBoxLayout(this);
    m_status = new QLabel(tr("Load a model of a regression, multi-label or image-to-image project."), this);
    m_status->setWordWrap(true);
    root->addWidget(m_status);
    m_metrics = new QLabel(this);
    m_metrics->setWordWrap(true);
    m_metrics->setTextInteractionFlags(Qt::TextSelectableByMouse);
    root->addWidget(m_metrics);
    // One sample picker for the multi-label and image pages.
    m_sampleRow = new QWidget(this);
    auto* sf = new QFormLayout(m_sampleRow);
    sf->setContentsMargins(0, 0, 0, 0);
    m_sample = new QSpinBox(m_sampleRow);
    m_sample->setRange(0, 0);
    sf->addRow(tr("Validation sample"), m_sample);
    root->addWidget(m_sampleRow);
    m_sampleRow->hide();
    m_pages = new QStackedWidget(this);
    root->addWidget(m_pages, 1);

    // Regression.
    auto* regression = new QWidget(m_pages);
    auto* rl = new QVBoxLayout(regression);
    auto* pick = new QFormLayout;
    m_target = new QComboBox(regression);
    pick->addRow(tr("Target"), m_target);
    rl->addLayout(pick);
    auto* plots = new QHBoxLayout;
    m_scatter = new QCustomPlot(regression);
    m_scatter->xAxis->setLabel(tr("actual"));
    m_scatter->yAxis->setLabel(tr("predicted"));
    m_scatter->setMinimumSize(180, 160);
    m_residuals = new QCustomPlot(regression);
    m_residuals->xAxis->setLabel(tr("residual (predicted - actual)"));
    m_residuals->yAxis->setLabel(tr("samples"));
    m_residuals->setMinimumSize(180, 160);
    plots->addWidget(m_scatter, 1);
    plots->addWidget(m_residuals, 1);
    rl->addLayout(plots, 1);
    m_pages->addWidget(regression);
    connect(m_target, &QComboBox::currentIndexChanged, this, [this] { showRegression(); });

    // Multi-label.
    auto* multi = new QWidget(m_pages);
    auto* ml = new QHBoxLayout(multi);
    auto* left = new QVBoxLayout;
    auto* th = new QFormLayout;
    m_threshold = new QDoubleSpinBox(multi);
    m_threshold->setRange(0.0, 1.0);
    m_threshold->setSingleStep(0.05);
    m_threshold->setDecimals(3);
    m_threshold->setToolTip(tr("A label is predicted when its probability is at least this."));
    th->addRow(tr("Threshold"), m_threshold);
    left->addLayout(th);
    m_labels = new QTableWidget(0, 5, multi);
    m_labels->setHorizontalHeaderLabels({tr("label"), tr("precision"), tr("recall"), tr("F1"), tr("best threshold")});
    m_labels->verticalHeader()->hide();
    m_labels->setEditTriggers(QAbstractItemView::NoEditTriggers);
    left->addWidget(m_labels, 1);
    ml->addLayout(left, 3);
    auto* right = new QVBoxLayout;
    m_sampleProbabilities = new QTableWidget(0, 3, multi);
    m_sampleProbabilities->setHorizontalHeaderLabels({tr("label"), tr("probability"), tr("true")});
    m_sampleProbabilities->verticalHeader()->hide();
    m_sampleProbabilities->setEditTriggers(QAbstractItemView::NoEditTriggers);
    right->addWidget(m_sampleProbabilities, 1);
    ml->addLayout(right, 2);
    m_pages->addWidget(multi);
    connect(m_threshold, &QDoubleSpinBox::valueChanged, this, [this] {
        showMultiLabel();
        showSample();
    });

    // Image to image.
    auto* images = new QWidget(m_pages);
    auto* il = new QHBoxLayout(images);
    const QStringList titles{tr("input"), tr("output"), tr("target")};
    for (int i = 0; i < 3; ++i) {
        auto* col = new QVBoxLayout;
        col->addWidget(new QLabel(titles[i], images));
        m_images[i] = new QLabel(images);
        m_images[i]->setFixedSize(140, 140);
        col->addWidget(m_images[i]);
        il->addLayout(col);
    }
    il->addStretch(1);
    m_pages->addWidget(images);
    connect(m_sample, &QSpinBox::valueChanged, this, [this] { showSample(); });

    m_watcher = new QFutureWatcher<void>(this);
    connect(m_watcher, &QFutureWatcher<void>::finished, this, &TaskPredictView::finish);
    m_pages->hide();
}

TaskPredictView::~TaskPredictView() { m_watcher->waitForFinished(); }

bool TaskPredictView::isBusy() const { return m_watcher->isRunning(); }

void TaskPredictView::waitForResult() {
    m_watcher->waitForFinished();
    if (m_pending) finish();
}

TaskKind TaskPredictView::task() const { return m_result ? m_result->task : TaskKind::Classification; }
QString TaskPredictView::errorText() const { return m_error; }
QString TaskPredictView::metricsText() const { return m_metrics->text(); }
QImage TaskPredictView::sampleImage(int which) const {
    return which >= 0 && which < 3 ? m_sampleImages[which] : QImage();
}

void TaskPredictView::clear() {
    m_result.reset();
    m_error.clear();
    m_metrics->clear();
    m_pages->hide();
    m_sampleRow->hide();
    m_status->setText(tr("Load a model of a regression, multi-label or image-to-image project."));
}

void TaskPredictView::setModel(const QString& modelFile, const QString& projectPath) {
    if (isBusy()) m_watcher->waitForFinished();
    clear();
    m_status->setText(tr("Evaluating %1 on the validation split...").arg(modelFile));
    auto result = std::make_shared<Result>();
    m_pending = result;
    m_watcher->setFuture(QtConcurrent::run([result, file = modelFile.toStdString(), path = projectPath.toStdString()] {
        Result& r = *result;
        try {
            Predictor predictor(file);
            const Project& project = predictor.model().project;
            r.task = project.dataset.task;
            if (taskHasClasses(r.task)) return;
            const DatasetBundle data = loadDataset(project.dataset, path);
            const DataSplit& split = data.validation.count > 0 ? data.validation : data.train;
            r.description = tr("%1 %2 samples").arg(data.validation.count > 0 ? tr("validation") : tr("training"));
            const int64_t count = std::min(split.count, kMaxSamples);
            r.description = r.description.arg(count);
            // The samples as training's evaluation sees them (denoising: the same noisy inputs).
            DataLoader loader(split, static_cast<int>(count), false, project.training.seed,
                              validationAugmentation(project.dataset, data.normalization));
            loader.startEpoch(0);
            Batch b;
            if (!loader.next(b) || b.size == 0) throw std::runtime_error("no validation samples");
            std::vector<float> raw = b.inputs;
            undoNormalization(raw, data.normalization);
            const Predictions p = predictor.run(raw, b.size);
            r.count = b.size;
            r.outputs = p.classes;
            r.names = predictor.model().classNames;
            r.threshold = project.dataset.threshold;
            r.inputNormalization = data.normalization;
            if (r.task == TaskKind::Regression) {
                r.predicted = predictor.regressionValues(p);
                r.actual = b.targets;
                undoNormalization(r.actual, data.targetNormalization);
            } else if (r.task == TaskKind::MultiLabel) {
                r.predicted = p.outputs;
                r.actual = b.targets;
            } else {
                r.dims = split.sampleShape.dims();
                r.predicted = p.outputs;
                r.actual = b.targets;
                r.inputs = b.inputs;
                for (std::vector<float>* v : {&r.predicted, &r.actual, &r.inputs})
                    undoNormalization(*v, data.normalization);
            }
        } catch (const std::exception& e) {
            r.error = q(e.what());
        }
    }));
}

void TaskPredictView::finish() {
    if (!m_pending) return;
    m_result = std::exchange(m_pending, nullptr);
    const Result& r = *m_result;
    m_error = r.error;
    if (!r.error.isEmpty()) {
        m_status->setText(tr("Could not evaluate the model: %1").arg(r.error));
        emit ready(false);
        return;
    }
    if (taskHasClasses(r.task)) {
        m_status->setText(tr("A classification model: the Predict tab shows its classes and confusion matrix."));
        emit ready(true);
        return;
    }
    m_status->setText(tr("%1 on %2").arg(q(settingName(r.task)), r.description));
    m_sample->blockSignals(true);
    m_sample->setRange(0, static_cast<int>(std::max<int64_t>(0, r.count - 1)));
    m_sample->setValue(0);
    m_sample->blockSignals(false);
    m_pages->show();
    m_sampleRow->setVisible(r.task != TaskKind::Regression);
    if (r.task == TaskKind::Regression) {
        m_pages->setCurrentIndex(0);
        m_target->blockSignals(true);
        m_target->clear();
        for (const std::string& n : r.names) m_target->addItem(q(n));
        m_target->blockSignals(false);
        showRegression();
    } else if (r.task == TaskKind::MultiLabel) {
        m_pages->setCurrentIndex(1);
        m_threshold->blockSignals(true);
        m_threshold->setValue(r.threshold);
        m_threshold->blockSignals(false);
        showMultiLabel();
        showSample();
    } else {
        m_pages->setCurrentIndex(2);
        showSample();
    }
    emit ready(true);
}

void TaskPredictView::showRegression() {
    if (!m_result || m_result->task != TaskKind::Regression) return;
    const Result& r = *m_result;
    TaskMetrics m(TaskKind::Regression, r.outputs, r.names);
    m.add(r.predicted.data(), r.actual.data(), r.count);
    const std::vector<RegressionTargetMetrics> per = m.regression();
    QStringList lines;
    for (size_t j = 0; j < per.size(); ++j)
        lines << tr("%1: MAE %2, RMSE %3, R\u00b2 %4")
                     .arg(j < r.names.size() ? q(r.names[j]) : QString::number(j))
                     .arg(q(formatMetric(per[j].mae)), q(formatMetric(per[j].rmse)), q(formatMetric(per[j].r2)));
    m_metrics->setText(lines.join(QLatin1Char('\n')));

    const int j = std::max(0, m_target->currentIndex());
    QVector<double> actual, predicted, residual;
    for (int64_t s = 0; s < r.count; ++s) {
        const size_t i = static_cast<size_t>(s * r.outputs + j);
        actual << r.actual[i];
        predicted << r.predicted[i];
        residual << double(r.predicted[i]) - r.actual[i];
    }
    m_scatter->clearGraphs();
    m_scatter->clearItems();
    QCPGraph* g = m_scatter->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(31, 119, 180), 4));
    g->setData(actual, predicted);
    double lo = 0, hi = 1;
    if (!actual.isEmpty()) {
        lo = std::min(*std::min_element(actual.begin(), actual.end()),
                      *std::min_element(predicted.begin(), predicted.end()));
        hi = std::max(*std::max_element(actual.begin(), actual.end()),
                      *std::max_element(predicted.begin(), predicted.end()));
    }
    // The diagonal: where a perfect model's points lie.
    auto* diagonal = new QCPItemStraightLine(m_scatter);
    diagonal->point1->setCoords(lo, lo);
    diagonal->point2->setCoords(hi, hi);
    diagonal->setPen(QPen(QColor(200, 60, 60), 1.2, Qt::DashLine));
    const double pad = (hi - lo) * 0.05 + 1e-9;
    m_scatter->xAxis->setRange(lo - pad, hi + pad);
    m_scatter->yAxis->setRange(lo - pad, hi + pad);
    m_scatter->replot();

    m_residuals->clearPlottables();
    if (!residual.isEmpty()) {
        const double rlo = *std::min_element(residual.begin(), residual.end());
        const double rhi = *std::max_element(residual.begin(), residual.end());
        const double width = std::max((rhi - rlo) / kResidualBins, 1e-9);
        QVector<double> centers(kResidualBins), counts(kResidualBins, 0);
        for (int k = 0; k < kResidualBins; ++k) centers[k] = rlo + (k + 0.5) * width;
        for (double x : residual) counts[std::clamp(static_cast<int>((x - rlo) / width), 0, kResidualBins - 1)] += 1;
        auto* bars = new QCPBars(m_residuals->xAxis, m_residuals->yAxis);
        bars->setWidth(width * 0.9);
        bars->setData(centers, counts);
        bars->setBrush(QColor(31, 119, 180, 160));
        m_residuals->xAxis->setRange(rlo - width, rhi + width);
        m_residuals->yAxis->setRange(0, *std::max_element(counts.begin(), counts.end()) * 1.1 + 1);
    }
    m_residuals->replot();
}

void TaskPredictView::showMultiLabel() {
    if (!m_result || m_result->task != TaskKind::MultiLabel) return;
    const Result& r = *m_result;
    TaskMetrics m(TaskKind::MultiLabel, r.outputs, r.names, {}, m_threshold->value());
    m.add(r.predicted.data(), r.actual.data(), r.count);
    const std::vector<LabelMetrics> labels = m.labels();
    m_labels->setRowCount(static_cast<int>(labels.size()));
    auto cell = [](double v) { return new QTableWidgetItem(QString::number(v, 'f', 3)); };
    for (int j = 0; j < static_cast<int>(labels.size()); ++j) {
        m_labels->setItem(
            j, 0, new QTableWidgetItem(size_t(j) < r.names.size() ? q(r.names[size_t(j)]) : QString::number(j)));
        m_labels->setItem(j, 1, cell(labels[size_t(j)].precision));
        m_labels->setItem(j, 2, cell(labels[size_t(j)].recall));
        m_labels->setItem(j, 3, cell(labels[size_t(j)].f1));
        m_labels->setItem(j, 4, cell(labels[size_t(j)].bestThreshold));
    }
    m_labels->resizeColumnsToContents();
    m_metrics->setText(tr("micro F1 %1, macro F1 %2 at threshold %3")
                           .arg(q(formatMetric(m.microF1())), q(formatMetric(m.macroF1())))
                           .arg(m_threshold->value()));
}

void TaskPredictView::showSample() {
    if (!m_result || m_result->count == 0) return;
    const Result& r = *m_result;
    const int64_t s = std::clamp<int64_t>(m_sample->value(), 0, r.count - 1);
    if (r.task == TaskKind::MultiLabel) {
        m_sampleProbabilities->setRowCount(static_cast<int>(r.outputs));
        for (int j = 0; j < static_cast<int>(r.outputs); ++j) {
            const size_t i = static_cast<size_t>(s * r.outputs + j);
            const double p = 1.0 / (1.0 + std::exp(-double(r.predicted[i])));
            auto* name = new QTableWidgetItem(size_t(j) < r.names.size() ? q(r.names[size_t(j)]) : QString::number(j));
            if (p >= m_threshold->value()) {
                QFont bold = name->font();
                bold.setBold(true);
                name->setFont(bold);
            }
            m_sampleProbabilities->setItem(j, 0, name);
            m_sampleProbabilities->setItem(j, 1, new QTableWidgetItem(QString::number(p, 'f', 3)));
            m_sampleProbabilities->setItem(j, 2, new QTableWidgetItem(r.actual[i] >= 0.5f ? tr("yes") : QString()));
        }
        m_sampleProbabilities->resizeColumnsToContents();
    } else if (r.task == TaskKind::ImageToImage) {
        const int64_t per = r.outputs;
        const std::vector<float>* planes[3] = {&r.inputs, &r.predicted, &r.actual};
        for (int k = 0; k < 3; ++k) {
            m_sampleImages[k] = TaskMetricsView::planesToImage(planes[k]->data() + s * per, r.dims);
            m_images[k]->setPixmap(
                QPixmap::fromImage(m_sampleImages[k].scaled(140, 140, Qt::KeepAspectRatio, Qt::FastTransformation)));
        }
        // PSNR on raw pixels: peak 255.
        TaskMetrics one(TaskKind::ImageToImage, per);
        one.add(r.predicted.data() + s * per, r.actual.data() + s * per, 1);
        TaskMetrics all(TaskKind::ImageToImage, per);
        all.add(r.predicted.data(), r.actual.data(), r.count);
        m_metrics->setText(tr("sample %1: PSNR %2 dB; mean over %3 samples %4 dB")
                               .arg(s)
                               .arg(q(formatMetric(one.psnr())))
                               .arg(r.count)
                               .arg(q(formatMetric(all.psnr()))));
    }
}

}  // namespace strata::ui
