// RunsPanel: see RunsPanel.h.
#include "ui/RunsPanel.h"

#include <QCheckBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/io/JsonInput.h"
#include "ui/ChartPanel.h"
#include "ui/HistogramCompareDialog.h"
#include "ui/TaskMetricsView.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

QString str(const std::string& s) { return QString::fromStdString(s); }

QVariant number(double v) { return std::isfinite(v) ? QVariant(v) : QVariant(); }

QString percent(double v) { return std::isfinite(v) ? QStringLiteral("%1%").arg(100 * v, 0, 'f', 2) : QString(); }

QString duration(double s) {
    if (!std::isfinite(s) || s <= 0) return {};
    const qint64 t = qRound64(s);
    if (t >= 3600)
        return QStringLiteral("%1:%2:%3")
            .arg(t / 3600)
            .arg((t / 60) % 60, 2, 10, QLatin1Char('0'))
            .arg(t % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1:%2").arg(t / 60, 2, 10, QLatin1Char('0')).arg(t % 60, 2, 10, QLatin1Char('0'));
}

// Colours for overlaid runs, distinct from the dashboard's own series.
// The task's summary metrics (r2, mae, rmse; micro_f1, macro_f1; psnr), not one per label or target.
bool summaryMetric(const std::string& name) { return name.find('[') == std::string::npos; }

const QColor kRunColors[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28), QColor(0x2c, 0xa0, 0x2c),
                             QColor(0x94, 0x67, 0xbd), QColor(0xff, 0x7f, 0x0e), QColor(0x8c, 0x56, 0x4b),
                             QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf), QColor(0xbc, 0xbd, 0x22),
                             QColor(0x7f, 0x7f, 0x7f)};

}  // namespace

// ---- RunsModel ----

void RunsModel::setRuns(std::vector<history::RunRecord> runs) {
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
}

int RunsModel::rowOfRun(qint64 id) const {
    for (size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == id) return int(i);
    return -1;
}

int RunsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_runs.size()); }
int RunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {
        "ID",           "Name",          "Project",        "Started",     "Device",    "From",     "Status", "Epochs",
        "Best val acc", "Final val acc", "Final val loss", "Val metrics", "Samples/s", "Duration", "Notes"};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_runs.size())) return {};
    const history::RunRecord& r = m_runs[size_t(index.row())];
    if (role == Qt::UserRole) {
        switch (index.column()) {
            case Id: return qint64(r.id);
            case Epochs: return r.epochsCompleted;
            case BestValAcc: return number(r.bestValAccuracy);
            case FinalValAcc: return number(r.finalValAccuracy);
            case FinalValLoss: return number(r.finalValLoss);
            case ValMetrics:  // by the task's score (the first metric), runs without last
                return r.finalValMetrics.empty() ? QVariant() : number(r.finalValMetrics.front().value);
            case SamplesPerSecond: return number(r.samplesPerSecond);
            case Duration: return number(r.seconds);
            default: return data(index, Qt::DisplayRole);
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() != Name && index.column() != Project &&
        index.column() != Notes && index.column() != Started)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && index.column() == ValMetrics && !r.finalValMetrics.empty()) {
        QStringList lines;  // every metric, per label and target too
        for (const NamedMetric& m : r.finalValMetrics) lines << str(m.name + " " + formatMetric(m.value));
        return lines.join(QLatin1Char('\n'));
    }
    if (role == Qt::ToolTipRole && !r.message.empty()) return str(r.message);
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
        case Id: return qint64(r.id);
        case Name: return str(r.name);
        case Project: return str(r.projectName);
        case Started: return str(r.started).left(19).replace(QLatin1Char('T'), QLatin1Char(' '));
        case Device: return str(r.device);
        case Source: return str(r.source);
        case Status: return str(r.status);
        case Epochs: return r.epochsCompleted;
        case BestValAcc: return percent(r.bestValAccuracy);
        case FinalValAcc: return percent(r.finalValAccuracy);
        case FinalValLoss: return std::isfinite(r.finalValLoss) ? QString::number(r.finalValLoss, 'f', 4) : QString();
        case ValMetrics: {
            QStringList parts;
            for (const NamedMetric& m : r.finalValMetrics)
                if (summaryMetric(m.name)) parts << str(m.name + " " + formatMetric(m.value));
            return parts.join(QStringLiteral(", "));
        }
        case SamplesPerSecond:
            return std::isfinite(r.samplesPerSecond) ? QString::number(r.samplesPerSecond, 'f', 0) : QString();
        case Duration: return duration(r.seconds);
        case Notes: return str(r.notes);
        default: return {};
    }
}

