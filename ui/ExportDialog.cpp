// ExportDialog: options, the worker task and the result view of File > Export Model.
#include "ui/ExportDialog.h"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QToolButton>
#include <QVBoxLayout>
#include <exception>

#include <QtConcurrent/QtConcurrentRun>

#include "core/data/Dataset.h"
#include "core/export/Onnx.h"
#include "core/infer/Evaluation.h"
#include "core/train/Checkpoint.h"
#include "core/train/RunFolder.h"
#include "ui/FieldError.h"
#include "ui/RunPicker.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/ProjectRuns.h"

namespace strata::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QString sizeText(uint64_t bytes) {
    return QLocale(QLocale::English).formattedDataSize(qint64(bytes)) +
           QStringLiteral(" (%1 bytes)").arg(QLocale(QLocale::English).toString(qulonglong(bytes)));
}

QString percent(double v) { return QString::number(100.0 * v, 'f', 2) + QLatin1Char('%'); }

// The export check's sample count: at least one, and few enough to stay a quick check.
constexpr int kMinCheckSamples = 1;
constexpr int kMaxCheckSamples = 100000;

}  // namespace

ExportDialog::ExportDialog(ProjectDocument* doc, QWidget* parent) : QDialog(parent), m_doc(doc) {
    setObjectName(QStringLiteral("exportDialog"));
    setWindowTitle(tr("Export model"));
    m_watcher = new QFutureWatcher<ExportOutcome>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] {
        setBusy(false);
        // An export started for the previous project finishes (its file is written) but is not shown as this one's.
        if (m_exportGeneration == m_generation) showOutcome(m_watcher->result());
    });
    buildUi();
    updateOptions();
    connect(m_doc, &ProjectDocument::identityChanged, this, &ExportDialog::projectChanged);
}

ExportDialog::~ExportDialog() { m_watcher->waitForFinished(); }

