// TrainingSettingsPanel: see TrainingSettingsPanel.h.
#include "ui/TrainingSettingsPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include <qcustomplot.h>

#include "core/train/LrSchedule.h"
#include "ui/SettingWidgets.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

constexpr int kMaxPreviewPoints = 2000;
constexpr qint64 kAssumedStepsPerEpoch = 100;

}  // namespace

TrainingSettingsPanel::TrainingSettingsPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    buildUi();
    connect(m_doc, &ProjectDocument::settingsChanged, this, &TrainingSettingsPanel::syncFromDocument);
    connect(m_doc, &ProjectDocument::projectReset, this, [this] {
        m_knownTrainSamples = 0;
        m_editors.clearRefusals();  // another project: what was refused in the last one is gone
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
    // The groups flow into columns as the panel widens (arrangeGroups): docked beside the dashboard it is
    // short and wide.
    m_groups = new QGridLayout(body);

    // Ranges, choices, labels and tooltips come from the settings table (core/graph/Settings.cpp);
    // the decimals shown and the step sizes are this panel's.
    auto* optBox = new QGroupBox(tr("Optimizer"), body);
    auto* optForm = new QFormLayout(optBox);
    // Every field but a check box has a line under it that says why a value typed there is not applied.
    auto row = [this](QFormLayout* form, const char* key, QWidget* editor) {
        if (qobject_cast<QCheckBox*>(editor))
            form->addRow(editor);
        else
            form->addRow(settingLabel(m_editors.find(key)), withFieldError(editor));
    };
    m_optimizer = m_editors.add<QComboBox>("optimizer", optBox);
    row(optForm, "optimizer", m_optimizer);
    m_lr = m_editors.add<QDoubleSpinBox>("learning_rate", optBox, 7);
    m_lr->setSingleStep(0.001);
    row(optForm, "learning_rate", m_lr);
    m_momentum = m_editors.add<QDoubleSpinBox>("momentum", optBox, 4);
    m_momentum->setSingleStep(0.01);
    row(optForm, "momentum", m_momentum);
    m_nesterov = m_editors.add<QCheckBox>("nesterov", optBox);
    row(optForm, "nesterov", m_nesterov);
    m_weightDecay = m_editors.add<QDoubleSpinBox>("weight_decay", optBox, 6);
    m_weightDecay->setSingleStep(0.0001);
    row(optForm, "weight_decay", m_weightDecay);
    m_beta1 = m_editors.add<QDoubleSpinBox>("beta1", optBox, 5);
    m_beta1->setSingleStep(0.01);
    row(optForm, "beta1", m_beta1);
    m_beta2 = m_editors.add<QDoubleSpinBox>("beta2", optBox, 6);
    m_beta2->setSingleStep(0.001);
    row(optForm, "beta2", m_beta2);
    m_eps = m_editors.add<QDoubleSpinBox>("eps", optBox, 12);
    m_eps->setSingleStep(1e-8);
    row(optForm, "eps", m_eps);
    m_loss = m_editors.add<QComboBox>("loss", optBox);
    row(optForm, "loss", m_loss);
    auto* huberDelta = m_editors.add<QDoubleSpinBox>("huber_delta", optBox, 6);
    huberDelta->setSingleStep(0.1);
    row(optForm, "huber_delta", huberDelta);
    m_groupBoxes << optBox;

    auto* schedBox = new QGroupBox(tr("Learning-rate schedule"), body);
    auto* schedForm = new QFormLayout(schedBox);
    m_schedule = m_editors.add<QComboBox>("schedule", schedBox);
    row(schedForm, "schedule", m_schedule);
    m_stepEpochs = m_editors.add<QSpinBox>("step_epochs", schedBox);
    m_stepEpochs->setSuffix(tr(" epoch(s)"));
    row(schedForm, "step_epochs", m_stepEpochs);
    m_stepGamma = m_editors.add<QDoubleSpinBox>("step_gamma", schedBox, 4);
    m_stepGamma->setSingleStep(0.05);
    row(schedForm, "step_gamma", m_stepGamma);
    m_minLr = m_editors.add<QDoubleSpinBox>("min_learning_rate", schedBox, 7);
    m_minLr->setSingleStep(0.0001);
    row(schedForm, "min_learning_rate", m_minLr);
    m_warmup = m_editors.add<QSpinBox>("warmup_steps", schedBox);
    m_warmup->setSuffix(tr(" steps"));
    row(schedForm, "warmup_steps", m_warmup);
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
    m_groupBoxes << schedBox;

    auto* runBox = new QGroupBox(tr("Run"), body);
    auto* runForm = new QFormLayout(runBox);
    m_epochs = m_editors.add<QSpinBox>("epochs", runBox);
    row(runForm, "epochs", m_epochs);
    m_batch = m_editors.add<QSpinBox>("batch_size", runBox);
    row(runForm, "batch_size", m_batch);
    m_precision = m_editors.add<QComboBox>("precision", runBox);
    row(runForm, "precision", m_precision);
    m_seed = m_editors.add<QLineEdit>("seed", runBox);
    row(runForm, "seed", m_seed);
    m_deterministic = m_editors.add<QCheckBox>("deterministic", runBox);
    row(runForm, "deterministic", m_deterministic);
    m_threads = m_editors.add<QSpinBox>("threads", runBox);
    showZeroAs(m_threads, tr("all cores"));
    row(runForm, "threads", m_threads);
    // Data parallel: strata-train under mpirun, or several devices in training.device.
    row(runForm, "dist_mode", m_editors.add<QComboBox>("dist_mode", runBox));
    auto* localSteps = m_editors.add<QSpinBox>("local_sgd_steps", runBox);
    localSteps->setSuffix(tr(" steps"));
    row(runForm, "local_sgd_steps", localSteps);
    m_groupBoxes << runBox;

    auto* stopBox = new QGroupBox(tr("Early stopping, clipping, checkpoints"), body);
    auto* stopForm = new QFormLayout(stopBox);
    m_patience = m_editors.add<QSpinBox>("early_stopping_patience", stopBox);
    showZeroAs(m_patience, tr("off"));  // epochs without improvement; no suffix, as "off epoch(s)" would read badly
    row(stopForm, "early_stopping_patience", m_patience);
    m_metric = m_editors.add<QComboBox>("early_stopping_metric", stopBox);
    row(stopForm, "early_stopping_metric", m_metric);
    m_clip = m_editors.add<QDoubleSpinBox>("clip_norm", stopBox, 4);
    m_clip->setSingleStep(0.1);
    showZeroAs(m_clip, tr("off"));
    row(stopForm, "clip_norm", m_clip);
    auto* dirRow = new QWidget(stopBox);
    auto* dirLayout = new QHBoxLayout(dirRow);
    dirLayout->setContentsMargins(0, 0, 0, 0);
    m_checkpointDir = m_editors.add<QLineEdit>("checkpoint_dir", dirRow);
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
    stopForm->addRow(settingLabel(m_editors.find("checkpoint_dir")), withFieldError(dirRow, m_checkpointDir));
    // The checkpoint a new run starts from (an imported model's weights, `strata-train import`).
    auto* initFrom = m_editors.add<QLineEdit>("init_from", stopBox);
    initFrom->setPlaceholderText(tr("(seeded initial weights)"));
    row(stopForm, "init_from", initFrom);
    m_groupBoxes << stopBox;
    arrangeGroups();

    m_editors.connectAll(this, [this] { commit(); });
}

void TrainingSettingsPanel::arrangeGroups() {
    const int columns = std::clamp(width() / 420, 1, int(m_groupBoxes.size()));
    if (columns == m_groupColumns) return;
    m_groupColumns = columns;
    for (QGroupBox* box : std::as_const(m_groupBoxes)) m_groups->removeWidget(box);
    for (int i = 0; i < m_groupBoxes.size(); ++i)
        m_groups->addWidget(m_groupBoxes[i], i / columns, i % columns, Qt::AlignTop);
    for (int c = 0; c < int(m_groupBoxes.size()); ++c) m_groups->setColumnStretch(c, c < columns ? 1 : 0);
    m_groups->setRowStretch(int((m_groupBoxes.size() + columns - 1) / columns), 1);
}

void TrainingSettingsPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    arrangeGroups();
}

