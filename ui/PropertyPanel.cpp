// PropertyPanel: node parameters and graph summary.
#include "ui/PropertyPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QVBoxLayout>
#include <climits>

#include "core/backend/BackendRegistry.h"
#include "core/graph/Transfer.h"
#include "core/layers/LayerRegistry.h"
#include "core/train/MemoryEstimate.h"
#include "ui/FieldError.h"
#include "ui/GraphScene.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

int clampToInt(double v) { return int(std::clamp(v, double(INT_MIN), double(INT_MAX))); }

QString bytesText(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        ++u;
    }
    return QStringLiteral("%1 %2").arg(bytes, 0, 'f', u == 0 ? 0 : 1).arg(QLatin1String(units[u]));
}

QString intListText(const strata::Json& value) {
    if (!value.is_array()) return QString::fromStdString(value.dump());
    QStringList parts;
    for (const auto& v : value) parts << QString::fromStdString(v.dump());
    return parts.join(QStringLiteral(", "));
}

}  // namespace

PropertyPanel::PropertyPanel(ProjectDocument* doc, GraphScene* scene, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_scene(scene) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);

    m_placeholder = new QLabel(tr("Select a node to edit its parameters."), this);
    m_placeholder->setWordWrap(true);
    m_placeholder->setStyleSheet(QStringLiteral("color: #666;"));
    layout->addWidget(m_placeholder);

    m_nodeBox = new QGroupBox(tr("Node"), this);
    auto* nodeLayout = new QVBoxLayout(m_nodeBox);
    m_title = new QLabel(m_nodeBox);
    m_title->setWordWrap(true);
    m_title->setTextFormat(Qt::RichText);
    nodeLayout->addWidget(m_title);
    auto* top = m_topForm = new QFormLayout;
    m_name = new QLineEdit(m_nodeBox);
    m_name->setObjectName(QStringLiteral("nodeName"));
    top->addRow(tr("Name"), m_name);
    m_trainable = new QCheckBox(tr("Train its weights"), m_nodeBox);
    m_trainable->setObjectName(QStringLiteral("nodeTrainable"));
    m_trainable->setToolTip(
        tr("Unchecked: the node is frozen. Its weights keep their values (initial, or from "
           "--init-from) and get no gradient, which saves their backward work."));
    top->addRow(tr("Trainable"), m_trainable);
    m_headRow = new QWidget(m_nodeBox);
    auto* headLayout = new QHBoxLayout(m_headRow);
    headLayout->setContentsMargins(0, 0, 0, 0);
    m_headClasses = new QSpinBox(m_headRow);
    m_headClasses->setObjectName(QStringLiteral("headClasses"));
    m_headClasses->setRange(1, 1000000);
    m_headClasses->setSuffix(tr(" classes"));
    m_replaceHead = new QPushButton(tr("Replace head"), m_headRow);
    m_replaceHead->setObjectName(QStringLiteral("replaceHead"));
    m_replaceHead->setToolTip(
        tr("Set this last Dense layer's units to the number of classes and give it new "
           "initial weights (it is renamed <name>_new, so weights loaded by name skip it)."));
    headLayout->addWidget(m_headClasses, 1);
    headLayout->addWidget(m_replaceHead);
    top->addRow(tr("Head"), m_headRow);
    nodeLayout->addLayout(top);
    m_paramsHost = new QWidget(m_nodeBox);
    m_paramsForm = new QFormLayout(m_paramsHost);
    m_paramsForm->setContentsMargins(0, 0, 0, 0);
    nodeLayout->addWidget(m_paramsHost);
    auto* info = new QFormLayout;
    m_shape = new QLabel(m_nodeBox);
    m_shape->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_count = new QLabel(m_nodeBox);
    info->addRow(tr("Output"), m_shape);
    info->addRow(tr("Parameters"), m_count);
    nodeLayout->addLayout(info);
    m_problems = new QLabel(m_nodeBox);
    m_problems->setWordWrap(true);
    m_problems->setStyleSheet(QStringLiteral("color: #d63b3b;"));
    nodeLayout->addWidget(m_problems);
    layout->addWidget(m_nodeBox);

    auto* graphBox = new QGroupBox(tr("Graph"), this);
    auto* graphForm = new QFormLayout(graphBox);
    m_total = new QLabel(graphBox);
    m_batch = new QSpinBox(graphBox);
    m_batch->setObjectName(QStringLiteral("estimateBatch"));
    // The estimate's batch: any the project may have; one outside that range stays as typed and is refused
    // with the reason under the box (issue 17).
    acceptAnyNumber(m_batch);
    m_batch->setValue(std::max(1, doc->project().training.batchSize));
    m_memory = new QLabel(graphBox);
    m_memory->setWordWrap(true);
    m_memory->setObjectName(QStringLiteral("memoryEstimate"));
    graphForm->addRow(tr("Total parameters"), m_total);
    graphForm->addRow(tr("Batch size"), withFieldError(m_batch));
    graphForm->addRow(tr("Memory"), m_memory);
    layout->addWidget(graphBox);
    layout->addStretch(1);

    connect(m_name, &QLineEdit::editingFinished, this, &PropertyPanel::commitName);
    connect(m_trainable, &QCheckBox::toggled, this, [this](bool on) {
        if (m_node >= 0) m_doc->setTrainable(m_node, on);
    });
    connect(m_replaceHead, &QPushButton::clicked, this, [this] {
        QString error;
        if (!m_doc->replaceHead(m_headClasses->value(), &error) && !error.isEmpty()) m_problems->setText(error);
    });
    connect(m_batch, &QSpinBox::valueChanged, this, &PropertyPanel::refreshGraphSummary);
    connect(scene, &QGraphicsScene::selectionChanged, this, &PropertyPanel::onSelectionChanged);
    connect(doc, &ProjectDocument::analysisChanged, this, [this] {
        onSelectionChanged();
        refreshGraphSummary();
    });
    // Another project: a batch refused in the last one's estimate is not this one's.
    connect(doc, &ProjectDocument::projectReset, this, [this] { setFieldError(m_batch, QString()); });
    connect(doc, &ProjectDocument::settingsChanged, this, [this] {
        if (fieldError(m_batch).isEmpty()) m_batch->setValue(std::max(1, m_doc->project().training.batchSize));
        refreshGraphSummary();  // the device or the optimizer may have changed
    });
    onSelectionChanged();
    refreshGraphSummary();
}