void ExportDialog::buildUi() {
    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);

    // Which of the project's runs (RunPicker), or another checkpoint or model file; the path below, and a note
    // naming what it is.
    auto* sourceRow = new QWidget(this);
    auto* sourceLayout = new QHBoxLayout(sourceRow);
    sourceLayout->setContentsMargins(0, 0, 0, 0);
    m_runPicker = new RunPicker(m_doc, true, sourceRow);
    m_runPicker->setObjectName(QStringLiteral("exportRunPicker"));
    m_source = new QLineEdit(this);
    m_source->setObjectName(QStringLiteral("exportSource"));
    m_source->setPlaceholderText(tr("checkpoint file or folder"));
    auto* fileButton = new QToolButton(sourceRow);
    fileButton->setText(tr("File..."));
    auto* folderButton = new QToolButton(sourceRow);
    folderButton->setText(tr("Folder..."));
    sourceLayout->addWidget(m_runPicker, 1);
    sourceLayout->addWidget(fileButton);
    sourceLayout->addWidget(folderButton);
    connect(m_runPicker, &RunPicker::runChosen, this, [this] {
        if (m_sourceFromProject || !m_runPicker->otherSelected()) useProjectCheckpoint(false);
    });
    connect(m_runPicker, &RunPicker::otherChosen, this, [this] {
        m_sourceFromProject = false;
        m_sourceNote->setText(tr("Type a checkpoint file or folder, or pick one with File... or Folder..."));
    });
    connect(fileButton, &QToolButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Checkpoint or model file"), m_source->text(),
                                                       tr("Checkpoints and exports (*.safetensors *.gguf *.onnx);;"
                                                          "All files (*)"));
        if (!f.isEmpty()) setSource(f);
    });
    connect(folderButton, &QToolButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"), m_source->text());
        if (!d.isEmpty()) setSource(d);
    });
    // The note sits under the path in one field, so a long message wraps across the field's width.
    auto* sourceBox = new QWidget(this);
    auto* sourceBoxLayout = new QVBoxLayout(sourceBox);
    sourceBoxLayout->setContentsMargins(0, 0, 0, 0);
    sourceBoxLayout->setSpacing(2);
    sourceRow->setParent(sourceBox);
    m_source->setParent(sourceBox);
    sourceBoxLayout->addWidget(sourceRow);
    sourceBoxLayout->addWidget(m_source);
    m_sourceNote = new QLabel(sourceBox);
    m_sourceNote->setWordWrap(true);
    m_sourceNote->setObjectName(QStringLiteral("exportSourceNote"));
    m_sourceNote->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
    sourceBoxLayout->addWidget(m_sourceNote);
    form->addRow(tr("Source:"), sourceBox);

    m_format = new QComboBox(this);
    m_format->addItem(tr("ONNX (.onnx)"), int(ExportFormat::Onnx));
    m_format->addItem(tr("GGUF (.gguf)"), int(ExportFormat::Gguf));
    m_format->addItem(tr("safetensors (.safetensors)"), int(ExportFormat::Safetensors));
    form->addRow(tr("Format:"), m_format);

    // The numbers take whatever is typed; one out of range is refused with the reason under it (checkFields).
    m_opset = new QSpinBox(this);
    m_opset->setObjectName(QStringLiteral("exportOpset"));
    acceptAnyNumber(m_opset);
    m_opset->setValue(kOnnxDefaultOpset);
    m_opset->setToolTip(tr("ONNX operator set, %1 to %2; 17 adds LayerNormalization, older sets decompose it")
                            .arg(kOnnxMinOpset)
                            .arg(kOnnxMaxOpset));
    form->addRow(tr("ONNX opset:"), withFieldError(m_opset));

    m_precision = new QComboBox(this);
    m_precision->addItem(tr("F32 (exact)"), int(ExportPrecision::F32));
    m_precision->addItem(tr("F16 (matrices and filters)"), int(ExportPrecision::F16));
    m_precision->addItem(tr("Q8_0 (8-bit blocks of 32, GGUF only)"), int(ExportPrecision::Q8_0));
    m_precision->addItem(tr("Q4_0 (4-bit blocks of 32, GGUF only)"), int(ExportPrecision::Q4_0));
    m_precision->addItem(tr("int8 (QDQ: per-channel weights, calibrated activations; ONNX only)"),
                         int(ExportPrecision::Int8));
    form->addRow(tr("Quantization:"), m_precision);

    auto* outRow = new QWidget(this);
    auto* outLayout = new QHBoxLayout(outRow);
    outLayout->setContentsMargins(0, 0, 0, 0);
    m_output = new QLineEdit(outRow);
    m_output->setObjectName(QStringLiteral("exportOutput"));
    auto* browse = new QToolButton(outRow);
    browse->setText(tr("Browse..."));
    outLayout->addWidget(m_output, 1);
    outLayout->addWidget(browse);
    connect(m_output, &QLineEdit::textEdited, this, [this] { m_outputEdited = true; });
    connect(m_source, &QLineEdit::textEdited, this, [this] {
        m_sourceFromProject = false;
        m_runPicker->chooseOther();
        m_sourceNote->clear();
    });
    connect(browse, &QToolButton::clicked, this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, tr("Export to"), outputPath());
        if (!f.isEmpty()) setOutputPath(f);
    });
    form->addRow(tr("Output file:"), outRow);

    m_samples = new QSpinBox(this);
    m_samples->setObjectName(QStringLiteral("exportSamples"));
    acceptAnyNumber(m_samples);
    m_samples->setValue(256);
    m_samples->setToolTip(tr("Validation samples the exported file and the live model are both run on, %1 to %2")
                              .arg(kMinCheckSamples)
                              .arg(kMaxCheckSamples));
    m_samples->setSuffix(tr(" validation samples"));
    form->addRow(tr("Check on:"), withFieldError(m_samples));
    layout->addLayout(form);

    auto* runRow = new QHBoxLayout;
    m_export = new QPushButton(tr("Export and check"), this);
    m_export->setObjectName(QStringLiteral("exportButton"));
    m_export->setDefault(true);
    m_busy = new QProgressBar(this);
    m_busy->setRange(0, 0);
    m_busy->setMaximumHeight(14);
    m_busy->setTextVisible(false);
    m_busy->hide();
    m_status = new QLabel(this);
    auto* close = new QPushButton(tr("Close"), this);
    connect(close, &QPushButton::clicked, this, &QDialog::reject);
    runRow->addWidget(m_export);
    runRow->addWidget(m_busy, 1);
    runRow->addWidget(m_status, 1);
    runRow->addWidget(close);
    layout->addLayout(runRow);

    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("exportError"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #b00020; background: #fdecee; padding: 6px; }"));
    m_error->hide();
    layout->addWidget(m_error);

    m_result = new QLabel(this);
    m_result->setObjectName(QStringLiteral("exportResult"));
    m_result->setWordWrap(true);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_result);
    m_method = new QLabel(this);
    m_method->setWordWrap(true);
    m_method->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
    layout->addWidget(m_method);
    m_tensors = new QPlainTextEdit(this);
    m_tensors->setReadOnly(true);
    m_tensors->setPlaceholderText(tr("The tensors as stored in the file appear here."));
    m_tensors->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_tensors->setFont(QFont(QStringLiteral("monospace")));
    m_tensors->setMinimumHeight(90);
    layout->addWidget(m_tensors, 1);

    connect(m_format, &QComboBox::currentIndexChanged, this, &ExportDialog::updateOptions);
    connect(m_precision, &QComboBox::currentIndexChanged, this, &ExportDialog::updateOptions);
    connect(m_export, &QPushButton::clicked, this, &ExportDialog::startExport);
    // The last attempt's error describes the fields as they were: any edit clears it.
    connect(m_source, &QLineEdit::textChanged, this, &ExportDialog::fieldsEdited);
    connect(m_output, &QLineEdit::textChanged, this, &ExportDialog::fieldsEdited);
    connect(m_format, &QComboBox::currentIndexChanged, this, &ExportDialog::fieldsEdited);
    connect(m_precision, &QComboBox::currentIndexChanged, this, &ExportDialog::fieldsEdited);
    connect(m_opset, &QSpinBox::valueChanged, this, &ExportDialog::fieldsEdited);
    connect(m_samples, &QSpinBox::valueChanged, this, &ExportDialog::fieldsEdited);
    resize(720, 600);
}

