// TrainingSettingsPanel: see TrainingSettingsPanel.h.
#include "ui/TrainingSettingsPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QScrollArea>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <qcustomplot.h>

#include "core/train/LrSchedule.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

constexpr int kMaxPreviewPoints = 2000;
constexpr qint64 kAssumedStepsPerEpoch = 100;

QDoubleSpinBox* doubleSpin(QWidget* parent, double lo, double hi, int decimals, double step) {
    auto* spin = new QDoubleSpinBox(parent);
    spin->setRange(lo, hi);
    spin->setDecimals(decimals);
    spin->setSingleStep(step);
    spin->setKeyboardTracking(false);
    return spin;
}

QSpinBox* intSpin(QWidget* parent, int lo, int hi) {
    auto* spin = new QSpinBox(parent);
    spin->setRange(lo, hi);
    spin->setKeyboardTracking(false);
    return spin;
}

void setCombo(QComboBox* combo, const std::string& value) {
    const int i = combo->findData(QString::fromStdString(value));
    combo->setCurrentIndex(i >= 0 ? i : 0);
}

std::string comboValue(const QComboBox* combo) { return combo->currentData().toString().toStdString(); }

}  // namespace

TrainingSettingsPanel::TrainingSettingsPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    buildUi();
    connect(m_doc, &ProjectDocument::settingsChanged, this, &TrainingSettingsPanel::syncFromDocument);
    connect(m_doc, &ProjectDocument::projectReset, this, [this] {
        m_knownTrainSamples = 0;
        syncFromDocument();
    });
    syncFromDocument();
}

