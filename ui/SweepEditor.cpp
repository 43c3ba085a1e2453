// SweepEditor: see SweepEditor.h.
#include "ui/SweepEditor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <climits>

#include "core/history/Sweep.h"
#include "core/layers/LayerRegistry.h"
#include "ui/FieldError.h"

namespace strata::ui {

namespace {

enum Column { ColSetting = 0, ColValues, ColMin, ColMax, ColCount, ColLog, ColInteger, ColRemove, ColumnCount };

// "0.01" -> 0.01, "64" -> 64, "true" -> true, "adam" -> "adam" (a setting's choice, as the project file spells it).
Json parseValue(const QString& text) {
    const QString t = text.trimmed();
    bool ok = false;
    if (const qlonglong i = t.toLongLong(&ok); ok) return Json(int64_t(i));
    if (const double d = t.toDouble(&ok); ok) return Json(d);
    if (t == QLatin1String("true") || t == QLatin1String("false")) return Json(t == QLatin1String("true"));
    QString s = t;
    if (s.size() >= 2 && s.startsWith(QLatin1Char('"')) && s.endsWith(QLatin1Char('"'))) s = s.mid(1, s.size() - 2);
    return Json(s.toStdString());
}

QString valueText(const Json& v) {
    return v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString::fromStdString(v.dump());
}

// The settings a sweep can vary: numbers, choices and switches of the settings table, and every layer
// parameter of the graph's nodes but lists.
QStringList sweepableSettings(const Project& project) {
    QStringList out;
    auto add = [&out](const SettingInfo& s) {
        if (s.isNumber() || s.isInteger() || s.kind == SettingKind::Choice || s.kind == SettingKind::Bool)
            out << QString::fromStdString(s.dottedName());
    };
    for (const SettingInfo& s : trainingSettingSpecs()) add(s);
    for (const SettingInfo& s : datasetSettingSpecs()) add(s);
    for (const Node* n : project.graph.nodes())
        if (const LayerType* type = layerRegistry().find(n->type))
            for (const ParamSpec& p : type->paramSpecs())
                if (p.kind != ParamSpec::Kind::IntList)
                    out << QStringLiteral("graph.%1.%2")
                               .arg(QString::fromStdString(n->name), QString::fromStdString(p.name));
    return out;
}

}  // namespace

SweepEditor::SweepEditor(const Project& project, QWidget* parent)
    : QDialog(parent), m_project(project), m_choices(sweepableSettings(project)) {
    setWindowTitle(tr("Sweep"));
    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    m_method = new QComboBox(this);
    m_method->setObjectName(QStringLiteral("sweepMethod"));
    m_method->addItem(tr("Grid: every combination"), QStringLiteral("grid"));
    m_method->addItem(tr("Random: draw a number of trials"), QStringLiteral("random"));
    form->addRow(tr("Search"), m_method);
    m_trials = new QSpinBox(this);
    m_trials->setObjectName(QStringLiteral("sweepTrials"));
    m_trials->setRange(1, 100000);
    m_trials->setValue(8);
    m_trials->setToolTip(tr("Random search: how many assignments to draw"));
    form->addRow(tr("Trials"), m_trials);
    m_seed = new QSpinBox(this);
    m_seed->setObjectName(QStringLiteral("sweepSeed"));
    m_seed->setRange(0, INT_MAX);
    m_seed->setValue(1);
    m_seed->setToolTip(tr("Random search: the same seed draws the same trials"));
    form->addRow(tr("Seed"), m_seed);
    m_metric = new QComboBox(this);
    m_metric->setObjectName(QStringLiteral("sweepMetric"));
    m_metric->addItem(tr("Validation accuracy (higher is better)"), QStringLiteral("val_acc"));
    m_metric->addItem(tr("Validation loss (lower is better)"), QStringLiteral("val_loss"));
    form->addRow(tr("Metric"), m_metric);
    auto* halving = new QWidget(this);
    auto* halvingRow = new QHBoxLayout(halving);
    halvingRow->setContentsMargins(0, 0, 0, 0);
    m_rungs = new QLineEdit(halving);
    m_rungs->setObjectName(QStringLiteral("sweepRungs"));
    m_rungs->setPlaceholderText(tr("off; e.g. 1, 3: every trial 1 epoch, the best go on to 3"));
    m_keep = new QDoubleSpinBox(halving);
    m_keep->setObjectName(QStringLiteral("sweepKeep"));
    m_keep->setRange(0.05, 0.95);
    m_keep->setSingleStep(0.05);
    m_keep->setValue(0.5);
    m_keep->setPrefix(tr("keep "));
    halvingRow->addWidget(m_rungs, 1);
    halvingRow->addWidget(m_keep);
    form->addRow(tr("Halving (epochs per rung)"), halving);
    layout->addLayout(form);

    layout->addWidget(new QLabel(tr("Parameters: a list of values, or leave Values empty for a range"), this));
    m_table = new QTableWidget(0, ColumnCount, this);
    m_table->setObjectName(QStringLiteral("sweepParameters"));
    m_table->setHorizontalHeaderLabels(
        {tr("Setting"), tr("Values"), tr("Min"), tr("Max"), tr("Points"), tr("Log"), tr("Whole"), QString()});
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(ColSetting, QHeaderView::Stretch);
    m_table->horizontalHeader()->setSectionResizeMode(ColValues, QHeaderView::Stretch);
    m_table->setSelectionMode(QAbstractItemView::NoSelection);
    layout->addWidget(m_table, 1);
    auto* add = new QPushButton(tr("Add parameter"), this);
    add->setObjectName(QStringLiteral("sweepAddParameter"));
    connect(add, &QPushButton::clicked, this, [this] { addRow(Row{QStringLiteral("training.batch_size"), "32, 64"}); });
    layout->addWidget(add, 0, Qt::AlignLeft);

    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("sweepSummary"));
    layout->addWidget(m_summary);
    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("sweepError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
    layout->addWidget(m_error);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_ok = buttons->button(QDialogButtonBox::Ok);
    connect(buttons, &QDialogButtonBox::accepted, this, &SweepEditor::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);

    // The project's definition, shown as far as the editor can show it (a hand-written one that does not
    // check still shows its rows).
    const Json& sweep = project.sweep;
    QList<Row> rows;
    if (sweep.is_object()) {
        setMethod(QString::fromStdString(sweep.value("method", "grid")));
        if (sweep.contains("trials") && sweep["trials"].is_number_integer()) setTrials(sweep["trials"].get<int>());
        if (sweep.contains("seed") && sweep["seed"].is_number_unsigned())
            m_seed->setValue(int(std::min<uint64_t>(sweep["seed"].get<uint64_t>(), INT_MAX)));
        setMetric(QString::fromStdString(sweep.value("metric", "val_acc")));
        if (sweep.contains("halving") && sweep["halving"].is_object()) {
            QStringList rungs;
            for (const Json& r : sweep["halving"].value("rungs", Json::array())) rungs << valueText(r);
            m_rungs->setText(rungs.join(QStringLiteral(", ")));
            m_keep->setValue(sweep["halving"].value("keep", 0.5));
        }
        for (const Json& p : sweep.value("parameters", Json::array())) {
            if (!p.is_object()) continue;
            Row row;
            row.setting = QString::fromStdString(p.value("setting", ""));
            if (p.contains("values") && p["values"].is_array()) {
                QStringList values;
                for (const Json& v : p["values"]) values << valueText(v);
                row.values = values.join(QStringLiteral(", "));
            }
            row.min = p.value("min", 0.0);
            row.max = p.value("max", 0.0);
            row.count = p.value("count", 3);
            row.log = p.value("scale", "linear") == "log";
            row.integer = p.value("integer", false);
            rows << row;
        }
    } else {
        rows << Row{QStringLiteral("training.learning_rate"), QString(), 0.001, 0.1, 3, true, false};
    }
    setRows(rows);
    connect(m_method, &QComboBox::currentIndexChanged, this, &SweepEditor::refresh);
    connect(m_metric, &QComboBox::currentIndexChanged, this, &SweepEditor::refresh);
    connect(m_trials, &QSpinBox::valueChanged, this, &SweepEditor::refresh);
    connect(m_seed, &QSpinBox::valueChanged, this, &SweepEditor::refresh);
    connect(m_rungs, &QLineEdit::textChanged, this, &SweepEditor::refresh);
    connect(m_keep, &QDoubleSpinBox::valueChanged, this, &SweepEditor::refresh);
    resize(760, 460);
    refresh();
}

void SweepEditor::setMethod(const QString& method) {
    m_method->setCurrentIndex(std::max(0, m_method->findData(method)));
}
void SweepEditor::setTrials(int trials) { m_trials->setValue(trials); }
void SweepEditor::setMetric(const QString& metric) {
    m_metric->setCurrentIndex(std::max(0, m_metric->findData(metric)));
}
void SweepEditor::setRungs(const QString& rungs) { m_rungs->setText(rungs); }

void SweepEditor::setRows(const QList<Row>& rows) {
    m_table->setRowCount(0);
    for (const Row& r : rows) addRow(r);
    refresh();
}

void SweepEditor::addRow(const Row& r) {
    const int row = m_table->rowCount();
    m_table->insertRow(row);
    auto* setting = new QComboBox(m_table);
    setting->setEditable(true);  // any setting the file could name; the list offers the known ones
    setting->addItems(m_choices);
    setting->setEditText(r.setting);
    auto* values = new QLineEdit(r.values, m_table);
    values->setPlaceholderText(tr("range (min to max)"));
    auto number = [this](double v) {
        auto* box = new NumberDoubleSpinBox(m_table);  // any number; the sweep's check says what is wrong
        box->setDecimals(6);
        box->setSizeRange(0, 9999);
        box->setValue(v);
        return box;
    };
    QDoubleSpinBox *min = number(r.min), *max = number(r.max);
    auto* count = new QSpinBox(m_table);
    count->setRange(2, 1000);
    count->setValue(r.count);
    count->setToolTip(tr("Grid points across the range"));
    auto* log = new QCheckBox(m_table);
    log->setChecked(r.log);
    log->setToolTip(tr("Points evenly spaced on a log scale (a learning rate)"));
    auto* integer = new QCheckBox(m_table);
    integer->setChecked(r.integer);
    integer->setToolTip(tr("Whole numbers (units, a batch size)"));
    auto* remove = new QPushButton(tr("Remove"), m_table);
    m_table->setCellWidget(row, ColSetting, setting);
    m_table->setCellWidget(row, ColValues, values);
    m_table->setCellWidget(row, ColMin, min);
    m_table->setCellWidget(row, ColMax, max);
    m_table->setCellWidget(row, ColCount, count);
    m_table->setCellWidget(row, ColLog, log);
    m_table->setCellWidget(row, ColInteger, integer);
    m_table->setCellWidget(row, ColRemove, remove);
    connect(setting, &QComboBox::currentTextChanged, this, &SweepEditor::refresh);
    connect(values, &QLineEdit::textChanged, this, &SweepEditor::refresh);
    connect(min, &QDoubleSpinBox::valueChanged, this, &SweepEditor::refresh);
    connect(max, &QDoubleSpinBox::valueChanged, this, &SweepEditor::refresh);
    connect(count, &QSpinBox::valueChanged, this, &SweepEditor::refresh);
    connect(log, &QCheckBox::toggled, this, &SweepEditor::refresh);
    connect(integer, &QCheckBox::toggled, this, &SweepEditor::refresh);
    connect(remove, &QPushButton::clicked, this, [this, remove] {
        for (int i = 0; i < m_table->rowCount(); ++i)
            if (m_table->cellWidget(i, ColRemove) == remove) m_table->removeRow(i);
        refresh();
    });
    refresh();
}

QList<SweepEditor::Row> SweepEditor::rows() const {
    QList<Row> out;
    for (int i = 0; i < m_table->rowCount(); ++i) {
        Row r;
        r.setting = static_cast<QComboBox*>(m_table->cellWidget(i, ColSetting))->currentText().trimmed();
        r.values = static_cast<QLineEdit*>(m_table->cellWidget(i, ColValues))->text().trimmed();
        r.min = static_cast<QDoubleSpinBox*>(m_table->cellWidget(i, ColMin))->value();
        r.max = static_cast<QDoubleSpinBox*>(m_table->cellWidget(i, ColMax))->value();
        r.count = static_cast<QSpinBox*>(m_table->cellWidget(i, ColCount))->value();
        r.log = static_cast<QCheckBox*>(m_table->cellWidget(i, ColLog))->isChecked();
        r.integer = static_cast<QCheckBox*>(m_table->cellWidget(i, ColInteger))->isChecked();
        out << r;
    }
    return out;
}

Json SweepEditor::definition(QString* error) const {
    Json sweep = Json::object();
    const QString method = m_method->currentData().toString();
    sweep["method"] = method.toStdString();
    if (method == QLatin1String("random")) {
        sweep["trials"] = m_trials->value();
        sweep["seed"] = uint64_t(m_seed->value());
    }
    sweep["metric"] = m_metric->currentData().toString().toStdString();
    Json parameters = Json::array();
    for (const Row& r : rows()) {
        Json p{{"setting", r.setting.toStdString()}};
        if (!r.values.isEmpty()) {
            Json values = Json::array();
            for (const QString& v : r.values.split(QLatin1Char(','), Qt::SkipEmptyParts))
                values.push_back(parseValue(v));
            p["values"] = values;
        } else {
            p["min"] = r.min;
            p["max"] = r.max;
            p["count"] = r.count;
            if (r.log) p["scale"] = "log";
            if (r.integer) p["integer"] = true;
        }
        parameters.push_back(p);
    }
    sweep["parameters"] = parameters;
    if (!m_rungs->text().trimmed().isEmpty()) {
        Json rungs = Json::array();
        for (const QString& r : m_rungs->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
            rungs.push_back(parseValue(r));
        sweep["halving"] = {{"rungs", rungs}, {"keep", m_keep->value()}};
    }
    // Checked as a run checks it; each trial's values applied to the project, so a value the setting or
    // parameter refuses shows here, not after the first trials ran.
    try {
        const history::SweepDefinition d = history::parseSweep(sweep);
        const std::vector<Json> trials = history::sweepAssignments(d);
        for (size_t i = 0; i < trials.size() && i < 64; ++i) history::applyAssignment(m_project, trials[i]);
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return nullptr;
    }
    if (error) error->clear();
    return sweep;
}

QString SweepEditor::summaryText() const { return m_summary->text(); }

void SweepEditor::refresh() {
    const bool random = m_method->currentData().toString() == QLatin1String("random");
    m_trials->setEnabled(random);
    m_seed->setEnabled(random);
    for (int i = 0; i < m_table->rowCount(); ++i) {
        const bool range = static_cast<QLineEdit*>(m_table->cellWidget(i, ColValues))->text().trimmed().isEmpty();
        for (int c : {ColMin, ColMax, ColCount, ColLog, ColInteger}) m_table->cellWidget(i, c)->setEnabled(range);
    }
    QString error;
    const Json sweep = definition(&error);
    m_error->setText(error);
    m_ok->setEnabled(!sweep.is_null());
    if (sweep.is_null()) {
        m_summary->setText(tr("No trial can run yet."));
        return;
    }
    const history::SweepDefinition d = history::parseSweep(sweep);
    const auto trials = int(history::sweepAssignments(d).size());
    m_summary->setText(
        d.rungs.empty() ? tr("%n trial(s) of %1 epoch(s) each.", nullptr, trials).arg(m_project.training.epochs)
                        : tr("%n trial(s); successive halving over %1 epochs.", nullptr, trials).arg(d.rungs.back()));
}

void SweepEditor::accept() {
    QString error;
    if (definition(&error).is_null()) {
        m_error->setText(error);
        return;
    }
    QDialog::accept();
}

}  // namespace strata::ui
