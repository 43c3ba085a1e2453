// SweepPanel: see SweepPanel.h.
#include "ui/SweepPanel.h"

#include <QComboBox>
#include <QDialog>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <QtConcurrent/QtConcurrentRun>

#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
#include "core/train/Trainer.h"
#include "qcustomplot.h"
#include "ui/FieldError.h"
#include "ui/SweepEditor.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

// The number a parameter value plots at (a choice plots at its index among the choices seen).
double plotValue(const Json& v, std::vector<std::string>& choices) {
    if (v.is_number()) return v.get<double>();
    const std::string s = v.dump();
    for (size_t i = 0; i < choices.size(); ++i)
        if (choices[i] == s) return double(i);
    choices.push_back(s);
    return double(choices.size() - 1);
}

}  // namespace

SweepPanel::SweepPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    m_editButton = new QPushButton(tr("Edit sweep..."), this);
    m_editButton->setObjectName(QStringLiteral("editSweep"));
    m_editButton->setToolTip(tr("Define the settings to vary, their values or ranges and the metric"));
    m_runButton = new QPushButton(tr("Run sweep"), this);
    m_stopButton = new QPushButton(tr("Stop"), this);
    m_stopButton->setEnabled(false);
    m_applyBest = new QPushButton(tr("Apply best trial"), this);
    m_applyBest->setObjectName(QStringLiteral("applyBestTrial"));
    m_applyBest->setToolTip(tr("Give the project the best finished trial's values (undoable)"));
    m_applyBest->setEnabled(false);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    // Any number typed stays; one out of range is refused with the reason under it (checkParallel).
    auto* parallel = new NumberSpinBox(this);
    parallel->setSizeRange(1, 999);
    m_parallel = parallel;
    m_parallel->setObjectName(QStringLiteral("sweepParallel"));
    m_parallel->setValue(1);
    m_parallel->setToolTip(
        tr("Trials trained at once, 1 to %1; CPU trials share the cores between them").arg(maxParallel()));
    m_parameter = new QComboBox(this);
    m_table = new QTableWidget(this);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_plot = new QCustomPlot(this);
    m_plot->addGraph();
    m_plot->graph(0)->setLineStyle(QCPGraph::lsNone);
    m_plot->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 7));
    m_plot->setMinimumHeight(200);

    auto* top = new QHBoxLayout;
    top->addWidget(m_editButton, 0, Qt::AlignTop);
    top->addWidget(m_runButton, 0, Qt::AlignTop);
    top->addWidget(m_stopButton, 0, Qt::AlignTop);
    top->addWidget(new QLabel(tr("Parallel:"), this), 0, Qt::AlignTop);
    top->addWidget(withFieldError(m_parallel), 0, Qt::AlignTop);
    top->addWidget(m_status, 1, Qt::AlignTop);
    top->addWidget(new QLabel(tr("Plot:"), this), 0, Qt::AlignTop);
    top->addWidget(m_parameter, 0, Qt::AlignTop);
    top->addWidget(m_applyBest, 0, Qt::AlignTop);
    auto* body = new QHBoxLayout;
    body->addWidget(m_table, 1);
    body->addWidget(m_plot, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(top);
    layout->addLayout(body, 1);

    connect(m_editButton, &QPushButton::clicked, this, [this] { editSweep(); });
    connect(m_applyBest, &QPushButton::clicked, this, [this] { applyBestTrial(); });
    connect(m_doc, &ProjectDocument::sweepChanged, this, [this] {
        if (!isRunning()) describeSweep();
    });
    // Another project: its sweep, not the last one's verdict ("no sweep definition" stayed on a project with one).
    connect(m_doc, &ProjectDocument::projectReset, this, [this] {
        m_results.clear();
        m_table->clearContents();
        m_table->setRowCount(0);
        m_applyBest->setEnabled(false);
        if (!isRunning()) describeSweep();
    });
    connect(m_runButton, &QPushButton::clicked, this, [this] { start(); });
    connect(m_stopButton, &QPushButton::clicked, this, &SweepPanel::stop);
    connect(m_parameter, &QComboBox::currentIndexChanged, this, [this] { replot(); });
    connect(m_parallel, &QSpinBox::valueChanged, this, [this] { checkParallel(); });
    connect(&m_watcher, &QFutureWatcher<QString>::finished, this, [this] {
        m_runButton->setEnabled(true);
        m_stopButton->setEnabled(false);
        const QString error = m_watcher.result();
        loadResults();
        m_status->setText(error.isEmpty() ? (m_stop ? tr("Stopped; Run sweep resumes it.") : tr("Sweep finished."))
                                          : tr("Sweep failed: %1").arg(error));
        emit sweepFinished();
    });
    describeSweep();
}