void ExportDialog::fieldsEdited() {
    if (isBusy()) return;
    showError({});
    checkFields();
}

bool ExportDialog::checkFields() {
    const int opset = m_opset->value(), samples = m_samples->value();
    const bool opsetOk = format() != ExportFormat::Onnx || (opset >= kOnnxMinOpset && opset <= kOnnxMaxOpset);
    setFieldError(m_opset, opsetOk ? QString()
                                   : notAppliedText(QString::number(opset),
                                                    tr("%1 to %2").arg(kOnnxMinOpset).arg(kOnnxMaxOpset)));
    const bool samplesOk = samples >= kMinCheckSamples && samples <= kMaxCheckSamples;
    setFieldError(m_samples, samplesOk ? QString()
                                       : notAppliedText(QString::number(samples),
                                                        tr("%1 to %2").arg(kMinCheckSamples).arg(kMaxCheckSamples)));
    return opsetOk && samplesOk;
}

QString ExportDialog::projectCheckpoint(const ProjectDocument* doc, QString* error) {
    const std::optional<ProjectRun> run = latestUsableRun(projectRuns(*doc), *doc, error);
    return run ? run->checkpoint : QString();
}

void ExportDialog::useProjectCheckpoint(bool newest) {
    if (newest) m_runPicker->refresh(true);
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    m_source->setText(run ? run->checkpoint : QString());
    m_sourceFromProject = true;
    m_sourceRun = run ? run->id : -1;
    if (!run)
        m_sourceNote->setText(m_runPicker->whyNone());
    else if (run->id == 0)
        m_sourceNote->setText(tr("The project's checkpoint folder: %1.").arg(QFileInfo(run->checkpoint).fileName()));
    else
        m_sourceNote->setText(tr("Run %1 of %2: its %3 in %4.")
                                  .arg(run->id)
                                  .arg(m_doc->displayName(), QFileInfo(run->checkpoint).fileName(),
                                       QDir::toNativeSeparators(run->folder)));
    if (!m_outputEdited) m_output->setText(defaultOutputPath());
}

void ExportDialog::projectChanged() {
    // Another project: nothing of the previous one stays (its run as source, its file name as output, the
    // result of its last export).
    ++m_generation;
    m_outputEdited = false;
    m_outcome = ExportOutcome{};
    showError({});
    m_result->clear();
    m_method->clear();
    m_tensors->clear();
    useProjectCheckpoint(true);
}