// ---- RunsPanel ----

RunsPanel::RunsPanel(QWidget* parent) : QWidget(parent) {
    m_model = new RunsModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);

    m_filter = new QLineEdit(this);
    m_filter->setPlaceholderText(tr("Filter runs (project, name, device, status, notes...)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& t) { m_proxy->setFilterFixedString(t); });
    m_allProjects = new QCheckBox(tr("All projects"), this);
    m_allProjects->setObjectName(QStringLiteral("runsAllProjects"));
    m_allProjects->setToolTip(tr("List the runs of every project, not only the open one's"));
    m_allProjects->setEnabled(false);  // until there is an open project to limit the list to
    connect(m_allProjects, &QCheckBox::toggled, this, &RunsPanel::reload);

    m_table = new QTableView(this);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(RunsModel::Id, Qt::DescendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(22);
    m_table->horizontalHeader()->setStretchLastSection(true);
    // Fixed widths: sizing columns to their contents would read every row.
    m_table->horizontalHeader()->setDefaultSectionSize(76);
    m_table->setColumnWidth(RunsModel::Id, 46);
    m_table->setColumnWidth(RunsModel::Started, 124);
    m_table->setColumnWidth(RunsModel::Project, 96);
    m_table->setColumnWidth(RunsModel::Device, 56);
    m_table->setColumnWidth(RunsModel::Source, 40);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);

    m_overlayButton = new QPushButton(tr("Overlay curves"), this);
    m_diffButton = new QPushButton(tr("Diff settings"), this);
    m_renameButton = new QPushButton(tr("Rename..."), this);
    m_notesButton = new QPushButton(tr("Notes..."), this);
    m_deleteButton = new QPushButton(tr("Delete"), this);
    m_openButton = new QPushButton(tr("Open project as run"), this);
    m_compareButton = new QPushButton(tr("Compare histograms"), this);
    m_compareButton->setToolTip(tr("The selected runs' weight or gradient histograms of one layer, overlaid"));
    m_status = new QLabel(this);

    auto* buttons = new QHBoxLayout;
    for (QPushButton* b :
         {m_overlayButton, m_diffButton, m_compareButton, m_renameButton, m_notesButton, m_deleteButton, m_openButton})
        buttons->addWidget(b);
    buttons->addStretch(1);
    buttons->addWidget(m_status);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* filterRow = new QHBoxLayout;
    filterRow->addWidget(m_filter, 1);
    filterRow->addWidget(m_allProjects);
    layout->addLayout(filterRow);
    layout->addWidget(m_table, 1);
    layout->addLayout(buttons);

    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateButtons();
        if (selectedRuns().size() >= 1) overlaySelectedInBackground();
    });
    connect(m_overlayButton, &QPushButton::clicked, this, [this] { overlaySelectedInBackground(); });
    connect(m_diffButton, &QPushButton::clicked, this, &RunsPanel::showDiffDialog);
    connect(m_compareButton, &QPushButton::clicked, this, [this] {
        if (HistogramCompareDialog* d = compareHistograms()) d->show();
    });
    connect(m_renameButton, &QPushButton::clicked, this, [this] {
        const QList<qint64> ids = selectedRuns();
        if (ids.size() != 1) return;
        const int row = m_model->rowOfRun(ids[0]);
        bool ok = false;
        const QString name = QInputDialog::getText(this, tr("Rename run"), tr("Name of run %1:").arg(ids[0]),
                                                   QLineEdit::Normal, str(m_model->run(row).name), &ok);
        if (ok) renameRun(ids[0], name);
    });
    connect(m_notesButton, &QPushButton::clicked, this, [this] {
        const QList<qint64> ids = selectedRuns();
        if (ids.size() != 1) return;
        const int row = m_model->rowOfRun(ids[0]);
        bool ok = false;
        const QString notes = QInputDialog::getMultiLineText(this, tr("Notes"), tr("Notes on run %1:").arg(ids[0]),
                                                             str(m_model->run(row).notes), &ok);
        if (ok) annotateRun(ids[0], notes);
    });
    connect(m_deleteButton, &QPushButton::clicked, this, [this] {
        const QList<qint64> ids = selectedRuns();
        if (ids.isEmpty()) return;
        if (QMessageBox::question(this, tr("Delete runs"),
                                  tr("Delete %n run(s) and their curves from the history?", nullptr,
                                     int(ids.size()))) == QMessageBox::Yes)
            deleteRuns(ids);
    });
    connect(m_openButton, &QPushButton::clicked, this, [this] {
        const QList<qint64> ids = selectedRuns();
        if (ids.size() == 1) openRunProject(ids[0]);
    });
    updateButtons();
}