void PropertyPanel::onSelectionChanged() {
    const QList<int> ids = m_scene->selectedNodeIds();
    const strata::Node* node = ids.size() == 1 ? m_doc->graph().node(ids.front()) : nullptr;
    const int id = node ? node->id : -1;
    const std::string type = node ? node->type : std::string();
    if (id != m_node || type != m_type) {
        m_node = id;
        m_type = type;
        rebuildForm();
    }
    m_placeholder->setText(ids.size() > 1
                               ? tr("%1 nodes selected. Select one node to edit its parameters.").arg(ids.size())
                               : tr("Select a node to edit its parameters."));
    m_placeholder->setVisible(m_node < 0);
    m_nodeBox->setVisible(m_node >= 0);
    refreshValues();
}

void PropertyPanel::rebuildForm() {
    // Replace the host rather than removing rows: an editor may be inside its own signal handler.
    m_paramsHost->hide();
    m_paramsHost->deleteLater();
    m_paramsHost = new QWidget(m_nodeBox);
    m_paramsForm = new QFormLayout(m_paramsHost);
    m_paramsForm->setContentsMargins(0, 0, 0, 0);
    static_cast<QVBoxLayout*>(m_nodeBox->layout())->insertWidget(2, m_paramsHost);
    m_editors.clear();
    m_specs.clear();
    const strata::LayerType* lt = m_node >= 0 ? strata::layerRegistry().find(m_type) : nullptr;
    if (!lt) {
        m_title->setText(m_node >= 0 ? tr("<b>%1</b><br>Unknown layer type.").arg(QString::fromStdString(m_type))
                                     : QString());
        return;
    }
    m_title->setText(QStringLiteral("<b>%1</b><br><span style='color:#555'>%2</span>")
                         .arg(QString::fromStdString(lt->name()).toHtmlEscaped(),
                              QString::fromStdString(lt->description()).toHtmlEscaped()));
    m_specs = lt->paramSpecs();
    for (const strata::ParamSpec& spec : m_specs) {
        const QString name = QString::fromStdString(spec.name);
        const int node = m_node;
        QWidget* editor = nullptr;
        switch (spec.kind) {
            // Numbers: the box takes any value, so nothing typed is changed behind the user's back; a value
            // outside the parameter's range is not applied, and the line under the box says why until it is
            // fixed (issue 17).
            case strata::ParamSpec::Kind::Int: {
                auto* box = new QSpinBox(m_paramsHost);
                box->setRange(INT_MIN, INT_MAX);
                box->setKeyboardTracking(false);
                const double lo = spec.min, hi = spec.max;
                connect(box, &QSpinBox::valueChanged, this, [this, node, name, lo, hi](int v) {
                    if (checkRange(name, v, lo, hi)) m_doc->setParam(node, name, strata::Json(int64_t(v)));
                });
                editor = box;
                break;
            }
            case strata::ParamSpec::Kind::Float: {
                auto* box = new QDoubleSpinBox(m_paramsHost);
                box->setDecimals(6);
                box->setRange(-1e12, 1e12);
                box->setSingleStep(spec.max - spec.min <= 1.0 ? 0.01 : 0.1);
                box->setKeyboardTracking(false);
                const double lo = spec.min, hi = spec.max;
                connect(box, &QDoubleSpinBox::valueChanged, this, [this, node, name, lo, hi](double v) {
                    if (checkRange(name, v, lo, hi)) m_doc->setParam(node, name, strata::Json(v));
                });
                editor = box;
                break;
            }
            case strata::ParamSpec::Kind::Bool: {
                auto* box = new QCheckBox(m_paramsHost);
                connect(box, &QCheckBox::toggled, this,
                        [this, node, name](bool v) { m_doc->setParam(node, name, strata::Json(v)); });
                editor = box;
                break;
            }
            case strata::ParamSpec::Kind::Choice: {
                auto* box = new QComboBox(m_paramsHost);
                for (const std::string& c : spec.choices) box->addItem(QString::fromStdString(c));
                connect(box, &QComboBox::currentTextChanged, this, [this, node, name](const QString& v) {
                    m_doc->setParam(node, name, strata::Json(v.toStdString()));
                });
                editor = box;
                break;
            }
            case strata::ParamSpec::Kind::IntList: {
                auto* edit = new QLineEdit(m_paramsHost);
                edit->setPlaceholderText(tr("e.g. 3, 3"));
                connect(edit, &QLineEdit::editingFinished, this, [this, name] { commitIntList(name); });
                editor = edit;
                break;
            }
        }
        editor->setObjectName(QStringLiteral("param_") + name);
        QString tip = QString::fromStdString(spec.help);
        const QString allowed = QString::fromStdString(spec.allowedText());
        if (!allowed.isEmpty())
            tip += (tip.isEmpty() ? QString() : QStringLiteral("\n")) + tr("Allowed: %1").arg(allowed);
        editor->setToolTip(tip);
        auto* label = new QLabel(name, m_paramsHost);
        label->setToolTip(tip);
        m_paramsForm->addRow(label, withFieldError(editor));  // the line "error_param_<name>" under it
        m_editors.insert(name, editor);
    }
    m_paramsHost->show();
}

