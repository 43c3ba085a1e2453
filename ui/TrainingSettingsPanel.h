// TrainingSettingsPanel: edits the project's training settings (optimizer,
// learning rate and schedule, epochs, batch, precision, seed, early stopping,
// clipping, checkpoint folder) through ProjectDocument (undoable), with a
// small plot of the learning rate over the whole run. The plot evaluates
// core's learningRateAt(), the same formula the Trainer uses.
#pragma once

#include <QWidget>

#include "core/graph/Project.h"
#include "ui/SettingWidgets.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QDoubleSpinBox;
class QGridLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace strata::ui {

class ProjectDocument;

class TrainingSettingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit TrainingSettingsPanel(ProjectDocument* doc, QWidget* parent = nullptr);

    TrainingSettings settingsFromWidgets() const;
    // Steps per epoch the LR preview assumes (from the known training-set size and the batch size).
    qint64 previewStepsPerEpoch() const;
    // Points in the LR preview (one per step, or a fixed number of samples over long runs).
    int previewPointCount() const;
    double previewValueAt(int index) const;

public slots:
    void syncFromDocument();
    // The training-set size of the project's data as it is set now, e.g. from a dataset preview or the data
    // check; 0: estimate from the dataset settings. Forgotten when the data settings change.
    void setTrainSampleCount(qint64 count);
    // The LR plot's note: "938 steps per epoch (60000 training samples, batch 64)..." or "Assuming 100...".
    QString previewNote() const;

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void buildUi();
    // One column of groups per 420 px of width.
    void arrangeGroups();
    void commit();
    void updateEnabled();
    void updatePreview();
    qint64 trainSamplesEstimate() const;

    ProjectDocument* m_doc;
    bool m_updating = false;
    qint64 m_knownTrainSamples = 0;
    DatasetSettings m_countFor;  // the data settings m_knownTrainSamples was counted with
    SettingEditors<TrainingSettings> m_editors{trainingSettingSpecs()};

    QComboBox* m_optimizer = nullptr;
    QDoubleSpinBox *m_lr = nullptr, *m_momentum = nullptr, *m_weightDecay = nullptr;
    QCheckBox* m_nesterov = nullptr;
    QDoubleSpinBox *m_beta1 = nullptr, *m_beta2 = nullptr, *m_eps = nullptr;
    QComboBox* m_loss = nullptr;
    QComboBox* m_schedule = nullptr;
    QSpinBox* m_stepEpochs = nullptr;
    QDoubleSpinBox *m_stepGamma = nullptr, *m_minLr = nullptr;
    QSpinBox* m_warmup = nullptr;
    QSpinBox *m_epochs = nullptr, *m_batch = nullptr;
    QComboBox* m_precision = nullptr;
    QLineEdit* m_seed = nullptr;
    QCheckBox* m_deterministic = nullptr;
    QSpinBox* m_patience = nullptr;
    QComboBox* m_metric = nullptr;
    QDoubleSpinBox* m_clip = nullptr;
    QLineEdit* m_checkpointDir = nullptr;
    QSpinBox* m_threads = nullptr;
    QCustomPlot* m_lrPlot = nullptr;
    QGridLayout* m_groups = nullptr;
    QList<QGroupBox*> m_groupBoxes;
    int m_groupColumns = 0;
    QLabel* m_lrNote = nullptr;
};

}  // namespace strata::ui