void SweepPanel::describeSweep() {
    const Json& sweep = m_doc->project().sweep;
    if (sweep.is_null()) {
        m_status->setText(tr("This project has no sweep yet: Edit sweep defines one."));
        return;
    }
    try {
        const history::SweepDefinition d = history::parseSweep(sweep);
        QStringList settings;
        for (const history::SweepParameter& p : d.parameters) settings << QString::fromStdString(p.setting);
        const auto trials = int(history::sweepAssignments(d).size());
        m_status->setText(tr("%n trial(s), %1 over %2; best by %3.", nullptr, trials)
                              .arg(QString::fromStdString(d.method), settings.join(QStringLiteral(", ")),
                                   QString::fromStdString(d.metric)) +
                          (m_doc->filePath().isEmpty() ? tr(" Save the project to run it.") : QString()));
    } catch (const std::exception& e) {
        m_status->setText(tr("The project's sweep does not check: %1").arg(QString::fromStdString(e.what())));
    }
}

SweepEditor* SweepPanel::editor() const { return m_editor; }

SweepEditor* SweepPanel::editSweep() {
    if (!m_editor) {
        m_editor = new SweepEditor(m_doc->project(), this);
        m_editor->setAttribute(Qt::WA_DeleteOnClose);
        SweepEditor* editor = m_editor;
        connect(editor, &QDialog::accepted, this, [this, editor] { m_doc->setSweep(editor->definition(nullptr)); });
    }
    m_editor->show();
    m_editor->raise();
    m_editor->activateWindow();
    return m_editor;
}

