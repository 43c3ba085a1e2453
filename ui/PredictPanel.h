// PredictPanel: inference in the workbench. Loads a model (the best checkpoint
// of one of the project's runs, picked in a RunPicker and named in the header,
// or any checkpoint or export file) and the project's validation
// split; shows, for a validation sample picked by index or thumbnail or for an
// image file (PNG/PGM/PPM decoded by core, other formats by QImage, and fitted
// to the model's input by core/data/ImageFile as `strata-train predict` does),
// the predicted class and a probability bar per class; and evaluates
// the whole validation split into a colour-shaded confusion matrix with
// per-class recall and the overall accuracy. Every forward pass runs on a
// worker thread (QtConcurrent), one job at a time; the numbers come from
// core/infer/Evaluation.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <atomic>
#include <memory>
#include <vector>

#include "core/data/ImageFile.h"
#include "core/infer/Evaluation.h"
#include "core/tensor/Shape.h"

class QLabel;
class QLineEdit;
class QListWidget;
class QTimer;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;

namespace strata {
struct ExportModel;
}

namespace strata::ui {

class ProjectDocument;
class RunPicker;
class SaliencyView;
struct PredictSession;

class PredictPanel : public QWidget {
    Q_OBJECT
public:
    explicit PredictPanel(ProjectDocument* doc, QWidget* parent = nullptr);
    ~PredictPanel() override;

    // Raw model-input values (0..255 per channel, [C, H, W] planes) of an image for a model input of
    // `inputShape` ([C, H, W] or [H, W], C = 1 or 3), resized to fit. Empty with `error` set otherwise.
    static std::vector<float> imageToRawInput(const QImage& image, const Shape& inputShape, QString* error,
                                              data::ResizePolicy policy = data::ResizePolicy::Stretch);
    // Reads PNG, JPEG, BMP, PGM and PPM as `strata-train predict` does (core/data/ImageFile.h) and anything else
    // through QImage, then fits the image to the model as imageToRawInput.
    static std::vector<float> readImageFile(const QString& path, const Shape& inputShape, QString* error,
                                            data::ResizePolicy policy = data::ResizePolicy::Stretch);

    bool isBusy() const;
    bool hasModel() const;
    QString modelSource() const;  // the file the loaded model came from
    // The project's run the loaded model came from ("run 12, 2026-12-04 13:05, 3 epochs, ..."); empty when none
    // is loaded or it came from a file the user opened.
    QString modelRunText() const;
    RunPicker* runPicker() const { return m_runPicker; }
    QPushButton* loadRunButton() const { return m_loadProject; }
    int classCount() const;
    qint64 validationCount() const;
    QStringList classNames() const;

    // Last prediction: probabilities per class (sum 1), the argmax, and a one-line description.
    QVector<double> probabilities() const { return m_probabilities; }
    int predictedClass() const { return m_predicted; }
    QString predictionText() const;
    // The line that names the loaded model ("best.safetensors (Fashion MLP): input [784], 10 classes").
    QString sourceText() const;
    // Last confusion matrix (classes == 0 before one is computed).
    const ConfusionMatrix& confusion() const { return m_confusion; }
    QString accuracyText() const;
    QString errorText() const;
    QTableWidget* confusionTable() const { return m_confusionTable; }
    // The samples of the confusion cell clicked last (validation indices, in order), and its title line.
    QVector<qint64> cellSampleIndices() const { return m_cellIndices; }
    QString cellTitleText() const;
    QTableWidget* probabilityTable() const { return m_probTable; }
    QTabWidget* tabs() const { return m_tabs; }
    // Text models: the field whose text is classified as it is typed, and the tokens of the last text or
    // sample predicted (unknown words marked, words beyond max_tokens shown as cut).
    QLineEdit* textEdit() const { return m_text; }
    QString tokensText() const;
    // Attention models: the last prediction's tokens shaded by the attention they received (rich text), empty
    // when hidden (no attention layer, or no prediction yet).
    QString attentionText() const;
    // Grad-CAM over the sample picture (image models) and token saliency beside the attention strip (text).
    SaliencyView* saliencyView() const { return m_saliency; }

