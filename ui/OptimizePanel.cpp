// OptimizePanel: targets, the study on the engine thread, and the table and charts of its variants.
#include "ui/OptimizePanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include <qcustomplot.h>

#include "ui/ExportDialog.h"
#include "ui/FieldError.h"
#include "ui/RunPicker.h"
#include "ui/base/OptimizeWorker.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QString kb(uint64_t bytes) { return QLocale(QLocale::English).toString(double(bytes) / 1024.0, 'f', 1) + " KB"; }

QColor kindColor(CompressionVariant::Kind kind) {
    switch (kind) {
        case CompressionVariant::Kind::Original: return QColor(0x33, 0x33, 0x33);
        case CompressionVariant::Kind::Sparse: return QColor(0x1f, 0x77, 0xb4);
        case CompressionVariant::Kind::Structured: return QColor(0x2c, 0xa0, 0x2c);
        case CompressionVariant::Kind::Int8: return QColor(0xd6, 0x27, 0x28);
    }
    return Qt::black;
}

enum Column { Name, Accuracy, Change, NonZero, FileSize, Compressed, Batch1, Batch256, SpeedUp, ColumnCount };

// Colour by kind, a marker of its own per variant: close points stay apart, and the table's first column,
// which shows the same marker, is the charts' legend.
QCPScatterStyle variantStyle(int index, CompressionVariant::Kind kind) {
    static const QCPScatterStyle::ScatterShape shapes[] = {QCPScatterStyle::ssDisc,
                                                           QCPScatterStyle::ssSquare,
                                                           QCPScatterStyle::ssDiamond,
                                                           QCPScatterStyle::ssTriangle,
                                                           QCPScatterStyle::ssTriangleInverted,
                                                           QCPScatterStyle::ssCrossSquare,
                                                           QCPScatterStyle::ssPlusCircle,
                                                           QCPScatterStyle::ssStar};
    const QColor c = kindColor(kind);
    QCPScatterStyle style(shapes[static_cast<size_t>(index) % std::size(shapes)], c, c, 9);
    style.setPen(QPen(c, 1.6));
    return style;
}

QIcon markerIcon(const QCPScatterStyle& style) {
    QPixmap pixmap(14, 14);
    pixmap.fill(Qt::transparent);
    QCPPainter painter(&pixmap);
    painter.setRenderHint(QPainter::Antialiasing);
    style.applyTo(&painter, style.pen());
    style.drawShape(&painter, 7, 7);
    painter.end();
    return QIcon(pixmap);
}

QTableWidgetItem* cell(const QString& text, bool number = true) {
    auto* item = new QTableWidgetItem(text);
    item->setFlags(item->flags() & ~Qt::ItemIsEditable);
    if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

void styleChart(QCustomPlot* plot, const QString& x) {
    plot->xAxis->setLabel(x);
    plot->yAxis->setLabel(QObject::tr("accuracy (%)"));
    plot->setMinimumSize(220, 150);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->axisRect()->setupFullAxesBox(true);
}

}  // namespace

OptimizePanel::OptimizePanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    setObjectName(QStringLiteral("optimizePanel"));
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("optimize-engine"));
    m_worker = new OptimizeWorker;
    m_worker->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    // A study of a project that is no longer open (m_studyGeneration behind) reports to nobody.
    connect(m_worker, &OptimizeWorker::progress, this, [this](const QString& stage, double fraction) {
        if (m_studyGeneration != m_generation) return;
        m_status->setText(stage);
        m_progress->setValue(int(std::lround(fraction * 1000)));
    });
    connect(m_worker, &OptimizeWorker::variantMeasured, this, [this](const CompressionVariant& v) {
        if (m_studyGeneration == m_generation) addVariant(v);
    });
    connect(m_worker, &OptimizeWorker::logMessage, this, [this](const QString& line) {
        if (m_studyGeneration == m_generation) m_log->appendPlainText(line);
    });
    connect(m_worker, &OptimizeWorker::finished, this, [this](bool ok, bool stopped, const QString& error) {
        setBusy(false);
        if (m_studyGeneration != m_generation) {
            showReadyText();
            return;
        }
        m_progress->setValue(ok && !stopped ? 1000 : m_progress->value());
        m_status->setText(!ok       ? tr("Failed.")
                          : stopped ? tr("Stopped; the variants measured so far are shown.")
                                    : tr("Done: %1 variants measured.").arg(m_variants.size()));
        if (!ok) showError(error);
        emit optimizeFinished(ok && !stopped);
    });
    m_thread->start();
    buildUi();
    updateButtons();
    showReadyText();
    connect(m_doc, &ProjectDocument::identityChanged, this, &OptimizePanel::projectChanged);
}