bool PropertyPanel::checkRange(const QString& name, double value, double min, double max) {
    const bool ok = value >= min && value <= max;
    setFieldError(m_editors.value(name), ok ? QString()
                                            : tr("%1 is not applied: %2 must be %3 to %4.")
                                                  .arg(QLocale(QLocale::English).toString(value, 'g', 12), name,
                                                       QLocale(QLocale::English).toString(min, 'g', 12),
                                                       QLocale(QLocale::English).toString(max, 'g', 12)));
    return ok;
}

QString PropertyPanel::fieldErrorText(const QString& name) const { return fieldError(m_editors.value(name)); }

void PropertyPanel::refreshValues() {
    const strata::Node* node = m_doc->graph().node(m_node);
    if (!node) return;
    if (!m_name->hasFocus() || m_name->text().isEmpty()) m_name->setText(QString::fromStdString(node->name));
    {
        const QSignalBlocker block(m_trainable);
        m_trainable->setChecked(node->trainable);
    }
    const bool head = strata::headNode(m_doc->graph()) == m_node;
    m_topForm->setRowVisible(m_headRow, head);
    if (head) {
        // The data set's classes when the settings tell them; else the head's units, for the user to change.
        const int known = m_doc->knownClassCount();
        const QSignalBlocker block(m_headClasses);
        m_headClasses->setValue(known > 0 ? known : node->params.value("units", 1));
    }
    for (const strata::ParamSpec& spec : m_specs) {
        QWidget* editor = m_editors.value(QString::fromStdString(spec.name));
        if (!editor) continue;
        // A refused value stays as typed until the user fixes it.
        if (!fieldErrorText(QString::fromStdString(spec.name)).isEmpty()) continue;
        const bool present = node->params.is_object() && node->params.contains(spec.name);
        const strata::Json value = present ? node->params.at(spec.name) : spec.defaultValue;
        const QSignalBlocker block(editor);
        try {
            switch (spec.kind) {
                case strata::ParamSpec::Kind::Int:
                    static_cast<QSpinBox*>(editor)->setValue(clampToInt(value.get<double>()));
                    break;
                case strata::ParamSpec::Kind::Float:
                    static_cast<QDoubleSpinBox*>(editor)->setValue(value.get<double>());
                    break;
                case strata::ParamSpec::Kind::Bool:
                    static_cast<QCheckBox*>(editor)->setChecked(value.get<bool>());
                    break;
                case strata::ParamSpec::Kind::Choice:
                    static_cast<QComboBox*>(editor)->setCurrentText(QString::fromStdString(value.get<std::string>()));
                    break;
                case strata::ParamSpec::Kind::IntList: {
                    auto* edit = static_cast<QLineEdit*>(editor);
                    if (!edit->hasFocus()) {
                        edit->setText(intListText(value));
                        edit->setStyleSheet(QString());
                    }
                    break;
                }
            }
        } catch (const std::exception&) {
            // A value of the wrong JSON type (hand-edited file): the problems list names it.
        }
    }
    m_shape->setText(m_doc->shapeText(m_node));
    const qint64 count = m_doc->parameterCountOf(m_node);
    m_count->setText(count < 0 ? tr("unknown") : QLocale(QLocale::English).toString(count));
    QStringList problems;
    for (const strata::Problem& p : m_doc->problemsOf(m_node)) problems << QString::fromStdString(p.message);
    m_problems->setText(problems.join(QLatin1Char('\n')));
    m_problems->setVisible(!problems.isEmpty());
}

