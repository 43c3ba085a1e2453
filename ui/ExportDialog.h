// ExportDialog: File > Export Model. Writes the best (else latest) checkpoint
// of one of the project's runs (the newest with weights unless another is
// picked: RunPicker; the note under it names the run), or a checkpoint file
// or folder picked by the user, as ONNX,
// GGUF or safetensors, then checks the written file (core/infer/ExportCheck):
// loads it back, runs it and the live model on validation samples on the CPU
// and shows the file size, the tensors as stored (and which fell back from
// Q8_0 or Q4_0 to F16), the largest output difference, both accuracies and what was
// run. All of it happens on a worker thread (QtConcurrent); errors are shown
// in the dialog, naming the file.
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QString>

#include "core/infer/ExportCheck.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace strata::ui {

class ProjectDocument;
class RunPicker;

// One export as the worker runs it.
struct ExportJob {
    QString source;  // checkpoint file or folder, or one of our export files
    QString output;
    QString projectPath;  // resolves the dataset's relative paths
    ExportRequest request;
    int samples = 256;  // validation samples the check runs
};

struct ExportOutcome {
    QString error;       // non-empty: nothing was written (bad source, unwritable path, ...)
    QString checkError;  // non-empty: the file was written but could not be checked
    QString sourceFile;  // the checkpoint file the source resolved to
    ExportPrecision precision = ExportPrecision::F32;
    ExportWriteResult write;
    bool checked = false;
    ExportCheckResult check;
    QString checkSplit;  // "validation" or "training" (a data set without a validation split)
};

class ExportDialog : public QDialog {
    Q_OBJECT
public:
    explicit ExportDialog(ProjectDocument* doc, QWidget* parent = nullptr);
    ~ExportDialog() override;

    // The checkpoint file of the project's newest run with weights (ProjectRuns.h); empty with `error` set
    // when no run of the project kept any.
    static QString projectCheckpoint(const ProjectDocument* doc, QString* error);
    // The worker task (public for tests): never throws.
    static ExportOutcome runExport(const ExportJob& job);

    // The picked run's checkpoint as the source (newest: the project's newest run with weights, the runs listed
    // again); also when the dialog is shown.
    void useProjectCheckpoint(bool newest = true);
    RunPicker* runPicker() const { return m_runPicker; }
    // The run the source is ("run 12, 2026-12-04 13:05, 3 epochs, ..."); empty when the source is another file.
    QString sourceRunText() const;
    QString sourceText() const;
    QString sourceNoteText() const;
    void setSource(const QString& path);
    void setFormat(ExportFormat format);
    void setPrecision(ExportPrecision precision);
    void setOutputPath(const QString& path);
    QString outputPath() const;
    QString defaultOutputPath() const;
    // `path` named for `precision`: "model.onnx" -> "model-int8.onnx", "model-int8.onnx" -> "model.onnx" for
    // F32. A quantized file always carries its precision in its name, so it never replaces the float file.
    static QString outputPathFor(const QString& path, ExportPrecision precision);
    ExportFormat format() const;
    ExportPrecision precision() const;

    bool isBusy() const;
    const ExportOutcome& outcome() const { return m_outcome; }
    QString errorText() const;
    QString resultText() const;
    QString tensorText() const;
    QString methodText() const;
    QComboBox* formatCombo() const { return m_format; }
    QComboBox* precisionCombo() const { return m_precision; }
    QSpinBox* opsetSpin() const { return m_opset; }
    QPushButton* exportButton() const { return m_export; }

public slots:
    // Starts the export on the worker thread; refused while one runs.
    void startExport();

signals:
    void exportFinished(bool ok);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void buildUi();
    void updateOptions();
    // Another project was opened (or saved as a copy): its runs, its name, no result of the previous one.
    void projectChanged();
    // An edit: the last attempt's error goes, and the numbers are checked again.
    void fieldsEdited();
    // Whether the opset (for ONNX) and the sample count are in range; if not, the line under each says why.
    bool checkFields();
    void showOutcome(const ExportOutcome& outcome);
    void showError(const QString& text);
    void setBusy(bool busy);

    ProjectDocument* m_doc;
    RunPicker* m_runPicker = nullptr;
    QLineEdit* m_source = nullptr;
    QLabel* m_sourceNote = nullptr;
    QComboBox* m_format = nullptr;
    QSpinBox* m_opset = nullptr;
    QComboBox* m_precision = nullptr;
    QLineEdit* m_output = nullptr;
    QSpinBox* m_samples = nullptr;
    QPushButton* m_export = nullptr;
    QProgressBar* m_busy = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_result = nullptr;
    QLabel* m_method = nullptr;
    QPlainTextEdit* m_tensors = nullptr;
    bool m_outputEdited = false;
    bool m_sourceFromProject = false;                  // the source is the project's checkpoint: refreshed on show
    qint64 m_sourceRun = -1;                           // which run of the project it is (0: its checkpoint folder)
    quint64 m_generation = 0, m_exportGeneration = 0;  // another project bumps m_generation
    ExportOutcome m_outcome;
    QFutureWatcher<ExportOutcome>* m_watcher = nullptr;
};

}  // namespace strata::ui