QString ExportDialog::sourceRunText() const {
    const std::optional<ProjectRun> run =
        m_sourceFromProject ? runWithId(m_runPicker->runs(), m_sourceRun) : std::nullopt;
    return run ? run->label() : QString();
}

void ExportDialog::setSource(const QString& path) {
    m_source->setText(path);
    m_sourceFromProject = false;
    m_sourceRun = -1;
    m_runPicker->chooseOther();
    m_sourceNote->setText(QFileInfo(path).isDir() ? tr("A folder: its best (else latest) checkpoint.") : QString());
}

void ExportDialog::setFormat(ExportFormat format) { m_format->setCurrentIndex(m_format->findData(int(format))); }

void ExportDialog::setPrecision(ExportPrecision precision) {
    m_precision->setCurrentIndex(m_precision->findData(int(precision)));
}

void ExportDialog::setOutputPath(const QString& path) {
    m_output->setText(path);
    m_outputEdited = true;
}

QString ExportDialog::outputPath() const { return m_output->text().trimmed(); }

ExportFormat ExportDialog::format() const { return ExportFormat(m_format->currentData().toInt()); }

ExportPrecision ExportDialog::precision() const { return ExportPrecision(m_precision->currentData().toInt()); }

QString ExportDialog::defaultOutputPath() const {
    const QString docPath = m_doc->filePath();
    const QString dir = docPath.isEmpty() ? QDir::homePath() : QFileInfo(docPath).absolutePath();
    QString base = q(m_doc->project().name).toLower();
    base.replace(QRegularExpression(QStringLiteral("[^a-z0-9]+")), QStringLiteral("-"));
    base.remove(QRegularExpression(QStringLiteral("^-+|-+$")));
    if (base.isEmpty()) base = QStringLiteral("model");
    if (precision() != ExportPrecision::F32) base += QLatin1Char('-') + q(exportPrecisionName(precision())).toLower();
    return QDir(dir).filePath(base + q(exportFormatExtension(format())));
}

QString ExportDialog::outputPathFor(const QString& path, ExportPrecision precision) {
    const QFileInfo info(path);
    if (info.fileName().isEmpty()) return path;
    const QString ext = info.suffix().isEmpty() ? QString() : QLatin1Char('.') + info.suffix();
    QString stem = info.fileName().chopped(ext.size());
    for (const ExportPrecision p :
         {ExportPrecision::F16, ExportPrecision::Q8_0, ExportPrecision::Q4_0, ExportPrecision::Int8}) {
        const QString tag = QLatin1Char('-') + q(exportPrecisionName(p)).toLower();
        if (stem.endsWith(tag, Qt::CaseInsensitive) && stem.size() > tag.size()) stem.chop(tag.size());
    }
    if (precision != ExportPrecision::F32) stem += QLatin1Char('-') + q(exportPrecisionName(precision)).toLower();
    const QString name = stem + ext;
    return info.path() == QLatin1String(".") && !path.startsWith(QLatin1String("./"))
               ? name
               : QDir(info.path()).filePath(name);
}

void ExportDialog::updateOptions() {
    const ExportFormat f = format();
    m_opset->setEnabled(f == ExportFormat::Onnx);
    // Precisions the format lacks are disabled, and a selected one falls back to F32.
    auto* model = qobject_cast<QStandardItemModel*>(m_precision->model());
    for (int i = 0; i < m_precision->count(); ++i)
        model->item(i)->setEnabled(exportFormatSupports(f, ExportPrecision(m_precision->itemData(i).toInt())));
    if (!exportFormatSupports(f, precision())) m_precision->setCurrentIndex(0);
    if (!m_outputEdited) {
        m_output->setText(defaultOutputPath());
    } else {
        // Keep the user's name, but give it the format's extension.
        QFileInfo info(outputPath());
        const QString ext = q(exportFormatExtension(f));
        if (!info.fileName().isEmpty() && !outputPath().endsWith(ext)) {
            const QString suffix = info.suffix();
            const bool known = suffix == QLatin1String("onnx") || suffix == QLatin1String("gguf") ||
                               suffix == QLatin1String("safetensors");
            const QString stem = known ? info.completeBaseName() : info.fileName();
            m_output->setText(QDir(info.path()).filePath(stem + ext));
        }
        // And its precision: switching to int8 after exporting model.onnx must not write over it.
        if (const QString named = outputPathFor(outputPath(), precision()); named != outputPath())
            m_output->setText(named);
    }
}