bool SweepPanel::applyBestTrial() {
    // setResults sorts the longest-trained rung first, then by the metric: the first finished trial is the best.
    for (const history::TrialResult& r : m_results) {
        if (r.status != "done" || !std::isfinite(r.metric)) continue;
        QString error;
        try {
            const Project best = history::applyAssignment(m_doc->project(), r.assignment);
            if (m_doc->setProjectSettings(best, tr("Apply sweep trial %1").arg(r.trial + 1), &error)) {
                m_status->setText(tr("The project now has trial %1's values (%2 %3); Undo takes them back.")
                                      .arg(r.trial + 1)
                                      .arg(m_metric)
                                      .arg(r.metric, 0, 'f', 4));
                return true;
            }
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        m_status->setText(tr("Trial %1's values not applied: %2").arg(r.trial + 1).arg(error));
        return false;
    }
    m_status->setText(tr("No trial has finished yet: run the sweep first."));
    return false;
}

SweepPanel::~SweepPanel() {
    m_stop = true;
    m_watcher.waitForFinished();
}

QString SweepPanel::statusText() const { return m_status->text(); }

int SweepPanel::maxParallel() { return std::max(1, QThread::idealThreadCount()); }

bool SweepPanel::checkParallel() const {
    const int n = m_parallel->value();
    const bool ok = n >= 1 && n <= maxParallel();
    setFieldError(
        m_parallel,
        ok ? QString() : notAppliedText(QString::number(n), tr("1 to %1 (this machine's threads)").arg(maxParallel())));
    return ok;
}

QString SweepPanel::statePath() const {
    return m_doc->filePath().isEmpty() ? QString() : m_doc->filePath() + QStringLiteral(".sweep-state.json");
}

bool SweepPanel::start() {
    if (m_watcher.isRunning() || m_doc->filePath().isEmpty()) {
        if (m_doc->filePath().isEmpty())
            m_status->setText(tr("Save the project first: the sweep's state goes beside it."));
        return false;
    }
    const Project project = m_doc->project();
    if (project.sweep.is_null()) {
        m_status->setText(tr("The project has no sweep yet: Edit sweep defines one."));
        return false;
    }
    if (!checkParallel()) {
        m_status->setText(tr("Not started: the Parallel field is not applied (the line under it says why)."));
        return false;
    }
    m_stop = false;
    m_runButton->setEnabled(false);
    m_stopButton->setEnabled(true);
    m_status->setText(tr("Running the sweep..."));
    const std::string path = m_doc->filePath().toStdString(), db = m_database.toStdString();
    const int parallel = m_parallel->value();
    m_watcher.setFuture(QtConcurrent::run([this, project, path, db, parallel]() -> QString {
        try {
            std::unique_ptr<history::RunStore> store;
            if (!db.empty()) store = std::make_unique<history::RunStore>(db);
            history::SweepOptions options;
            options.store = store.get();
            options.stop = &m_stop;
            options.parallel = parallel;
            options.onTrainer = [this](int slot, Trainer* t) {
                std::lock_guard lock(m_trainersMutex);
                if (m_trainers.size() <= size_t(slot)) m_trainers.resize(size_t(slot) + 1, nullptr);
                m_trainers[size_t(slot)] = t;
                if (t && m_stop) t->requestStop();  // a stop that came while the trial was being set up
            };
            std::ostringstream log;
            history::runSweep(project, path, options, log);
        } catch (const std::exception& e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }));
    return true;
}

void SweepPanel::stop() {
    m_stop = true;
    std::lock_guard lock(m_trainersMutex);
    for (Trainer* t : m_trainers)
        if (t) t->requestStop();
}

bool SweepPanel::loadResults() {
    const QString path = statePath();
    if (path.isEmpty() || !QFile::exists(path)) return false;
    try {
        const std::string file = path.toStdString();
        const Json state = parseJson<Json>(readFileText(file, kMaxProjectFileBytes, "a sweep state file"), file);
        const history::SweepDefinition d = history::parseSweep(state.at("sweep"));
        std::vector<history::TrialResult> results;
        for (const Json& t : state.at("trials")) {
            history::TrialResult r;
            r.trial = t.at("trial").get<int>();
            r.rung = t.at("rung").get<int>();
            r.epochs = t.at("epochs").get<int>();
            r.assignment = t.at("assignment");
            r.status = t.at("status").get<std::string>();
            r.runId = t.at("run").get<int64_t>();
            r.metric = t.at("metric").is_number() ? t.at("metric").get<double>() : NAN;
            results.push_back(r);
        }
        setResults(results, QString::fromStdString(d.metric), d.maximize());
    } catch (const std::exception& e) {
        m_status->setText(tr("Sweep state %1: %2").arg(path, QString::fromStdString(e.what())));
        return false;
    }
    return true;
}

void SweepPanel::setResults(const std::vector<history::TrialResult>& resultsIn, const QString& metric, bool maximize) {
    m_results = resultsIn;
    m_metric = metric;
    m_applyBest->setEnabled(std::any_of(m_results.begin(), m_results.end(),
                                        [](const auto& r) { return r.status == "done" && std::isfinite(r.metric); }));
    std::stable_sort(m_results.begin(), m_results.end(), [&](const auto& a, const auto& b) {
        if (a.rung != b.rung) return a.rung > b.rung;
        if (!std::isfinite(a.metric)) return false;
        if (!std::isfinite(b.metric)) return true;
        return maximize ? a.metric > b.metric : a.metric < b.metric;
    });
    std::vector<std::string> keys;
    for (const auto& r : m_results)
        for (auto it = r.assignment.begin(); it != r.assignment.end(); ++it)
            if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
    QStringList headers{tr("Trial"), tr("Rung"), tr("Epochs"), metric, tr("Run")};
    for (const std::string& k : keys) headers << QString::fromStdString(k);
    m_table->clear();
    m_table->setColumnCount(int(headers.size()));
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setRowCount(int(m_results.size()));
    for (int row = 0; row < int(m_results.size()); ++row) {
        const auto& r = m_results[size_t(row)];
        const QStringList cells{
            QString::number(r.trial + 1), QString::number(r.rung + 1), QString::number(r.epochs),
            r.status == "done" ? QString::number(r.metric, 'f', 4) : QString::fromStdString(r.status),
            QString::number(r.runId)};
        for (int c = 0; c < int(cells.size()); ++c) m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
        for (size_t k = 0; k < keys.size(); ++k)
            m_table->setItem(row, int(5 + k),
                             new QTableWidgetItem(QString::fromStdString(r.assignment.value(keys[k], Json()).dump())));
    }
    const QString current = m_parameter->currentText();
    m_parameter->blockSignals(true);
    m_parameter->clear();
    for (const std::string& k : keys) m_parameter->addItem(QString::fromStdString(k));
    if (m_parameter->findText(current) >= 0) m_parameter->setCurrentText(current);
    m_parameter->blockSignals(false);
    replot();
}

void SweepPanel::replot() {
    const std::string key = m_parameter->currentText().toStdString();
    QVector<double> x, y;
    std::vector<std::string> choices;
    // The longest-trained result of each trial.
    std::set<int> seen;
    for (const auto& r : m_results) {
        if (seen.count(r.trial) || !std::isfinite(r.metric) || !r.assignment.contains(key)) continue;
        seen.insert(r.trial);
        x.append(plotValue(r.assignment[key], choices));
        y.append(r.metric);
    }
    m_plot->graph(0)->setData(x, y);
    const bool logAxis = choices.empty() && !x.isEmpty() && *std::min_element(x.begin(), x.end()) > 0 &&
                         *std::max_element(x.begin(), x.end()) > 10 * *std::min_element(x.begin(), x.end());
    m_plot->xAxis->setScaleType(logAxis ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (logAxis)
        m_plot->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    else if (!choices.empty()) {
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        for (size_t i = 0; i < choices.size(); ++i) ticker->addTick(double(i), QString::fromStdString(choices[i]));
        m_plot->xAxis->setTicker(ticker);
    } else
        m_plot->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    m_plot->xAxis->setLabel(QString::fromStdString(key));
    m_plot->yAxis->setLabel(m_metric);
    m_plot->rescaleAxes();
    m_plot->xAxis->scaleRange(1.15, m_plot->xAxis->range().center());
    m_plot->yAxis->scaleRange(1.15, m_plot->yAxis->range().center());
    m_plot->replot();
}

int SweepPanel::plottedPoints() const { return m_plot->graph(0)->dataCount(); }

}  // namespace strata::ui