RunsPanel::~RunsPanel() = default;

void RunsPanel::setDocument(ProjectDocument* doc) {
    m_doc = doc;
    m_allProjects->setEnabled(doc != nullptr);
    if (!doc) return;
    // Another project: the previous one's overlays go, and its runs with them (unless all are listed).
    connect(doc, &ProjectDocument::identityChanged, this, [this] {
        ++m_overlayGeneration;  // a load of the previous project's curves still running is stale
        clearOverlay();
        m_table->clearSelection();
        reload();
    });
    connect(doc, &ProjectDocument::runsChanged, this, &RunsPanel::reload);
    reload();
}

bool RunsPanel::setDatabase(const QString& path) {
    m_store.reset();
    if (!path.isEmpty()) {
        try {
            m_store = std::make_unique<history::RunStore>(path.toStdString());
        } catch (const std::exception& e) {
            m_status->setText(str(e.what()));
        }
    }
    reload();
    return m_store != nullptr;
}

QString RunsPanel::databasePath() const { return m_store ? str(m_store->path()) : QString(); }

void RunsPanel::reload() {
    if (!m_store) {
        m_model->setRuns({});
        if (m_status->text().isEmpty()) m_status->setText(tr("No run history"));
        return;
    }
    const QList<qint64> selected = selectedRuns();
    try {
        std::vector<history::RunRecord> runs = m_store->runs();
        const size_t all = runs.size();
        if (m_doc && !m_allProjects->isChecked()) {
            const std::vector<int64_t> ids =
                m_store->runIdsOfProject(m_doc->projectId().toStdString(), m_doc->filePath().toStdString());
            const std::set<int64_t> mine(ids.begin(), ids.end());
            std::erase_if(runs, [&](const history::RunRecord& r) { return !mine.count(r.id); });
            m_model->setRuns(std::move(runs));
            m_status->setText(tr("%1 of %n run(s)", nullptr, int(all)).arg(m_model->rowCount()) + QLatin1Char(' ') +
                              tr("(this project's)"));
        } else {
            m_model->setRuns(std::move(runs));
            m_status->setText(tr("%n run(s)", nullptr, m_model->rowCount()));
        }
    } catch (const std::exception& e) {
        m_status->setText(str(e.what()));
    }
    selectRuns(selected);
    updateButtons();
}

void RunsPanel::setFilterText(const QString& text) { m_filter->setText(text); }

