// DatasetPanel: edits the project's dataset settings (source kind and files,
// normalization, augmentation, limits) through ProjectDocument, so every
// change is undoable, and previews the data: "Load preview" loads the
// dataset on a worker thread (QtConcurrent) and shows the first training
// samples (images, table rows or texts), the class balance of each split and, for an image folder whose
// images differ in size, a histogram of the sizes.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QMap>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <functional>

#include "core/graph/Project.h"
#include "ui/SettingWidgets.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QCPTextElement;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QStackedWidget;
class QTableWidget;
class QTimer;

namespace strata::ui {

class ProjectDocument;

// What a preview shows; built entirely on the worker thread.
struct DatasetPreview {
    QString error;  // non-empty: loading failed
    QString description;
    QString sampleShape;
    qint64 trainCount = 0, validationCount = 0;
    QStringList classNames;
    QVector<qint64> trainPerClass, validationPerClass;
    // Image data: one picture per sample with its label; tabular: rows; text: decoded texts.
    QVector<QImage> images;
    QStringList labels;
    QStringList columns;
    QVector<QStringList> rows;
    QStringList texts;
    QStringList skipped;                              // image_folder: "path: reason" of each file left out
    QStringList imageSizes;                           // image_folder: "WxH: count", most frequent first
    QVector<QPair<QString, qint64>> imageSizeCounts;  // the same as ("WxH", count)
    // text: training texts per length range (tokens before the cut), ranges in quarters of max_tokens
    QVector<QPair<QString, qint64>> textLengthCounts;
};

class DatasetPanel : public QWidget {
    Q_OBJECT
public:
    explicit DatasetPanel(ProjectDocument* doc, QWidget* parent = nullptr);
    ~DatasetPanel() override;

    // The settings the widgets show (the document's settings with the edits applied).
    DatasetSettings settingsFromWidgets() const;
    // Shown after a successful preview (0 before).
    qint64 previewTrainCount() const { return m_preview.trainCount; }
    const DatasetPreview& preview() const { return m_preview; }
    bool previewRunning() const;
    // image_folder whose images differ in size: files per size (the most frequent sizes, the rest as
    // "other"); hidden otherwise.
    QCustomPlot* imageSizeChart() const { return m_sizes; }
    static constexpr int kSizeBars = 12;  // bars at most, "other" included

    // Builds a preview synchronously (the worker task; public for tests).
    static DatasetPreview buildPreview(const DatasetSettings& settings, const QString& projectPath,
                                       int maxSamples = 32);
    // The IDX files found beside a training-images file by the MNIST naming (train-images-idx3-ubyte[.gz]
    // -> train-labels-idx1-ubyte, t10k-/test-images..., t10k-/test-labels...), by setting key
    // ("train_labels", "validation_images", "validation_labels"); only files that exist.
    static QMap<QString, QString> idxCompanions(const QString& trainImages);
    // After the training images were picked: fills the empty label and validation fields with the
    // companions found (one step for a Fashion-MNIST-style folder) and commits.
    void fillIdxCompanions(const QString& trainImages);
    // The status line under "Load preview" ("Loaded.", an error, "Loading..."); empty when the settings
    // changed since it was written and no new preview is under way.
    QString previewStatusText() const;
    // Where a file picker opens: the field's own file, else the folder a picker last chose a file in
    // (remembered across sessions), else the project's folder.
    QString pickerStartPath(const QString& fieldText) const;
    // Remembers the folder of a picked file for the next picker.
    static void rememberPickedFile(const QString& absolutePath);
    // Replaces the file and folder dialogs (tests): returns the path picked, "" for none.
    using PathPicker = std::function<QString(const QString& caption, const QString& start, bool folder)>;
    void setPathPicker(PathPicker picker) { m_pathPicker = std::move(picker); }

public slots:
    void loadPreview();
    // image_folder: sets the (one) Input node's shape to dataset.image_shape, as one undoable command.
    // False, with the reason in the status line, when there is no shape or not exactly one Input node.
    bool applyImageShapeToInput();
    // Re-reads every widget from the document.
    void syncFromDocument();

signals:
    void previewReady();
    // Number of training samples of the last preview (for the LR preview's steps per epoch).
    void trainSampleCountKnown(qint64 count);

private:
    void buildUi();
    void commit();
    void showPreview(const DatasetPreview& preview);
    // Shows no preview (another project was opened: the last one's samples are not its data).
    void clearPreview();
    void showImageSizes(const DatasetPreview& preview);
    // The dataset settings changed: the last preview and its status no longer describe them; a new
    // preview loads by itself shortly after (when the panel is shown).
    void datasetEdited();
    void showEvent(QShowEvent* event) override;
    // A path editor with a browse button in *row; `registered`: the table's editor of `key` (read and
    // shown with the others), else a second one the panel keeps in step itself.
    // `folder`: the button picks a folder (image_folder's paths), else a file.
    QLineEdit* pathEdit(QWidget* parent, const char* key, QWidget** row, bool registered = true, bool folder = false);
    QString pickPath(const QString& caption, const QString& start, bool folder);

    ProjectDocument* m_doc;
    bool m_updating = false;
    SettingEditors<DatasetSettings> m_editors{datasetSettingSpecs()};

    QComboBox* m_kind = nullptr;
    QStackedWidget* m_kindPages = nullptr;
    QLineEdit *m_csvTrain = nullptr, *m_csvVal = nullptr, *m_labelColumn = nullptr;
    QLineEdit *m_textTrain = nullptr, *m_textVal = nullptr;
    QLineEdit *m_imageTrain = nullptr, *m_imageVal = nullptr;  // image_folder's view of train/validation_path
    QComboBox* m_tokenizer = nullptr;
    QSpinBox *m_maxTokens = nullptr, *m_maxVocab = nullptr;
    QSpinBox *m_synthSamples = nullptr, *m_synthClasses = nullptr;
    QLineEdit* m_synthShape = nullptr;
    QDoubleSpinBox* m_validationSplit = nullptr;
    QComboBox* m_normalization = nullptr;
    QSpinBox* m_cropPadding = nullptr;
    QCheckBox* m_flip = nullptr;
    QDoubleSpinBox* m_noise = nullptr;
    QSpinBox *m_trainLimit = nullptr, *m_valLimit = nullptr;
    QLineEdit* m_classNames = nullptr;
    QPushButton* m_previewButton = nullptr;
    QLabel* m_previewStatus = nullptr;

    QLabel* m_description = nullptr;
    QStackedWidget* m_sampleViews = nullptr;
    QListWidget* m_imageGrid = nullptr;
    QTableWidget* m_table = nullptr;
    QListWidget* m_textList = nullptr;
    QCustomPlot* m_balance = nullptr;
    QCustomPlot* m_sizes = nullptr;  // image sizes, or the text length distribution
    QCPTextElement* m_sizesTitle = nullptr;

    QFutureWatcher<DatasetPreview>* m_watcher = nullptr;
    DatasetPreview m_preview;
    DatasetSettings m_previewed;  // the settings of the preview shown (or loading)
    bool m_previewValid = false;  // m_previewed holds a preview's settings
    int m_generation = 0;         // counts clearPreview(): a preview loaded before one is dropped
    int m_loadingGeneration = 0;
    QTimer* m_autoPreview = nullptr;       // waits for typing to settle before loading a preview by itself
    QMap<QString, QLineEdit*> m_idxEdits;  // the IDX page's path fields by setting key
    PathPicker m_pathPicker;
};

}  // namespace strata::ui