void TrainingSettingsPanel::syncFromDocument() {
    const TrainingSettings& s = m_doc->project().training;
    m_updating = true;
    m_editors.show(s);
    m_updating = false;
    updateEnabled();
    updatePreview();
}

TrainingSettings TrainingSettingsPanel::settingsFromWidgets() const {
    TrainingSettings s = m_doc->project().training;
    m_editors.read(s);
    return s;
}

void TrainingSettingsPanel::commit() {
    if (m_updating) return;
    const TrainingSettings s = settingsFromWidgets();
    if (s == m_doc->project().training) return;
    m_doc->setTrainingSettings(s);  // settingsChanged re-syncs the widgets and the preview
}

void TrainingSettingsPanel::updateEnabled() {
    // Which settings apply when (momentum with SGD only) is the settings table's, read here with the values
    // the widgets hold.
    m_editors.enableApplicable(m_doc->project().dataset, settingsFromWidgets());
}

void TrainingSettingsPanel::setTrainSampleCount(qint64 count) {
    m_knownTrainSamples = count;
    m_countFor = m_doc->project().dataset;
    updatePreview();
}

qint64 TrainingSettingsPanel::trainSamplesEstimate() const {
    // A count of other data settings (a limit changed since, another project) says nothing.
    if (m_knownTrainSamples > 0 && m_doc->project().dataset == m_countFor) return m_knownTrainSamples;
    const DatasetSettings& d = m_doc->project().dataset;
    if (d.kind == DatasetKind::Synthetic) {
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

QString TrainingSettingsPanel::previewNote() const { return m_lrNote->text(); }

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
    m_lrNote->setText(
        trainSamplesEstimate() > 0
            ? tr("%1 steps per epoch (%2 training samples, batch %3); %4 steps in all.")
                  .arg(perEpoch)
                  .arg(trainSamplesEstimate())
                  .arg(s.batchSize)
                  .arg(total)
            : tr("Assuming %1 steps per epoch; load a dataset preview for the exact count.").arg(perEpoch));
}

}  // namespace strata::ui
