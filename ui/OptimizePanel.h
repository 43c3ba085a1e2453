// OptimizePanel: model compression after a training run. The user picks targets (magnitude pruning to one or
// more sparsities, structured pruning of a fraction of filters and units, int8 ONNX) and presses Optimize;
// OptimizeWorker runs the study (core/infer/Compression) on its own engine thread with a progress bar, and
// each variant appears as it is measured: a table (accuracy and its change, non-zero parameters, the ONNX
// file as written and compressed, forward time at batch 1 and 256 and the speed-up over the original), two
// QCustomPlot charts of accuracy against compressed size and against batch-256 time, and the layer-by-layer
// sparsity of the selected variant. The study starts from one of the project's runs (RunPicker: the newest with
// weights unless another is picked) and writes its variants into that run's folder, <run folder>/optimized.
// The selected variant can be exported (the Export dialog, its checkpoint
// as source; int8 preset for an int8 variant) or opened as a project (pruned variants).
#pragma once

#include <QString>
#include <QThread>
#include <QVector>
#include <QWidget>

#include "core/infer/Compression.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace strata::ui {

class OptimizeWorker;
class ProjectDocument;
class RunPicker;

class OptimizePanel : public QWidget {
    Q_OBJECT
public:
    explicit OptimizePanel(ProjectDocument* doc, QWidget* parent = nullptr);
    ~OptimizePanel() override;

    // The fields' limits; a number outside them is refused with the reason under its field (checkFields).
    static constexpr int kMinStructuredPercent = 5, kMaxStructuredPercent = 95;
    static constexpr int kMaxFineTuneEpochs = 1000;
    static constexpr int kMaxMeasureSamples = 100000000;
    // Shows under each field why its content is not applied (cleared when it is); true when all are.
    bool checkFields() const;
    // The request the controls describe for the picked run's best checkpoint; false with `error` set when no
    // run of the project has weights or a field is refused (checkFields).
    bool buildRequest(CompressionRequest* request, QString* error) const;
    // Parses "50, 80 90%" into fractions; false on anything else.
    static bool parseSparsities(const QString& text, std::vector<double>* out);

    bool isBusy() const;
    const QVector<CompressionVariant>& variants() const { return m_variants; }
    QTableWidget* resultTable() const { return m_table; }
    QTableWidget* layerTable() const { return m_layers; }
    QCustomPlot* sizeChart() const { return m_sizePlot; }
    QCustomPlot* timeChart() const { return m_timePlot; }
    QString statusText() const;
    QString errorText() const;

    // Controls (tests and screenshots set them as a user would).
    QLineEdit* sparsityEdit() const { return m_sparsities; }
    QCheckBox* sparseCheck() const { return m_sparse; }
    QCheckBox* structuredCheck() const { return m_structured; }
    QSpinBox* structuredSpin() const { return m_structuredPercent; }
    QCheckBox* int8Check() const { return m_int8; }
    QSpinBox* epochsSpin() const { return m_epochs; }
    QSpinBox* samplesSpin() const { return m_samples; }
    QPushButton* exportButton() const { return m_export; }
    QPushButton* openButton() const { return m_open; }
    // Where the variants go: <the picked run's folder>/optimized (setOutputFolder: elsewhere); empty when no run.
    QString outputFolder() const;
    RunPicker* runPicker() const { return m_runPicker; }
    // The run the study starts from ("run 12, 2026-12-04 13:05, 3 epochs, ..."); empty when none.
    QString sourceRunText() const;
    void setOutputFolder(const QString& folder) { m_outputOverride = folder; }
    void setThreads(int threads) { m_threads = threads; }
    void selectVariant(int row);

public slots:
    void optimize();
    void stop();

signals:
    void optimizeFinished(bool ok);
    // The selected variant's checkpoint (Int8: the float checkpoint it was quantized from) for the Export dialog.
    void exportRequested(const QString& checkpoint, bool int8);
    void openProjectRequested(const QString& projectFile);

private:
    void buildUi();
    void setBusy(bool busy);
    void addVariant(const CompressionVariant& v);
    void redrawCharts();
    void showLayers(int row);
    void updateButtons();
    void showError(const QString& text);
    // The status line before a study: which run it starts from and where the variants go.
    void showReadyText();
    // Another project: the study stops, and none of the previous project's results stay.
    void projectChanged();

    ProjectDocument* m_doc;
    RunPicker* m_runPicker = nullptr;
    quint64 m_generation = 0, m_studyGeneration = 0;
    QThread* m_thread = nullptr;
    OptimizeWorker* m_worker = nullptr;
    QVector<CompressionVariant> m_variants;
    QString m_outputOverride;
    int m_threads = 0;

    QCheckBox* m_sparse = nullptr;
    QLineEdit* m_sparsities = nullptr;
    QComboBox* m_scope = nullptr;
    QCheckBox* m_structured = nullptr;
    QSpinBox* m_structuredPercent = nullptr;
    QCheckBox* m_int8 = nullptr;
    QSpinBox* m_epochs = nullptr;
    QSpinBox* m_samples = nullptr;
    QPushButton* m_run = nullptr;
    QPushButton* m_stop = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_error = nullptr;
    QTableWidget* m_table = nullptr;
    QTableWidget* m_layers = nullptr;
    QLabel* m_note = nullptr;
    QCustomPlot* m_sizePlot = nullptr;
    QCustomPlot* m_timePlot = nullptr;
    QPushButton* m_export = nullptr;
    QPushButton* m_open = nullptr;
    QPlainTextEdit* m_log = nullptr;
};

}  // namespace strata::ui