void TrainingSettingsPanel::buildUi() {
    auto* root = new QVBoxLayout(this);
    auto* scroll = new QScrollArea(this);
    scroll->setWidgetResizable(true);
    root->addWidget(scroll);
    auto* body = new QWidget(scroll);
    scroll->setWidget(body);
    auto* layout = new QVBoxLayout(body);

    auto* optBox = new QGroupBox(tr("Optimizer"), body);
    auto* optForm = new QFormLayout(optBox);
    m_optimizer = new QComboBox(optBox);
    m_optimizer->addItem(tr("SGD"), "sgd");
    m_optimizer->addItem(tr("Adam"), "adam");
    m_optimizer->addItem(tr("AdamW"), "adamw");
    optForm->addRow(tr("Optimizer"), m_optimizer);
    m_lr = doubleSpin(optBox, 1e-7, 10.0, 7, 0.001);
    optForm->addRow(tr("Learning rate"), m_lr);
    m_momentum = doubleSpin(optBox, 0.0, 0.9999, 4, 0.01);
    optForm->addRow(tr("Momentum"), m_momentum);
    m_nesterov = new QCheckBox(tr("Nesterov momentum"), optBox);
    optForm->addRow(m_nesterov);
    m_weightDecay = doubleSpin(optBox, 0.0, 1.0, 6, 0.0001);
    optForm->addRow(tr("Weight decay"), m_weightDecay);
    m_beta1 = doubleSpin(optBox, 0.0, 0.99999, 5, 0.01);
    optForm->addRow(tr("Adam \u03b21"), m_beta1);
    m_beta2 = doubleSpin(optBox, 0.0, 0.999999, 6, 0.001);
    optForm->addRow(tr("Adam \u03b22"), m_beta2);
    m_eps = doubleSpin(optBox, 1e-12, 1e-2, 12, 1e-8);
    optForm->addRow(tr("Adam \u03b5"), m_eps);
    m_loss = new QComboBox(optBox);
    m_loss->addItem(tr("cross-entropy"), "cross_entropy");
    m_loss->addItem(tr("mean squared error"), "mse");
    m_loss->addItem(tr("binary cross-entropy (logits)"), "bce_logits");
    optForm->addRow(tr("Loss"), m_loss);
    layout->addWidget(optBox);

    auto* schedBox = new QGroupBox(tr("Learning-rate schedule"), body);
    auto* schedForm = new QFormLayout(schedBox);
    m_schedule = new QComboBox(schedBox);
    m_schedule->addItem(tr("constant"), "constant");
    m_schedule->addItem(tr("step decay"), "step");
    m_schedule->addItem(tr("cosine"), "cosine");
    m_schedule->addItem(tr("one-cycle"), "one_cycle");
    schedForm->addRow(tr("Schedule"), m_schedule);
    m_stepEpochs = intSpin(schedBox, 1, 100000);
    m_stepEpochs->setSuffix(tr(" epoch(s)"));
    schedForm->addRow(tr("Decay every"), m_stepEpochs);
    m_stepGamma = doubleSpin(schedBox, 0.0, 1.0, 4, 0.05);
    schedForm->addRow(tr("Decay factor"), m_stepGamma);
    m_minLr = doubleSpin(schedBox, 0.0, 10.0, 7, 0.0001);
    schedForm->addRow(tr("Cosine floor"), m_minLr);
    m_warmup = intSpin(schedBox, 0, 100000000);
    m_warmup->setSuffix(tr(" steps"));
    schedForm->addRow(tr("Linear warm-up"), m_warmup);
    m_lrPlot = new QCustomPlot(schedBox);
    m_lrPlot->setMinimumHeight(150);
    m_lrPlot->xAxis->setLabel(tr("epoch"));
    m_lrPlot->yAxis->setLabel(tr("learning rate"));
    m_lrPlot->addGraph();
    m_lrPlot->graph(0)->setPen(QPen(QColor(148, 103, 189), 1.5));
    m_lrPlot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    schedForm->addRow(m_lrPlot);
    m_lrNote = new QLabel(schedBox);
    m_lrNote->setWordWrap(true);
    m_lrNote->setStyleSheet(QStringLiteral("color: palette(dark);"));
    schedForm->addRow(m_lrNote);
    layout->addWidget(schedBox);

    auto* runBox = new QGroupBox(tr("Run"), body);
    auto* runForm = new QFormLayout(runBox);
    m_epochs = intSpin(runBox, 1, 1000000);
    runForm->addRow(tr("Epochs"), m_epochs);
    m_batch = intSpin(runBox, 1, 1000000);
    runForm->addRow(tr("Batch size"), m_batch);
    m_precision = new QComboBox(runBox);
    m_precision->addItem(tr("fp32"), "fp32");
    m_precision->addItem(tr("bf16 (mixed)"), "bf16");
    m_precision->addItem(tr("fp16 (mixed)"), "fp16");
    m_precision->setItemData(0, tr("Float32 everywhere."), Qt::ToolTipRole);
    m_precision->setItemData(1, tr("Matrix products and convolutions round their inputs to bfloat16 and sum in "
                                   "float32; weights and activations stay float32."),
                             Qt::ToolTipRole);
    m_precision->setItemData(2, tr("Matrix products and convolutions round their inputs to float16 and sum in "
                                   "float32, with dynamic loss scaling (steps whose gradients overflow are "
                                   "skipped); weights and activations stay float32."),
                             Qt::ToolTipRole);
    m_precision->setToolTip(tr("Arithmetic precision of matrix products and convolutions (training.precision)"));
    runForm->addRow(tr("Precision"), m_precision);
    m_seed = new QLineEdit(runBox);
    m_seed->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9]{1,20}")), m_seed));
    runForm->addRow(tr("Seed"), m_seed);
    m_deterministic = new QCheckBox(tr("Deterministic (repeatable, may be slower)"), runBox);
    runForm->addRow(m_deterministic);
    m_threads = intSpin(runBox, 0, 1024);
    m_threads->setSpecialValueText(tr("all cores"));
    runForm->addRow(tr("CPU threads"), m_threads);
    layout->addWidget(runBox);

    auto* stopBox = new QGroupBox(tr("Early stopping, clipping, checkpoints"), body);
    auto* stopForm = new QFormLayout(stopBox);
    m_patience = intSpin(stopBox, 0, 100000);
    m_patience->setSpecialValueText(tr("off"));
    m_patience->setSuffix(tr(" epoch(s)"));
    stopForm->addRow(tr("Patience"), m_patience);
    m_metric = new QComboBox(stopBox);
    m_metric->addItem(tr("validation loss"), "val_loss");
    m_metric->addItem(tr("validation accuracy"), "val_acc");
    stopForm->addRow(tr("Metric"), m_metric);
    m_clip = doubleSpin(stopBox, 0.0, 1e6, 4, 0.1);
    m_clip->setSpecialValueText(tr("off"));
    stopForm->addRow(tr("Clip gradient norm"), m_clip);
    auto* dirRow = new QWidget(stopBox);
    auto* dirLayout = new QHBoxLayout(dirRow);
    dirLayout->setContentsMargins(0, 0, 0, 0);
    m_checkpointDir = new QLineEdit(dirRow);
    m_checkpointDir->setPlaceholderText(tr("(no checkpoints)"));
    auto* browse = new QToolButton(dirRow);
    browse->setText(QStringLiteral("..."));
    dirLayout->addWidget(m_checkpointDir, 1);
    dirLayout->addWidget(browse);
    connect(browse, &QToolButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"), m_checkpointDir->text());
        if (dir.isEmpty()) return;
        m_checkpointDir->setText(dir);
        commit();
    });
    stopForm->addRow(tr("Checkpoint folder"), dirRow);
    layout->addWidget(stopBox);
    layout->addStretch(1);

    for (QDoubleSpinBox* spin : {m_lr, m_momentum, m_weightDecay, m_beta1, m_beta2, m_eps, m_stepGamma, m_minLr, m_clip})
        connect(spin, &QDoubleSpinBox::valueChanged, this, &TrainingSettingsPanel::commit);
    for (QSpinBox* spin : {m_stepEpochs, m_warmup, m_epochs, m_batch, m_patience, m_threads})
        connect(spin, &QSpinBox::valueChanged, this, &TrainingSettingsPanel::commit);
    for (QComboBox* combo : {m_optimizer, m_loss, m_schedule, m_precision, m_metric})
        connect(combo, &QComboBox::currentIndexChanged, this, &TrainingSettingsPanel::commit);
    for (QCheckBox* check : {m_nesterov, m_deterministic})
        connect(check, &QCheckBox::toggled, this, &TrainingSettingsPanel::commit);
    for (QLineEdit* edit : {m_seed, m_checkpointDir})
        connect(edit, &QLineEdit::editingFinished, this, &TrainingSettingsPanel::commit);
}