    // What the last prediction ran on, for a view that runs the loaded model itself (the Feature maps dock): the
    // loaded model and the split it predicts from (shared, so a worker thread may read them while this panel loads
    // another), and the last predicted sample's model input (normalized) with its description. A null model when
    // none is loaded; an empty input before the model's first prediction. Changes: modelLoaded, predictionReady.
    struct CurrentSample {
        std::shared_ptr<const ExportModel> model;
        std::shared_ptr<const DataSplit> samples;  // empty (count 0) when the data set could not be loaded
        std::vector<float> input;
        QString text;  // "validation sample 3, true class: Bag", "image cat.png"
    };
    CurrentSample currentSample() const;

public slots:
    // Loads a model file, or with an empty path the picked run's best checkpoint, plus the validation split.
    void loadModel(const QString& path = {});
    // Predicts validation sample `index` (0-based).
    void selectSample(int index);
    void predictImageFile(const QString& path);
    // Text models: tokenizes the text as training did (the model's tokenizer and vocabulary) and predicts it.
    void predictText(const QString& text);
    void runConfusionMatrix();
    // Lists the samples of one confusion cell (true class row, predicted class column) with thumbnails.
    void showCellSamples(int trueClass, int predictedClass);
    // After a training run: reloads when the model came from the project's runs.
    void projectTrained();

signals:
    void modelLoaded(bool ok);
    void predictionReady();
    void confusionReady();
    void failed(const QString& message);

private:
    void clearResults();
    static std::vector<float> fitToInput(const data::Image& image, const Shape& inputShape, QString* error,
                                         data::ResizePolicy policy);
    struct JobResult;
    void showEvent(QShowEvent* event) override;
    void buildUi();
    // Another project: the model and every view of it go.
    void projectChanged();
    // The header without a model: which run "Load run" loads, or why there is none.
    void showNoModel();
    void start(std::function<JobResult()> job);
    void finishJob();
    void showError(const QString& text);
    void setBusy(bool busy);
    // Whether `index` is a sample of the loaded split; if not, the line under the picker says why.
    bool checkIndex(int index);
    void showModel();
    void showPrediction(const Predictions& p, const QImage& input, const QString& truth, const QString& tokens);
    bool isTextModel() const;
    void showConfusion(const ConfusionMatrix& m);
    QImage sampleImage(int index) const;

    ProjectDocument* m_doc;
    std::shared_ptr<PredictSession> m_session;
    bool m_fromProject = false;
    QString m_loadingRun;      // the label of the run being loaded
    quint64 m_generation = 0;  // bumped by another project: a job of the previous one is dropped when it ends
    quint64 m_jobGeneration = 0;
    bool m_loadWhenShown = false;  // a run kept weights while the dock was hidden and had no model
    int m_pendingIndex = -1;
    bool m_textPending = false;  // the typed text changed while a job ran
    std::shared_ptr<std::atomic<bool>> m_cancel;

    QLabel* m_source = nullptr;
    RunPicker* m_runPicker = nullptr;
    QPushButton* m_loadProject = nullptr;
    QPushButton* m_openModel = nullptr;
    QTabWidget* m_tabs = nullptr;
    QSpinBox* m_index = nullptr;
    QPushButton* m_openImage = nullptr;
    QListWidget* m_thumbs = nullptr;
    QLabel* m_inputView = nullptr;
    QLineEdit* m_text = nullptr;
    QTimer* m_textTimer = nullptr;
    QLabel* m_tokens = nullptr;
    QLabel* m_attention = nullptr;
    SaliencyView* m_saliency = nullptr;
    QLabel* m_predictedLabel = nullptr;
    QTableWidget* m_probTable = nullptr;
    QPushButton* m_confusionButton = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_accuracy = nullptr;
    QTableWidget* m_confusionTable = nullptr;
    QLabel* m_cellTitle = nullptr;
    QListWidget* m_cellSamples = nullptr;
    QVector<qint64> m_cellIndices;
    std::vector<int32_t> m_confusionPredicted;  // per validation sample, from the last confusion run
    QLabel* m_error = nullptr;
    QLabel* m_status = nullptr;

    QVector<double> m_probabilities;
    int m_predicted = -1;
    QString m_predictionText;
    ConfusionMatrix m_confusion;
    QFutureWatcher<void>* m_watcher = nullptr;
    std::shared_ptr<JobResult> m_result;
    std::vector<float> m_lastInput;  // the last predicted sample's model input (currentSample)
    QString m_lastInputText;
};

}  // namespace strata::ui