void PropertyPanel::refreshGraphSummary() {
    const strata::GraphAnalysis& a = m_doc->analysis();
    m_total->setText(QLocale(QLocale::English).toString(qint64(a.parameterCount)));
    // The training run's predicted peak (core/train/MemoryEstimate) on the project's device, against what
    // the device has: the same numbers the Trainer refuses a run with.
    if (!a.ok()) {
        m_memory->setText(tr("unknown until the graph is valid"));
        m_memory->setToolTip({});
        return;
    }
    const int64_t maxBatch = strata::trainingSetting("batch_size").intMax;
    const int batch = m_batch->value();
    const bool batchOk = batch >= 1 && batch <= maxBatch;
    setFieldError(m_batch, batchOk ? QString()
                                   : notAppliedText(QString::number(batch),
                                                    QString::fromStdString(strata::integerRangeText(1, maxBatch))));
    if (!batchOk) {
        m_memory->setText(tr("unknown until the batch size is valid"));
        m_memory->setToolTip({});
        return;
    }
    // Several devices (data parallel): each holds its share of the batch; the smallest of them must fit it.
    std::vector<strata::Device> devices;
    try {
        devices = strata::Device::parseList(m_doc->project().training.device);
    } catch (const std::exception& ex) {
        m_memory->setText(QString::fromStdString(ex.what()));
        return;
    }
    const int replicas = static_cast<int>(devices.size());
    const int share = (batch + replicas - 1) / replicas;
    strata::MemoryEstimate e;
    try {
        e = strata::estimateTrainingMemory(m_doc->graph(), m_doc->project().training, share);
    } catch (const std::exception& ex) {
        m_memory->setText(QString::fromStdString(ex.what()));
        return;
    }
    const QString device = replicas > 1 ? tr("each of %1 devices (batch %2 each)").arg(replicas).arg(share)
                                        : QString::fromStdString(devices[0].toString());
    const bool cpu = devices[0].isCpu();
    const uint64_t need = e.totalOn(cpu);
    uint64_t total = 0, free = 0;
    int found = 0;
    for (const strata::Device& want : devices)
        for (const strata::DeviceInfo& d : strata::backendRegistry().devices())
            if (d.device == want && (found++ == 0 || d.freeMemoryBytes < free))
                total = d.totalMemoryBytes, free = d.freeMemoryBytes;
    if (found < replicas) total = free = 0;  // a device that is not here
    QString text;
    if (total == 0) {
        text = replicas > 1
                   ? tr("~%1 on each device for training (%2: not all of them are here)")
                         .arg(bytesText(double(need)), QString::fromStdString(m_doc->project().training.device))
                   : tr("~%1 for training (%2 is not available here)").arg(bytesText(double(need)), device);
    } else {
        const bool fits = need <= free;
        text = (fits ? tr("fits on %1: %2 of %3") : tr("does not fit on %1: %2 of %3"))
                   .arg(device, bytesText(double(need)), bytesText(double(total)));
        const int64_t largest = strata::largestBatchThatFits(m_doc->graph(), m_doc->project().training, free, cpu,
                                                             int64_t(strata::trainingSetting("batch_size").intMax));
        text +=
            largest > 0
                ? tr("; largest batch that fits: %1").arg(largest * replicas)
                : tr("; not even a batch of 1 fits (shrink '%1')").arg(QString::fromStdString(e.largestParameterLayer));
        if (!fits) text = QStringLiteral("<span style='color:#b00020'>%1</span>").arg(text.toHtmlEscaped());
    }
    m_memory->setText(text);
    m_memory->setToolTip(
        tr("Predicted peak for batch %1 (float32): parameters %2, gradients %3, optimizer state %4, "
           "layer outputs and their gradients %5, staged batches and loss %6; the loader's batches "
           "%7 in host memory.%9 %8 free on the device now.")
            .arg(e.batch)
            .arg(bytesText(double(e.parameters)), bytesText(double(e.gradients)), bytesText(double(e.optimizerState)),
                 bytesText(double(e.activations)), bytesText(double(e.buffers)), bytesText(double(e.loaderHostBytes)),
                 bytesText(double(free)))
            .arg(e.workspace > 0
                     ? tr(" cuDNN's convolution workspace, at most %1, is counted.").arg(bytesText(double(e.workspace)))
                     : QString()));
}

