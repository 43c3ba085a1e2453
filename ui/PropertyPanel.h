// PropertyPanel: edits the selected node's name and parameters with widgets
// made from its layer type's ParamSpecs (spin boxes that keep what was typed and
// say under the box why a value outside the allowed range is not applied, check
// boxes, choice boxes, a validated line edit for integer lists); each committed
// change is one undo command. A node's weights can be frozen (its Trainable box) and
// the head replaced for another number of classes (transfer learning). Shows the node's output shape and parameter
// count, and for the whole graph the parameter total and the training run's predicted peak memory on the project's
// device (MemoryEstimate) for a batch size.
#pragma once

#include <QMap>
#include <QWidget>
#include <vector>

#include "core/layers/Layer.h"

class QCheckBox;
class QGroupBox;
class QPushButton;
class QLabel;
class QLineEdit;
class QFormLayout;
class QSpinBox;

namespace strata::ui {

class GraphScene;
class ProjectDocument;

class PropertyPanel : public QWidget {
    Q_OBJECT
public:
    PropertyPanel(ProjectDocument* doc, GraphScene* scene, QWidget* parent = nullptr);

    // The node being edited, or -1.
    int nodeId() const { return m_node; }
    // The editor of a parameter (QSpinBox, QDoubleSpinBox, QCheckBox, QComboBox or QLineEdit), or null.
    QWidget* editor(const QString& param) const { return m_editors.value(param); }
    QLineEdit* nameEdit() const { return m_name; }
    // Transfer learning: the node's "Trainable" box (unchecked: frozen), and the head's "Replace head" row (the
    // class count and its button), shown on the last Dense layer only.
    QCheckBox* trainableBox() const { return m_trainable; }
    QSpinBox* headClassesBox() const { return m_headClasses; }
    QPushButton* replaceHeadButton() const { return m_replaceHead; }
    QSpinBox* batchSizeBox() const { return m_batch; }
    QString shapeText() const;
    QString parameterCountText() const;
    QString memoryText() const;
    QString totalParametersText() const;
    // Why the value typed into a parameter's editor is not applied; empty when it is.
    QString fieldErrorText(const QString& param) const;

private:
    void onSelectionChanged();
    void rebuildForm();
    void refreshValues();
    void refreshGraphSummary();
    void commitName();
    void commitIntList(const QString& param);
    // Shows or clears the parameter's error line; true when `value` is within [min, max].
    bool checkRange(const QString& name, double value, double min, double max);

    ProjectDocument* m_doc;
    GraphScene* m_scene;
    int m_node = -1;
    std::string m_type;

    QGroupBox* m_nodeBox;
    QLabel* m_placeholder;
    QLabel* m_title;
    QLineEdit* m_name;
    QFormLayout* m_topForm;
    QCheckBox* m_trainable;
    QWidget* m_headRow;
    QSpinBox* m_headClasses;
    QPushButton* m_replaceHead;
    QWidget* m_paramsHost;
    QFormLayout* m_paramsForm;
    QLabel* m_shape;
    QLabel* m_count;
    QLabel* m_problems;
    QMap<QString, QWidget*> m_editors;
    std::vector<strata::ParamSpec> m_specs;

    QLabel* m_total;
    QSpinBox* m_batch;
    QLabel* m_memory;
};

}  // namespace strata::ui