void TrainingSettingsPanel::syncFromDocument() {
    const TrainingSettings& s = m_doc->project().training;
    m_updating = true;
    setCombo(m_optimizer, s.optimizer);
    m_lr->setValue(s.learningRate);
    m_momentum->setValue(s.momentum);
    m_nesterov->setChecked(s.nesterov);
    m_weightDecay->setValue(s.weightDecay);
    m_beta1->setValue(s.beta1);
    m_beta2->setValue(s.beta2);
    m_eps->setValue(s.eps);
    setCombo(m_loss, s.loss);
    setCombo(m_schedule, s.schedule);
    m_stepEpochs->setValue(s.stepEpochs);
    m_stepGamma->setValue(s.stepGamma);
    m_minLr->setValue(s.minLearningRate);
    m_warmup->setValue(s.warmupSteps);
    m_epochs->setValue(s.epochs);
    m_batch->setValue(s.batchSize);
    setCombo(m_precision, s.precision);
    m_seed->setText(QString::number(qulonglong(s.seed)));
    m_deterministic->setChecked(s.deterministic);
    m_threads->setValue(s.threads);
    m_patience->setValue(s.earlyStoppingPatience);
    setCombo(m_metric, s.earlyStoppingMetric);
    m_clip->setValue(s.clipNorm);
    m_checkpointDir->setText(QString::fromStdString(s.checkpointDir));
    m_updating = false;
    updateEnabled();
    updatePreview();
}

TrainingSettings TrainingSettingsPanel::settingsFromWidgets() const {
    TrainingSettings s = m_doc->project().training;
    s.optimizer = comboValue(m_optimizer);
    s.learningRate = m_lr->value();
    s.momentum = m_momentum->value();
    s.nesterov = m_nesterov->isChecked();
    s.weightDecay = m_weightDecay->value();
    s.beta1 = m_beta1->value();
    s.beta2 = m_beta2->value();
    s.eps = m_eps->value();
    s.loss = comboValue(m_loss);
    s.schedule = comboValue(m_schedule);
    s.stepEpochs = m_stepEpochs->value();
    s.stepGamma = m_stepGamma->value();
    s.minLearningRate = m_minLr->value();
    s.warmupSteps = m_warmup->value();
    s.epochs = m_epochs->value();
    s.batchSize = m_batch->value();
    s.precision = comboValue(m_precision);
    bool ok = false;
    const qulonglong seed = m_seed->text().toULongLong(&ok);
    if (ok) s.seed = seed;
    s.deterministic = m_deterministic->isChecked();
    s.threads = m_threads->value();
    s.earlyStoppingPatience = m_patience->value();
    s.earlyStoppingMetric = comboValue(m_metric);
    s.clipNorm = m_clip->value();
    s.checkpointDir = m_checkpointDir->text().trimmed().toStdString();
    return s;
}