void PropertyPanel::commitName() {
    if (m_node < 0) return;
    QString error;
    if (!m_doc->rename(m_node, m_name->text(), &error) && !error.isEmpty()) {
        m_problems->setText(error);
        m_problems->setVisible(true);
        if (const strata::Node* node = m_doc->graph().node(m_node)) m_name->setText(QString::fromStdString(node->name));
    }
}

void PropertyPanel::commitIntList(const QString& param) {
    auto* edit = qobject_cast<QLineEdit*>(m_editors.value(param));
    if (!edit || m_node < 0) return;
    const strata::ParamSpec* spec = nullptr;
    for (const auto& s : m_specs)
        if (QString::fromStdString(s.name) == param) spec = &s;
    if (!spec) return;
    QString text = edit->text();
    text.remove(QLatin1Char('[')).remove(QLatin1Char(']'));
    const QStringList parts = text.split(QRegularExpression(QStringLiteral("[,\\s]+")), Qt::SkipEmptyParts);
    strata::Json list = strata::Json::array();
    QString error;
    for (const QString& part : parts) {
        bool ok = false;
        const qlonglong v = part.toLongLong(&ok);
        if (!ok) {
            error = tr("'%1' is not an integer").arg(part);
            break;
        }
        if (double(v) < spec->min || double(v) > spec->max) {
            error = tr("%1 is out of range (%2)").arg(v).arg(QString::fromStdString(spec->allowedText()));
            break;
        }
        list.push_back(int64_t(v));
    }
    const int n = int(list.size());
    if (error.isEmpty() && ((spec->minItems > 0 && n < spec->minItems) || (spec->maxItems > 0 && n > spec->maxItems)))
        error = tr("%1 needs %2 to %3 values, got %4").arg(param).arg(spec->minItems).arg(spec->maxItems).arg(n);
    if (!error.isEmpty()) {
        edit->setStyleSheet(QStringLiteral("border: 1px solid #d63b3b;"));
        edit->setToolTip(error);
        m_problems->setText(tr("%1: %2").arg(param, error));
        m_problems->setVisible(true);
        return;
    }
    edit->setStyleSheet(QString());
    m_doc->setParam(m_node, param, list);
}

QString PropertyPanel::shapeText() const { return m_shape->text(); }
QString PropertyPanel::parameterCountText() const { return m_count->text(); }
QString PropertyPanel::memoryText() const { return m_memory->text(); }
QString PropertyPanel::totalParametersText() const { return m_total->text(); }

}  // namespace strata::ui