void ExportDialog::showEvent(QShowEvent* event) {
    if (m_source->text().isEmpty() || m_sourceFromProject) useProjectCheckpoint(false);
    if (!m_outputEdited) m_output->setText(defaultOutputPath());
    QDialog::showEvent(event);
}

bool ExportDialog::isBusy() const { return m_watcher->isRunning(); }

void ExportDialog::setBusy(bool busy) {
    m_export->setEnabled(!busy);
    m_busy->setVisible(busy);
    m_status->setText(busy ? tr("Writing and checking...") : QString());
}

void ExportDialog::showError(const QString& text) {
    m_error->setText(text);
    m_error->setVisible(!text.isEmpty());
}

void ExportDialog::startExport() {
    if (isBusy()) return;
    showError({});
    m_result->clear();
    m_method->clear();
    m_tensors->clear();
    if (!checkFields()) {
        m_outcome = ExportOutcome{};
        m_outcome.error = tr("Nothing exported: fix the values marked above.");
        showError(m_outcome.error);
        emit exportFinished(false);
        return;
    }
    // A quantized export carries its precision in its name (also when one was typed without it).
    if (const QString named = outputPathFor(outputPath(), precision()); named != outputPath()) m_output->setText(named);
    ExportJob job;
    job.source = m_source->text().trimmed();
    job.output = outputPath();
    job.projectPath = m_doc->filePath();
    job.request.format = format();
    job.request.precision = precision();
    job.request.opset = m_opset->value();
    job.samples = m_samples->value();
    if (job.source.isEmpty()) {
        QString error;
        projectCheckpoint(m_doc, &error);
        m_outcome = ExportOutcome{};
        m_outcome.error = error.isEmpty() ? tr("No source checkpoint given.") : error;
        showError(m_outcome.error);
        emit exportFinished(false);
        return;
    }
    if (job.output.isEmpty()) {
        m_outcome = ExportOutcome{};
        m_outcome.error = tr("No output file given.");
        showError(m_outcome.error);
        emit exportFinished(false);
        return;
    }
    setBusy(true);
    m_exportGeneration = m_generation;
    m_watcher->setFuture(QtConcurrent::run([job] { return runExport(job); }));
}

ExportOutcome ExportDialog::runExport(const ExportJob& job) {
    ExportOutcome out;
    out.precision = job.request.precision;
    ExportModel live;
    try {
        std::string source = job.source.toStdString();
        if (QFileInfo(job.source).isDir()) source = resolveCheckpointPath(source);
        out.sourceFile = q(source);
        live = loadModelFile(source);
    } catch (const std::exception& e) {
        const QString what = q(e.what());
        out.error = what.contains(job.source) || (!out.sourceFile.isEmpty() && what.contains(out.sourceFile))
                        ? tr("Cannot load the source: %1").arg(what)
                        : tr("Cannot load %1: %2").arg(job.source, what);
        return out;
    }
    // Int8 calibrates on the training split, so the data comes first.
    DatasetBundle data;
    bool haveData = false;
    if (job.request.precision == ExportPrecision::Int8) {
        try {
            data = loadDataset(live.project.dataset, job.projectPath.toStdString());
            haveData = true;
        } catch (const std::exception& e) {
            out.error = tr("Cannot load the training data to calibrate int8 on: %1").arg(q(e.what()));
            return out;
        }
    }
    try {
        out.write = writeExport(job.output.toStdString(), live, job.request, haveData ? &data.train : nullptr);
    } catch (const std::exception& e) {
        out.error = tr("Cannot write %1: %2").arg(job.output, q(e.what()));
        return out;
    }
    try {
        if (!haveData) data = loadDataset(live.project.dataset, job.projectPath.toStdString());
        const bool hasValidation = data.validation.count > 0;
        out.checkSplit = hasValidation ? QStringLiteral("validation") : QStringLiteral("training");
        out.check = checkExport(live, job.output.toStdString(), hasValidation ? data.validation : data.train,
                                data.normalization, job.samples);
        out.checked = true;
    } catch (const std::exception& e) {
        out.checkError = tr("Written, but the check failed: %1").arg(q(e.what()));
    }
    return out;
}