void RunsPanel::selectRuns(const QList<qint64>& ids) {
    QItemSelection selection;
    for (qint64 id : ids) {
        const int row = m_model->rowOfRun(id);
        if (row < 0) continue;
        const QModelIndex i = m_proxy->mapFromSource(m_model->index(row, 0));
        if (i.isValid()) selection.select(i, i.siblingAtColumn(RunsModel::ColumnCount - 1));
    }
    m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

QList<qint64> RunsPanel::selectedRuns() const {
    QList<qint64> ids;
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    for (const QModelIndex& i : rows) ids.append(m_model->run(m_proxy->mapToSource(i).row()).id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

void RunsPanel::updateButtons() {
    const qsizetype n = m_store ? selectedRuns().size() : 0;
    m_overlayButton->setEnabled(n >= 1 && m_dashboard);
    m_diffButton->setEnabled(n == 2);
    m_compareButton->setEnabled(n >= 2);
    m_renameButton->setEnabled(n == 1);
    m_notesButton->setEnabled(n == 1);
    m_deleteButton->setEnabled(n >= 1);
    m_openButton->setEnabled(n == 1);
}

void RunsPanel::clearOverlay() {
    if (!m_dashboard) return;
    for (const QString& key : std::as_const(m_overlaySeries)) {
        const QStringList parts = key.split(QLatin1Char('|'));
        ChartPanel* chart = parts[0] == QLatin1String("task") && m_dashboard->taskView()
                                ? m_dashboard->taskView()->chart()
                                : m_dashboard->chart(parts[0]);
        if (chart) {
            chart->removeSeries(parts[1]);
            chart->refresh();
        }
    }
    m_overlaySeries.clear();
}

// The selected runs' legends and curves, read from the store (any thread: the caller's own connection).
RunsPanel::Overlay RunsPanel::loadOverlay(const history::RunStore& store, const QList<qint64>& ids) {
    Overlay overlay;
    // The legend names what differs: every setting that differs between the first run and another.
    std::vector<Json> projects;
    for (qint64 id : ids) {
        const std::string text = store.projectJson(id);
        projects.push_back(text.empty() ? Json::object() : tryParseJson<Json>(text));
    }
    std::map<std::string, std::string> firstValues;
    std::vector<std::map<std::string, std::string>> values(size_t(ids.size()));
    std::vector<std::string> keys;
    for (size_t i = 1; i < projects.size(); ++i)
        for (const auto& [key, v] : history::settingsDiff(projects[0], projects[i])) {
            if (key == "name") continue;  // the project's name says nothing about how it trained
            if (!firstValues.count(key)) keys.push_back(key);
            firstValues[key] = v.first;
            values[i][key] = v.second;
        }
    for (size_t i = 0; i < size_t(ids.size()); ++i) {
        QStringList parts;
        for (const std::string& key : keys) {
            const auto it = values[i].find(key);
            const std::string v = it != values[i].end() ? it->second : firstValues[key];
            const std::string shortKey = key.substr(key.find_last_of('.') + 1);
            parts << str(shortKey + "=" + v);
        }
        OverlayRun run;
        run.id = ids[int(i)];
        run.label = tr("run %1").arg(run.id);
        if (!parts.isEmpty())
            run.label +=
                QStringLiteral(": ") + (parts.size() > 3 ? parts.mid(0, 3).join(", ") + ", ..." : parts.join(", "));
        const std::vector<history::MetricRow> steps = store.metrics(run.id, "step");
        const std::vector<history::MetricRow> epochs = store.metrics(run.id, "epoch");
        run.x.reserve(qsizetype(steps.size()));
        run.loss.reserve(qsizetype(steps.size()));
        std::map<int, double> lastStepOfEpoch;
        for (const history::MetricRow& m : steps) {
            run.x.append(double(m.step));
            run.loss.append(m.loss);
            lastStepOfEpoch[m.epoch] = double(m.step);
        }
        for (const history::MetricRow& m : epochs) {
            if (!std::isfinite(m.valAccuracy)) continue;
            run.epochX.append(lastStepOfEpoch.count(m.epoch) ? lastStepOfEpoch[m.epoch] : double(m.epoch));
            run.valAccuracy.append(m.valAccuracy);
            // An epoch without a metric another one has (a run's first epochs from an older Strata) plots NaN there.
            for (const NamedMetric& v : m.valMetrics) {
                if (!summaryMetric(v.name)) continue;
                auto it = std::find_if(run.taskMetrics.begin(), run.taskMetrics.end(),
                                       [&](const auto& t) { return t.first == str(v.name); });
                if (it == run.taskMetrics.end()) {
                    run.taskMetrics.emplace_back(str(v.name), QVector<double>(run.epochX.size() - 1, std::nan("")));
                    it = std::prev(run.taskMetrics.end());
                }
                it->second.append(v.value);
            }
            for (auto& t : run.taskMetrics)
                if (t.second.size() < run.epochX.size()) t.second.append(std::nan(""));
        }
        overlay.push_back(std::move(run));
    }
    return overlay;
}

QString RunsPanel::statusText() const { return m_status->text(); }

QStringList RunsPanel::applyOverlay(const Overlay& overlay) {
    clearOverlay();
    QStringList labels;
    for (size_t i = 0; i < overlay.size(); ++i) {
        const OverlayRun& run = overlay[i];
        labels << run.label;
        const QColor color = kRunColors[i % std::size(kRunColors)];
        const QString name = QStringLiteral("run%1").arg(run.id);
        if (ChartPanel* c = m_dashboard->chart("loss")) {
            c->addSeries(name + ":loss", run.label, color, ChartPanel::Style::Line);
            c->append(name + ":loss", run.x, run.loss);
            c->refresh();
            m_overlaySeries << QStringLiteral("loss|") + name + ":loss";
        }
        if (ChartPanel* c = m_dashboard->chart("accuracy")) {
            c->addSeries(name + ":val_acc", run.label + tr(" (val)"), color, ChartPanel::Style::LineWithDots);
            c->append(name + ":val_acc", run.epochX, run.valAccuracy);
            c->refresh();
            m_overlaySeries << QStringLiteral("accuracy|") + name + ":val_acc";
        }
        if (TaskMetricsView* view = m_dashboard->taskView(); view && !run.taskMetrics.empty()) {
            // No run of this session has shown the view yet: it opens for the open project's task (empty: it is
            // hidden only while it holds nothing live).
            if (view->isHidden() && m_doc && m_doc->project().dataset.task != TaskKind::Classification)
                view->setTask(m_doc->project().dataset.task);
            ChartPanel* c = view->chart();
            for (const auto& [metric, values] : run.taskMetrics) {
                const QString series = name + ":" + metric;
                c->addSeries(series, run.label + QStringLiteral(" (") + metric + QLatin1Char(')'), color,
                             ChartPanel::Style::LineWithDots);
                c->append(series, run.epochX, values);
                m_overlaySeries << QStringLiteral("task|") + series;
            }
            c->refresh();
        }
    }
    return labels;
}

QStringList RunsPanel::overlaySelected() {
    ++m_overlayGeneration;  // a load still running is stale now
    clearOverlay();
    if (!m_store || !m_dashboard) return {};
    const QList<qint64> ids = selectedRuns();
    if (ids.isEmpty()) return {};
    return applyOverlay(loadOverlay(*m_store, ids));
}

void RunsPanel::overlaySelectedInBackground() {
    const quint64 generation = ++m_overlayGeneration;
    clearOverlay();
    if (!m_store || !m_dashboard) return;
    const QList<qint64> ids = selectedRuns();
    if (ids.isEmpty()) return;
    m_status->setText(tr("loading the curves of %n run(s)...", nullptr, int(ids.size())));
    const std::string path = m_store->path();
    // The curves load on a pool thread over its own connection (SQLite WAL: readers do not block the
    // writer); the charts change on the GUI thread, only if the selection has not moved on meanwhile.
    auto* watcher = new QFutureWatcher<Overlay>(this);
    connect(watcher, &QFutureWatcher<Overlay>::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != m_overlayGeneration) return;
        try {
            const QStringList labels = applyOverlay(watcher->result());
            m_status->setText(tr("%n run(s) overlaid", nullptr, int(labels.size())));
            emit overlayLoaded(labels);
        } catch (const std::exception& e) {
            m_status->setText(tr("could not load the curves: %1").arg(QString::fromStdString(e.what())));
        }
    });
    watcher->setFuture(QtConcurrent::run([path, ids] {
        const history::RunStore store(path);
        return loadOverlay(store, ids);
    }));
}

QStringList RunsPanel::settingsDiff(qint64 a, qint64 b) const {
    QStringList out;
    if (!m_store) return out;
    const Json ja = tryParseJson<Json>(m_store->projectJson(a));
    const Json jb = tryParseJson<Json>(m_store->projectJson(b));
    for (const auto& [key, v] : history::settingsDiff(ja, jb)) out << str(key + ": " + v.first + " -> " + v.second);
    return out;
}

HistogramCompareDialog* RunsPanel::compareHistograms() {
    const QList<qint64> ids = selectedRuns();
    if (ids.size() < 2) return nullptr;
    QVector<QPair<QString, QString>> runs;
    for (const qint64 id : ids) {
        const history::RunRecord& r = m_model->run(m_model->rowOfRun(id));
        const QString label = r.name.empty() ? tr("run %1").arg(id) : tr("run %1 (%2)").arg(id).arg(str(r.name));
        runs.append({label, str(r.runFolder)});
    }
    auto* dialog = new HistogramCompareDialog(runs, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    return dialog;
}

QStringList RunsPanel::metricsDiff(qint64 a, qint64 b) const {
    QStringList out;
    if (!m_store) return out;
    const std::optional<history::RunRecord> ra = m_store->run(a), rb = m_store->run(b);
    if (!ra || !rb) return out;
    std::vector<std::string> names;
    for (const auto* r : {&*ra, &*rb})
        for (const NamedMetric& m : r->finalValMetrics)
            if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    auto text = [](const history::RunRecord& r, const std::string& name) {
        const double v = metricValue(r.finalValMetrics, name);
        return std::isnan(v) ? std::string("-") : formatMetric(v);
    };
    for (const std::string& n : names) out << str(n + ": " + text(*ra, n) + " -> " + text(*rb, n));
    return out;
}

void RunsPanel::showDiffDialog() {
    const QList<qint64> ids = selectedRuns();
    if (ids.size() != 2) return;
    QStringList lines = settingsDiff(ids[0], ids[1]);
    if (lines.isEmpty()) lines << tr("The two runs trained the same settings.");
    const QStringList metrics = metricsDiff(ids[0], ids[1]);
    if (!metrics.isEmpty()) lines << QString() << tr("Validation metrics of the last epoch:") << metrics;
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Settings: run %1 -> run %2").arg(ids[0]).arg(ids[1]));
    auto* text = new QPlainTextEdit(&dialog);
    text->setReadOnly(true);
    text->setPlainText(lines.join('\n'));
    auto* box = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    connect(box, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    auto* layout = new QVBoxLayout(&dialog);
    layout->addWidget(text);
    layout->addWidget(box);
    dialog.resize(560, 320);
    dialog.exec();
}

bool RunsPanel::renameRun(qint64 id, const QString& name) {
    if (!m_store || !m_store->renameRun(id, name.toStdString())) return false;
    reload();
    return true;
}

bool RunsPanel::annotateRun(qint64 id, const QString& notes) {
    if (!m_store || !m_store->setNotes(id, notes.toStdString())) return false;
    reload();
    return true;
}

bool RunsPanel::deleteRuns(const QList<qint64>& ids) {
    if (!m_store) return false;
    clearOverlay();
    bool all = true;
    for (qint64 id : ids) all = m_store->deleteRun(id) && all;
    reload();
    return all;
}

bool RunsPanel::openRunProject(qint64 id) {
    if (!m_store) return false;
    const std::string json = m_store->projectJson(id);
    if (json.empty()) return false;
    try {
        const Project project = parseProject(json, "run " + std::to_string(id));
        emit openProjectRequested(project, tr("run %1").arg(id));
    } catch (const std::exception& e) {
        m_status->setText(str(e.what()));
        return false;
    }
    return true;
}

}  // namespace strata::ui