void TrainingSettingsPanel::commit() {
    if (m_updating) return;
    const TrainingSettings s = settingsFromWidgets();
    if (s == m_doc->project().training) return;
    m_doc->setTrainingSettings(s);  // settingsChanged re-syncs the widgets and the preview
}

void TrainingSettingsPanel::updateEnabled() {
    const std::string opt = comboValue(m_optimizer);
    const bool sgd = opt == "sgd";
    m_momentum->setEnabled(sgd);
    m_nesterov->setEnabled(sgd);
    m_beta1->setEnabled(!sgd);
    m_beta2->setEnabled(!sgd);
    m_eps->setEnabled(!sgd);
    const std::string schedule = comboValue(m_schedule);
    m_stepEpochs->setEnabled(schedule == "step");
    m_stepGamma->setEnabled(schedule == "step");
    m_minLr->setEnabled(schedule == "cosine");
    m_metric->setEnabled(m_patience->value() > 0);
}

void TrainingSettingsPanel::setTrainSampleCount(qint64 count) {
    m_knownTrainSamples = count;
    updatePreview();
}

qint64 TrainingSettingsPanel::trainSamplesEstimate() const {
    if (m_knownTrainSamples > 0) return m_knownTrainSamples;
    const DatasetSettings& d = m_doc->project().dataset;
    if (d.kind == "synthetic") {
        qint64 n = qint64(double(d.syntheticSamples) * (1.0 - d.validationSplit));
        if (d.trainLimit > 0) n = std::min<qint64>(n, d.trainLimit);
        return n;
    }
    return 0;
}

qint64 TrainingSettingsPanel::previewStepsPerEpoch() const {
    const qint64 samples = trainSamplesEstimate();
    const qint64 batch = std::max(1, m_batch->value());
    return samples > 0 ? (samples + batch - 1) / batch : kAssumedStepsPerEpoch;
}

int TrainingSettingsPanel::previewPointCount() const { return m_lrPlot->graph(0)->data()->size(); }

double TrainingSettingsPanel::previewValueAt(int index) const {
    return (m_lrPlot->graph(0)->data()->constBegin() + index)->value;
}

void TrainingSettingsPanel::updatePreview() {
    const TrainingSettings s = settingsFromWidgets();
    const qint64 perEpoch = previewStepsPerEpoch();
    const qint64 total = std::max<qint64>(1, perEpoch * qint64(s.epochs));
    // One point per step for short runs; long runs are sampled at evenly spaced steps.
    const qint64 stride = std::max<qint64>(1, (total + kMaxPreviewPoints - 1) / kMaxPreviewPoints);
    QVector<double> x, y;
    for (qint64 step = 0; step < total; step += stride) {
        x << double(step) / double(perEpoch);
        y << learningRateAt(s, step, perEpoch);
    }
    if ((total - 1) % stride != 0) {
        x << double(total - 1) / double(perEpoch);
        y << learningRateAt(s, total - 1, perEpoch);
    }
    m_lrPlot->graph(0)->setData(x, y, true);
    m_lrPlot->xAxis->setRange(0, double(total) / double(perEpoch));
    double top = 0;
    for (double v : std::as_const(y)) top = std::max(top, v);
    m_lrPlot->yAxis->setRange(0, top > 0 ? top * 1.1 : 1.0);
    m_lrPlot->replot(QCustomPlot::rpQueuedReplot);
    m_lrNote->setText(trainSamplesEstimate() > 0
                          ? tr("%1 steps per epoch (%2 training samples, batch %3); %4 steps in all.")
                                .arg(perEpoch)
                                .arg(trainSamplesEstimate())
                                .arg(s.batchSize)
                                .arg(total)
                          : tr("Assuming %1 steps per epoch; load a dataset preview for the exact count.")
                                .arg(perEpoch));
}

}  // namespace strata::ui