void OptimizePanel::showReadyText() {
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    if (!run) {
        m_status->setText(tr("Nothing to start from yet: %1").arg(m_runPicker->whyNone()));
        return;
    }
    m_status->setText(tr("Pick targets and press Optimize: it starts from %1, and the variants go to %2.")
                          .arg(run->id == 0 ? tr("the project's checkpoint folder") : run->label(),
                               QDir::toNativeSeparators(outputFolder())));
}

void OptimizePanel::projectChanged() {
    // Another project: the previous one's study stops (the variants it measured stay in that run's folder) and
    // none of its results stay on screen.
    if (m_worker->isRunning()) m_worker->stop();
    ++m_generation;
    m_variants.clear();
    m_table->setRowCount(0);
    m_layers->setRowCount(0);
    m_log->clear();
    m_note->clear();
    showError({});
    redrawCharts();
    m_progress->setValue(0);
    showReadyText();
    updateButtons();
}

OptimizePanel::~OptimizePanel() {
    m_worker->stop();
    m_thread->quit();
    m_thread->wait();
}

void OptimizePanel::buildUi() {
    auto* top = new QHBoxLayout(this);
    top->setContentsMargins(4, 4, 4, 4);
    auto* split = new QSplitter(Qt::Horizontal, this);
    top->addWidget(split);

    // ---- targets, run, results -----------------------------------------------------------------
    auto* left = new QWidget(split);
    auto* l = new QVBoxLayout(left);
    l->setContentsMargins(0, 0, 0, 0);
    // Short rows of targets and options, each narrower than a third of a 1024 px window: the panel sits beside two
    // charts and the layers table in a bottom dock, and a row of every control held the window 1337 px wide.
    auto* row1 = new QHBoxLayout;
    m_sparse = new QCheckBox(tr("Prune to"), left);
    m_sparse->setChecked(true);
    m_sparsities = new QLineEdit(QStringLiteral("50, 80, 90"), left);
    m_sparsities->setObjectName(QStringLiteral("optimizeSparsities"));
    m_sparsities->setMaximumWidth(110);
    m_sparsities->setToolTip(
        tr("Sparsity targets in percent, each its own variant: the share of each Conv2D and "
           "Dense weight set to zero while fine-tuning (polynomial schedule)"));
    m_scope = new QComboBox(left);
    m_scope->addItem(tr("per layer"), int(PruningScope::PerLayer));
    m_scope->addItem(tr("global"), int(PruningScope::Global));
    m_scope->setToolTip(tr("Per layer: every weight reaches the target; global: one magnitude threshold for all"));
    m_structured = new QCheckBox(tr("Structured: remove"), left);
    m_structured->setChecked(true);
    // The numbers take whatever is typed; one out of range is refused with the reason under it (checkFields).
    auto* structured = new NumberSpinBox(left);
    structured->setSizeRange(kMinStructuredPercent, kMaxStructuredPercent);
    m_structuredPercent = structured;
    m_structuredPercent->setObjectName(QStringLiteral("optimizeStructured"));
    m_structuredPercent->setValue(50);
    m_structuredPercent->setSuffix(QStringLiteral("%"));
    m_structuredPercent->setToolTip(
        tr("Share of Conv2D filters and Dense units removed (smallest L1 norm); the "
           "graph shrinks and runs faster"));
    row1->addWidget(m_sparse, 0, Qt::AlignTop);
    row1->addWidget(withFieldError(m_sparsities), 0, Qt::AlignTop);
    row1->addWidget(new QLabel(tr("% sparse"), left), 0, Qt::AlignTop);
    row1->addWidget(m_scope, 0, Qt::AlignTop);
    row1->addStretch(1);
    l->addLayout(row1);
    auto* rowStructured = new QHBoxLayout;
    rowStructured->addWidget(m_structured, 0, Qt::AlignTop);
    rowStructured->addWidget(withFieldError(m_structuredPercent), 0, Qt::AlignTop);
    rowStructured->addWidget(new QLabel(tr("of filters and units"), left), 0, Qt::AlignTop);
    rowStructured->addStretch(1);
    l->addLayout(rowStructured);

    auto* row2 = new QHBoxLayout;
    m_int8 = new QCheckBox(tr("Int8 ONNX of each"), left);
    m_int8->setChecked(true);
    m_int8->setToolTip(
        tr("Per-channel int8 weights and uint8 activations calibrated on training samples, as a "
           "QDQ ONNX file; accuracy from the file's integer arithmetic"));
    auto* epochs = new NumberSpinBox(left);
    epochs->setSizeRange(1, kMaxFineTuneEpochs);
    m_epochs = epochs;
    m_epochs->setObjectName(QStringLiteral("optimizeEpochs"));
    m_epochs->setValue(2);
    m_epochs->setPrefix(tr("fine-tune "));
    m_epochs->setSuffix(tr(" epochs"));
    auto* samples = new NumberSpinBox(left);
    samples->setZeroText(tr("all"));
    samples->setSizeRange(0, 100000);  // wide enough for a validation split
    m_samples = samples;
    m_samples->setObjectName(QStringLiteral("optimizeSamples"));
    m_samples->setPrefix(tr("measure on "));
    m_samples->setSuffix(tr(" validation samples"));
    m_samples->setToolTip(tr("Validation samples each variant's accuracy is measured on; 0 or \"all\": all of them"));
    m_run = new QPushButton(tr("Optimize"), left);
    m_run->setObjectName(QStringLiteral("optimizeButton"));
    m_stop = new QPushButton(tr("Stop"), left);
    m_progress = new QProgressBar(left);
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(14);
    m_progress->setMinimumWidth(40);  // its share of the row is what the buttons leave
    row2->addWidget(m_int8, 0, Qt::AlignTop);
    row2->addWidget(withFieldError(m_epochs), 0, Qt::AlignTop);
    row2->addStretch(1);
    l->addLayout(row2);
    // Which run the study starts from: the project's newest with weights unless another is picked; its variants
    // go into that run's folder.
    auto* row3 = new QHBoxLayout;
    row3->addWidget(new QLabel(tr("Start from:"), left));
    m_runPicker = new RunPicker(m_doc, false, left);
    m_runPicker->setObjectName(QStringLiteral("optimizeRunPicker"));
    row3->addWidget(m_runPicker, 1);
    l->addLayout(row3);
    auto* row4 = new QHBoxLayout;
    row4->addWidget(withFieldError(m_samples), 0, Qt::AlignTop);
    row4->addWidget(m_run, 0, Qt::AlignTop);
    row4->addWidget(m_stop, 0, Qt::AlignTop);
    row4->addWidget(m_progress, 1, Qt::AlignVCenter);
    l->addLayout(row4);
    m_status = new QLabel(left);
    m_status->setObjectName(QStringLiteral("optimizeStatus"));
    m_status->setWordWrap(true);
    l->addWidget(m_status);
    connect(m_runPicker, &RunPicker::runChosen, this, [this] {
        if (!isBusy()) showReadyText();
    });
    m_error = new QLabel(left);
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #b00020; background: #fdecee; padding: 4px; }"));
    m_error->hide();
    l->addWidget(m_error);

    m_table = new QTableWidget(0, ColumnCount, left);
    m_table->setObjectName(QStringLiteral("optimizeResults"));
    m_table->setHorizontalHeaderLabels({tr("Variant"), tr("Accuracy"), tr("Change"), tr("Non-zero params"), tr("ONNX"),
                                        tr("Compressed"), tr("Batch 1"), tr("Batch 256"), tr("Speed-up")});
    m_table->horizontalHeaderItem(Compressed)->setToolTip(tr("The ONNX file deflated (zlib level 9): zeros pay here"));
    m_table->horizontalHeaderItem(Batch1)->setToolTip(tr("One forward pass of one sample, Strata CPU engine"));
    m_table->horizontalHeaderItem(Batch256)->setToolTip(tr("One forward pass of 256 samples, Strata CPU engine"));
    m_table->horizontalHeaderItem(SpeedUp)->setToolTip(tr("The original's batch-256 time over this variant's"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    l->addWidget(m_table, 1);
    auto* actions = new QHBoxLayout;
    m_export = new QPushButton(tr("Export..."), left);
    m_export->setToolTip(tr("Open the Export dialog with the selected variant"));
    m_open = new QPushButton(tr("Open as project"), left);
    m_open->setToolTip(tr("Open the selected pruned variant's project (its graph, settings and checkpoints)"));
    m_note = new QLabel(left);
    m_note->setWordWrap(true);
    m_note->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
    actions->addWidget(m_export);
    actions->addWidget(m_open);
    actions->addWidget(m_note, 1);
    l->addLayout(actions);
    split->addWidget(left);

    // ---- charts --------------------------------------------------------------------------------
    auto* charts = new QWidget(split);
    auto* c = new QVBoxLayout(charts);
    c->setContentsMargins(0, 0, 0, 0);
    m_sizePlot = new QCustomPlot(charts);
    m_sizePlot->setObjectName(QStringLiteral("optimizeSizeChart"));
    styleChart(m_sizePlot, tr("ONNX file, compressed (KB)"));
    m_timePlot = new QCustomPlot(charts);
    m_timePlot->setObjectName(QStringLiteral("optimizeTimeChart"));
    styleChart(m_timePlot, tr("forward pass of 256 samples (ms)"));
    m_timePlot->setToolTip(tr("Strata's CPU engine; int8 files in its int8 engine where it runs them (AVX512-VNNI)"));
    c->addWidget(m_sizePlot, 1);
    c->addWidget(m_timePlot, 1);
    split->addWidget(charts);

    // ---- layers and log ------------------------------------------------------------------------
    auto* right = new QWidget(split);
    auto* r = new QVBoxLayout(right);
    r->setContentsMargins(0, 0, 0, 0);
    r->addWidget(new QLabel(tr("Sparsity by layer (selected variant)"), right));
    m_layers = new QTableWidget(0, 3, right);
    m_layers->setObjectName(QStringLiteral("optimizeLayers"));
    m_layers->setHorizontalHeaderLabels({tr("Weight"), tr("Zero"), tr("Sparsity")});
    m_layers->verticalHeader()->hide();
    m_layers->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    r->addWidget(m_layers, 2);
    m_log = new QPlainTextEdit(right);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(500);
    m_log->setPlaceholderText(tr("Fine-tuning log"));
    r->addWidget(m_log, 1);
    split->addWidget(right);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 4);
    split->setStretchFactor(2, 2);
    split->setSizes({600, 420, 260});

    connect(m_run, &QPushButton::clicked, this, &OptimizePanel::optimize);
    connect(m_stop, &QPushButton::clicked, this, &OptimizePanel::stop);
    connect(m_table, &QTableWidget::itemSelectionChanged, this, [this] {
        const auto rows = m_table->selectionModel()->selectedRows();
        showLayers(rows.isEmpty() ? -1 : rows.front().row());
        updateButtons();
    });
    connect(m_export, &QPushButton::clicked, this, [this] {
        const auto rows = m_table->selectionModel()->selectedRows();
        if (rows.isEmpty()) return;
        const CompressionVariant& v = m_variants[rows.front().row()];
        emit exportRequested(q(v.checkpoint), v.kind == CompressionVariant::Kind::Int8);
    });
    connect(m_open, &QPushButton::clicked, this, [this] {
        const auto rows = m_table->selectionModel()->selectedRows();
        if (!rows.isEmpty() && !m_variants[rows.front().row()].projectFile.empty())
            emit openProjectRequested(q(m_variants[rows.front().row()].projectFile));
    });
    connect(m_sparse, &QCheckBox::toggled, m_sparsities, &QWidget::setEnabled);
    connect(m_sparse, &QCheckBox::toggled, m_scope, &QWidget::setEnabled);
    connect(m_structured, &QCheckBox::toggled, m_structuredPercent, &QWidget::setEnabled);
    // A refusal describes the fields as they are: every edit checks them again.
    for (QCheckBox* check : {m_sparse, m_structured})
        connect(check, &QCheckBox::toggled, this, [this] { checkFields(); });
    connect(m_sparsities, &QLineEdit::textChanged, this, [this] { checkFields(); });
    for (QSpinBox* spin : {m_structuredPercent, m_epochs, m_samples})
        connect(spin, &QSpinBox::valueChanged, this, [this] { checkFields(); });
}

bool OptimizePanel::checkFields() const {
    std::vector<double> sparsities;
    const bool sparsitiesOk = !m_sparse->isChecked() || parseSparsities(m_sparsities->text(), &sparsities);
    setFieldError(m_sparsities, sparsitiesOk ? QString()
                                             : notAppliedText(QStringLiteral("\"%1\"").arg(m_sparsities->text()),
                                                              tr("percentages above 0 and below 100, separated "
                                                                 "by commas (\"50, 80, 90\")")));
    const auto check = [](QSpinBox* spin, bool applies, int min, int max, const QString& allowed) {
        const bool ok = !applies || (spin->value() >= min && spin->value() <= max);
        setFieldError(spin, ok ? QString() : notAppliedText(QString::number(spin->value()), allowed));
        return ok;
    };
    const bool structuredOk =
        check(m_structuredPercent, m_structured->isChecked(), kMinStructuredPercent, kMaxStructuredPercent,
              tr("%1 to %2 (%)").arg(kMinStructuredPercent).arg(kMaxStructuredPercent));
    const bool epochsOk = check(m_epochs, true, 1, kMaxFineTuneEpochs, tr("1 to %1").arg(kMaxFineTuneEpochs));
    const bool samplesOk = check(m_samples, true, 0, kMaxMeasureSamples, tr("0 (all) to %1").arg(kMaxMeasureSamples));
    return sparsitiesOk && structuredOk && epochsOk && samplesOk;
}

bool OptimizePanel::parseSparsities(const QString& text, std::vector<double>* out) {
    out->clear();
    for (QString part : text.split(QRegularExpression(QStringLiteral("[,;\\s]+")), Qt::SkipEmptyParts)) {
        part.remove(QLatin1Char('%'));
        if (part.isEmpty()) continue;
        bool ok = false;
        const double v = part.toDouble(&ok);
        if (!ok || !(v > 0 && v < 100)) return false;
        out->push_back(v / 100.0);
    }
    return !out->empty();
}

QString OptimizePanel::outputFolder() const {
    if (!m_outputOverride.isEmpty()) return m_outputOverride;
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    if (!run) return {};
    return QDir(QDir::cleanPath(run->folder)).filePath(QStringLiteral("optimized"));
}

QString OptimizePanel::sourceRunText() const {
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    return run ? run->label() : QString();
}

bool OptimizePanel::buildRequest(CompressionRequest* request, QString* error) const {
    if (!checkFields()) {
        *error = tr("A field above is not applied; the line under it says why.");
        return false;
    }
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    if (!run) {
        *error = m_runPicker->whyNone();
        return false;
    }
    CompressionRequest r;
    r.checkpoint = run->checkpoint.toStdString();
    r.projectPath = m_doc->filePath().toStdString();
    r.outputDir = outputFolder().toStdString();
    if (m_sparse->isChecked() && !parseSparsities(m_sparsities->text(), &r.sparsities)) {
        *error = tr("Sparsities must be percentages above 0 and below 100, separated by commas (\"50, 80, 90\"); "
                    "got \"%1\".")
                     .arg(m_sparsities->text());
        return false;
    }
    r.scope = PruningScope(m_scope->currentData().toInt());
    if (m_structured->isChecked()) r.structuredFraction = m_structuredPercent->value() / 100.0;
    r.int8 = m_int8->isChecked();
    r.fineTuneEpochs = m_epochs->value();
    r.evaluationSamples = m_samples->value();
    r.threads = m_threads;
    *request = r;
    return true;
}

bool OptimizePanel::isBusy() const { return m_worker->isRunning() || !m_run->isEnabled(); }

void OptimizePanel::setBusy(bool busy) {
    m_run->setEnabled(!busy);
    m_stop->setEnabled(busy);
    for (QWidget* w : std::initializer_list<QWidget*>{m_sparse, m_sparsities, m_scope, m_structured,
                                                      m_structuredPercent, m_int8, m_epochs, m_samples})
        w->setEnabled(!busy);
    if (!busy) {
        m_sparsities->setEnabled(m_sparse->isChecked());
        m_scope->setEnabled(m_sparse->isChecked());
        m_structuredPercent->setEnabled(m_structured->isChecked());
    }
    updateButtons();
}

void OptimizePanel::showError(const QString& text) {
    m_error->setText(text);
    m_error->setVisible(!text.isEmpty());
}

void OptimizePanel::optimize() {
    if (isBusy()) return;
    showError({});
    CompressionRequest request;
    QString error;
    if (!buildRequest(&request, &error)) {
        showError(error);
        emit optimizeFinished(false);
        return;
    }
    if (request.sparsities.empty() && request.structuredFraction <= 0 && !request.int8) {
        showError(tr("Pick at least one target: a sparsity, structured pruning or int8."));
        emit optimizeFinished(false);
        return;
    }
    m_variants.clear();
    m_table->setRowCount(0);
    m_layers->setRowCount(0);
    m_log->clear();
    m_note->clear();
    redrawCharts();
    m_progress->setValue(0);
    m_status->setText(tr("Starting: the variants go to %1").arg(q(request.outputDir)));
    m_studyGeneration = m_generation;
    setBusy(true);
    QMetaObject::invokeMethod(m_worker, "start", Qt::QueuedConnection, Q_ARG(strata::CompressionRequest, request));
}

void OptimizePanel::stop() {
    m_worker->stop();
    m_status->setText(tr("Stopping between steps..."));
}

void OptimizePanel::addVariant(const CompressionVariant& v) {
    m_variants.push_back(v);
    const CompressionVariant& original = m_variants.front();
    const int row = m_table->rowCount();
    m_table->insertRow(row);
    auto* name = cell(q(v.name), false);
    name->setForeground(kindColor(v.kind));
    name->setIcon(markerIcon(variantStyle(row, v.kind)));
    name->setToolTip(q(v.note));
    m_table->setItem(row, Name, name);
    m_table->setItem(row, Accuracy, cell(QString::number(v.accuracy * 100, 'f', 2) + QLatin1Char('%')));
    const double change = (v.accuracy - original.accuracy) * 100;
    m_table->setItem(
        row, Change,
        cell(row == 0 ? QStringLiteral("-")
                      : (change >= 0 ? QStringLiteral("+") : QString()) + QString::number(change, 'f', 2)));
    m_table->setItem(row, NonZero,
                     cell(QLocale(QLocale::English).toString(qlonglong(v.nonZero)) + QStringLiteral(" / ") +
                          QLocale(QLocale::English).toString(qlonglong(v.parameters))));
    m_table->setItem(row, FileSize, cell(kb(v.fileBytes)));
    m_table->setItem(row, Compressed, cell(kb(v.compressedBytes)));
    if (v.timed) {
        m_table->setItem(row, Batch1, cell(QString::number(v.msPerBatch1, 'f', 3) + QStringLiteral(" ms")));
        m_table->setItem(row, Batch256, cell(QString::number(v.msPerBatch256, 'f', 2) + QStringLiteral(" ms")));
        m_table->setItem(row, SpeedUp,
                         cell(QString::number(original.msPerBatch256 / v.msPerBatch256, 'f', 2) + QStringLiteral("x")));
    } else {
        for (int col : {Batch1, Batch256, SpeedUp}) {
            auto* item = cell(tr("not timed"));
            item->setToolTip(q(v.note));
            m_table->setItem(row, col, item);
        }
    }
    redrawCharts();
    if (row == 0) selectVariant(0);
}

void OptimizePanel::selectVariant(int row) {
    if (row >= 0 && row < m_table->rowCount()) m_table->selectRow(row);
}

void OptimizePanel::showLayers(int row) {
    m_layers->setRowCount(0);
    if (row < 0 || row >= m_variants.size()) {
        m_note->clear();
        return;
    }
    const CompressionVariant& v = m_variants[row];
    m_note->setText(q(v.note));
    for (const LayerSparsity& l : v.layers) {
        const int r = m_layers->rowCount();
        m_layers->insertRow(r);
        m_layers->setItem(r, 0, cell(q(l.name), false));
        m_layers->setItem(r, 1, cell(QStringLiteral("%1 / %2").arg(l.zeros).arg(l.total)));
        m_layers->setItem(r, 2, cell(QString::number(l.sparsity() * 100, 'f', 1) + QLatin1Char('%')));
    }
}

void OptimizePanel::updateButtons() {
    const auto rows = m_table->selectionModel() ? m_table->selectionModel()->selectedRows() : QModelIndexList{};
    const bool selected = !rows.isEmpty() && rows.front().row() < m_variants.size();
    m_export->setEnabled(selected);
    m_open->setEnabled(selected && !m_variants[rows.front().row()].projectFile.empty());
    m_stop->setEnabled(!m_run->isEnabled());
}

void OptimizePanel::redrawCharts() {
    for (QCustomPlot* plot : {m_sizePlot, m_timePlot}) {
        plot->clearGraphs();
        plot->clearItems();
    }
    double minAcc = 100, maxAcc = 0;
    for (const CompressionVariant& v : m_variants) {
        minAcc = std::min(minAcc, v.accuracy * 100);
        maxAcc = std::max(maxAcc, v.accuracy * 100);
    }
    auto point = [](QCustomPlot* plot, double x, double y, const CompressionVariant& v, const QCPScatterStyle& style) {
        QCPGraph* g = plot->addGraph();
        g->setLineStyle(QCPGraph::lsNone);
        g->setPen(style.pen());
        g->setScatterStyle(style);
        g->setName(QString::fromStdString(v.name));
        g->addData(x, y);
    };
    double maxSize = 0, maxTime = 0;
    for (int i = 0; i < m_variants.size(); ++i) {
        const CompressionVariant& v = m_variants[i];
        const QCPScatterStyle style = variantStyle(i, v.kind);
        const double size = double(v.compressedBytes) / 1024.0;
        maxSize = std::max(maxSize, size);
        point(m_sizePlot, size, v.accuracy * 100, v, style);
        if (v.timed) {
            maxTime = std::max(maxTime, v.msPerBatch256);
            point(m_timePlot, v.msPerBatch256, v.accuracy * 100, v, style);
        }
    }
    const double pad = std::max(0.5, (maxAcc - minAcc) * 0.25);
    for (QCustomPlot* plot : {m_sizePlot, m_timePlot}) {
        plot->yAxis->setRange(m_variants.isEmpty() ? 0 : minAcc - pad, m_variants.isEmpty() ? 100 : maxAcc + pad);
        plot->xAxis->setRange(0, 1);
    }
    if (maxSize > 0) m_sizePlot->xAxis->setRange(0, maxSize * 1.1);
    if (maxTime > 0) m_timePlot->xAxis->setRange(0, maxTime * 1.1);
    m_sizePlot->replot(QCustomPlot::rpQueuedReplot);
    m_timePlot->replot(QCustomPlot::rpQueuedReplot);
}

QString OptimizePanel::statusText() const { return m_status->text(); }

QString OptimizePanel::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

}  // namespace strata::ui