void ExportDialog::showOutcome(const ExportOutcome& o) {
    m_outcome = o;
    if (!o.error.isEmpty()) {
        showError(o.error);
        emit exportFinished(false);
        return;
    }
    const QString name = QFileInfo(outputPath()).fileName();
    QString text = tr("<b>Wrote %1</b>: %2, %3 tensors, from %4.")
                       .arg(name.toHtmlEscaped(), sizeText(o.write.summary.bytes))
                       .arg(o.write.summary.tensors.size())
                       .arg(QFileInfo(o.sourceFile).fileName().toHtmlEscaped());
    if (!o.write.summary.fallbacks.empty()) {
        QStringList names;
        for (const ExportParameter& p : o.write.summary.fallbacks)
            names << q(p.name + " " + p.shape.toString()).toHtmlEscaped();
        text += tr("<br>Stored as F16 instead of %1 (innermost dimension not a multiple of 32): %2.")
                    .arg(q(exportPrecisionName(o.precision)), names.join(QStringLiteral(", ")));
    }
    if (!o.write.folded.empty()) {
        QStringList folds;
        for (const FoldedBatchNorm& f : o.write.folded)
            folds << tr("%1 into %2").arg(q(f.batchNorm).toHtmlEscaped(), q(f.into).toHtmlEscaped());
        text +=
            tr("<br>Folded before quantizing, as the int8 file runs them: %1.").arg(folds.join(QStringLiteral(", ")));
    }
    if (o.checked && !o.check.scoreName.empty()) {
        // Tasks other than classification: the task's score of each instead of accuracy (ExportCheck.h).
        const ExportCheckResult& c = o.check;
        text += tr("<br><b>Largest output difference:</b> %1 (outputs up to %2) on %3 %4 samples."
                   "<br><b>%5:</b> live model %6, exported file %7.")
                    .arg(QString::number(c.maxAbsDiff, 'g', 3), QString::number(c.maxAbsOutput, 'g', 3))
                    .arg(c.samples)
                    .arg(o.checkSplit, q(c.scoreName), QString::number(c.liveScore, 'g', 5),
                         QString::number(c.fileScore, 'g', 5));
    } else if (o.checked) {
        const ExportCheckResult& c = o.check;
        text += tr("<br><b>Largest output difference:</b> %1 (outputs up to %2) on %3 %4 samples."
                   "<br><b>Accuracy:</b> live model %5, exported file %6; same class predicted for %7 of %3.")
                    .arg(QString::number(c.maxAbsDiff, 'g', 3), QString::number(c.maxAbsOutput, 'g', 3))
                    .arg(c.samples)
                    .arg(o.checkSplit, percent(c.liveAccuracy), percent(c.fileAccuracy))
                    .arg(c.samePrediction);
    }
    if (o.checked) {
        const ExportCheckResult& c = o.check;
        QString method = q(c.method);
        if (!method.isEmpty()) method[0] = method[0].toUpper();
        m_method->setText(tr("How the file was run: %1").arg(method));
        // An ONNX graph OpenCV could not run is a limitation of this check: shown in a warning colour.
        m_method->setStyleSheet(c.fallbackReason.empty() ? QStringLiteral("QLabel { color: #555; }")
                                                         : QStringLiteral("QLabel { color: #a04000; }"));
    }
    m_result->setText(text);
    QStringList lines;
    for (const std::string& s : o.write.summary.tensors) {
        QString line = q(s);
        for (const ExportParameter& p : o.write.summary.fallbacks)
            if (s.rfind(p.name + " ", 0) == 0)
                line += tr("   (fallback from %1)").arg(q(exportPrecisionName(o.precision)));
        lines << line;
    }
    m_tensors->setPlainText(lines.join(QLatin1Char('\n')));
    showError(o.checkError);
    emit exportFinished(o.checkError.isEmpty());
}

QString ExportDialog::errorText() const { return m_error->text(); }

QString ExportDialog::sourceText() const { return m_source->text(); }

QString ExportDialog::sourceNoteText() const { return m_sourceNote->text(); }

QString ExportDialog::resultText() const { return m_result->text(); }

QString ExportDialog::tensorText() const { return m_tensors->toPlainText(); }

QString ExportDialog::methodText() const { return m_method->text(); }

}  // namespace strata::ui
