// PredictPanel: model and data loading, per-sample prediction and the confusion matrix, each on a worker thread.
#include "ui/PredictPanel.h"

#include <QColor>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPixmap>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <exception>

#include <QtConcurrent/QtConcurrentRun>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/data/ImageFile.h"
#include "core/data/TextEncoder.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/Int8Engine.h"
#include "core/infer/Predict.h"
#include "ui/ExportDialog.h"
#include "ui/FieldError.h"
#include "ui/RawImage.h"
#include "ui/RunPicker.h"
#include "ui/SaliencyView.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

constexpr int kThumbnails = 120;
constexpr int kThumbSize = 42;

QString q(const std::string& s) { return QString::fromStdString(s); }

// Tokens as rich text: unknown words (id 1) in red, words past max_tokens grey and struck out.
QString tokenLine(const std::vector<std::string>& words, const std::vector<bool>& unknown, size_t kept) {
    QString html;
    for (size_t i = 0; i < words.size(); ++i) {
        const QString w = q(words[i]).toHtmlEscaped();
        if (i >= kept)
            html += QStringLiteral("<span style='color:#999'><s>%1</s></span> ").arg(w);
        else if (unknown[i])
            html += QStringLiteral("<span style='color:#b00020; font-weight:bold'>%1</span> ").arg(w);
        else
            html += w + QLatin1Char(' ');
    }
    return html.trimmed();
}

// The words of a model input (ids), read back through the vocabulary; padding (0) ends the sample.
std::vector<std::string> sampleWords(const float* ids, int64_t n, const std::vector<std::string>& vocab) {
    std::vector<std::string> words;
    for (int64_t i = 0; i < n && ids[i] != 0.0f; ++i) {
        const auto id = static_cast<size_t>(ids[i]);
        words.push_back(id < vocab.size() ? vocab[id] : "?");
    }
    return words;
}

// Those words as a token line, unknown ones (id 1) marked.
QString sampleTokens(const float* ids, const std::vector<std::string>& words) {
    std::vector<bool> unknown(words.size());
    for (size_t i = 0; i < words.size(); ++i) unknown[i] = ids[i] == 1.0f;
    return tokenLine(words, unknown, words.size());
}

// The tokens an attention model saw, each shaded by the attention it received in the last attention layer
// (averaged over heads and real queries; the darkest: the most), then the three it attended to most. Empty for
// a model without attention. ids: the sample's input (token ids); words[i] is position i's token.
QString attentionStrip(const Model& model, const float* ids, const std::vector<std::string>& words, size_t kept) {
    const TokenAttention a = lastTokenAttention(model, 0, ids);
    if (a.layerName.empty() || !a.positionsAreTokens) return {};  // a Conv1D before it changed the length
    const size_t n = std::min({kept, words.size(), a.weights.size()});
    if (n == 0) return {};
    const float top = *std::max_element(a.weights.begin(), a.weights.begin() + std::ptrdiff_t(n));
    const QString layer = q(a.layerName).toHtmlEscaped();
    QString html = a.heads == 1 ? PredictPanel::tr("<b>Attention</b> (%1, one head): ").arg(layer)
                                : PredictPanel::tr("<b>Attention</b> (%1, mean of %2 heads): ").arg(layer).arg(a.heads);
    for (size_t i = 0; i < n; ++i) {
        const double level = top > 0 ? double(a.weights[i]) / double(top) : 0.0;
        html += QStringLiteral("<span style='background-color:rgba(230,110,0,%1)'>%2</span> ")
                    .arg(0.08 + 0.8 * level, 0, 'f', 2)
                    .arg(q(words[i]).toHtmlEscaped());
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return a.weights[x] > a.weights[y]; });
    QStringList most;
    for (size_t i = 0; i < std::min<size_t>(3, n); ++i)
        most << QStringLiteral("%1 %2%")
                    .arg(q(words[order[i]]).toHtmlEscaped())
                    .arg(100.0 * a.weights[order[i]], 0, 'f', 0);
    return html.trimmed() + QStringLiteral("<br><span style='font-size:small'>") +
           PredictPanel::tr("most: %1").arg(most.join(QStringLiteral(", "))) + QStringLiteral("</span>");
}

}  // namespace

// The loaded model and data; used by one worker job at a time.
struct PredictSession {
    QString source;
    QString runLabel;  // the project's run it came from ("run 12, ..."); empty: a file the user opened
    ExportModel model;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> compiled;
    Shape inputShape;
    int classes = 0;
    QStringList classNames;
    DataSplit samples;  // the validation split (the training split when there is none)
    QString splitName;
    Normalization dataNormalization;
    QString dataError;  // non-empty: no samples (the model still predicts image files)
    QVector<QImage> thumbnails;
    // An int8 ONNX file runs on Strata's int8 engine where it can; `runtime` says what runs it (and why not the
    // engine), empty for float models.
    std::unique_ptr<Int8Engine> int8;
    QString runtime;
};

namespace {

// `count` normalized samples through the session's model: the int8 engine for an int8 file it runs, else the
// compiled float32 model.
Predictions predictOn(PredictSession& s, const float* inputs, int64_t count) {
    if (!s.int8) return predictSamples(*s.compiled, inputs, count);
    return predictionsFromOutputs(s.int8->run(inputs, count), count, s.classes,
                                  graphEndsInSoftmax(s.model.project.graph));
}

}  // namespace

struct PredictPanel::JobResult {
    enum Kind { Load, Predict, Confusion } kind = Load;
    std::shared_ptr<PredictSession> session;
    Predictions predictions;
    QImage input;
    QString truth;
    QString tokens;                  // text models: the tokens predicted, as rich text
    QString attention;               // attention models: the tokens shaded by the attention they received
    std::vector<float> sampleInput;  // the model input predicted (normalized; token ids), for saliency
    std::vector<std::string> words;  // text: the token at each input position
    ConfusionMatrix confusion;
    std::vector<int32_t> predicted;  // Confusion: each sample's predicted class
    QString error;
    bool cancelled = false;
};

PredictPanel::PredictPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    setObjectName(QStringLiteral("predictPanel"));
    m_watcher = new QFutureWatcher<void>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, &PredictPanel::finishJob);
    buildUi();
    setBusy(false);
    connect(m_doc, &ProjectDocument::identityChanged, this, &PredictPanel::projectChanged);
    showNoModel();
}

PredictPanel::~PredictPanel() {
    if (m_cancel) *m_cancel = true;
    m_watcher->waitForFinished();
}

void PredictPanel::buildUi() {
    auto* layout = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    m_source = new QLabel(tr("No model loaded."), this);
    m_source->setObjectName(QStringLiteral("predictSource"));
    m_source->setWordWrap(true);
    // Which of the project's runs "Load run" loads (the newest with weights unless another is picked).
    m_runPicker = new RunPicker(m_doc, false, this);
    m_runPicker->setObjectName(QStringLiteral("predictRunPicker"));
    m_runPicker->setMinimumContentsLength(44);  // the run's date, epochs and accuracy stay readable
    m_loadProject = new QPushButton(tr("Load run"), this);
    m_loadProject->setObjectName(QStringLiteral("predictLoadRun"));
    m_loadProject->setToolTip(tr("Load the best (else latest) checkpoint of the run picked beside it"));
    m_openModel = new QPushButton(tr("Open model file..."), this);
    m_openModel->setToolTip(tr("A checkpoint, or a .safetensors, .gguf or .onnx export written by Strata"));
    top->addWidget(m_source, 1);
    top->addWidget(m_runPicker);
    top->addWidget(m_loadProject);
    top->addWidget(m_openModel);
    layout->addLayout(top);
    connect(m_loadProject, &QPushButton::clicked, this, [this] { loadModel(); });
    connect(m_runPicker, &RunPicker::runChosen, this, [this] {
        if (!m_session && !isBusy()) showNoModel();
    });
    connect(m_openModel, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Model file"), QString(),
                                                       tr("Models (*.safetensors *.gguf *.onnx);;All files (*)"));
        if (!f.isEmpty()) loadModel(f);
    });

    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("predictError"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #b00020; background: #fdecee; padding: 4px; }"));
    m_error->hide();
    layout->addWidget(m_error);

    m_tabs = new QTabWidget(this);
    layout->addWidget(m_tabs, 1);

    // --- Prediction tab: sample picker | input picture | predicted class and probabilities.
    auto* predictTab = new QWidget(m_tabs);
    auto* pl = new QHBoxLayout(predictTab);
    auto* pick = new QVBoxLayout;
    auto* indexRow = new QHBoxLayout;
    indexRow->addWidget(new QLabel(tr("Sample:"), predictTab));
    m_index = new QSpinBox(predictTab);
    m_index->setObjectName(QStringLiteral("predictIndex"));
    // Any number typed stays; one beyond the samples is refused with the reason under the box.
    acceptAnyNumber(m_index);
    m_index->setValue(0);
    m_index->setToolTip(tr("The validation sample to predict"));
    indexRow->addWidget(withFieldError(m_index), 1);
    m_openImage = new QPushButton(tr("Open image..."), predictTab);
    m_openImage->setToolTip(tr("PGM, PPM, PNG or JPEG; converted to the model's input size and channels"));
    indexRow->addWidget(m_openImage);
    pick->addLayout(indexRow);
    m_text = new QLineEdit(predictTab);
    m_text->setObjectName(QStringLiteral("predictText"));
    m_text->setPlaceholderText(tr("Type a text to classify"));
    m_text->setClearButtonEnabled(true);
    m_text->setToolTip(tr("Tokenized as in training; the probabilities follow as you type"));
    m_text->hide();
    pick->addWidget(m_text);
    m_tokens = new QLabel(predictTab);
    m_tokens->setObjectName(QStringLiteral("predictTokens"));
    m_tokens->setWordWrap(true);
    m_tokens->setTextFormat(Qt::RichText);
    m_tokens->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_tokens->setToolTip(tr("The tokens the model saw: unknown words in red, words past max_tokens struck out"));
    m_tokens->hide();
    pick->addWidget(m_tokens);
    m_attention = new QLabel(predictTab);
    m_attention->setObjectName(QStringLiteral("predictAttention"));
    m_attention->setWordWrap(true);
    m_attention->setTextFormat(Qt::RichText);
    m_attention->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_attention->setToolTip(
        tr("Attention models: each token shaded by the attention it received in the last "
           "attention layer, averaged over the heads and over the real tokens as queries"));
    m_attention->hide();
    pick->addWidget(m_attention);
    m_saliency = new SaliencyView(predictTab);
    pick->addWidget(m_saliency->tokenStrip());
    m_textTimer = new QTimer(this);
    m_textTimer->setSingleShot(true);
    m_textTimer->setInterval(120);  // a pause in typing, not every key, starts a prediction
    connect(m_text, &QLineEdit::textChanged, m_textTimer, qOverload<>(&QTimer::start));
    connect(m_textTimer, &QTimer::timeout, this, [this] { predictText(m_text->text()); });
    m_thumbs = new QListWidget(predictTab);
    m_thumbs->setViewMode(QListView::IconMode);
    m_thumbs->setIconSize(QSize(kThumbSize, kThumbSize));
    m_thumbs->setGridSize(QSize(kThumbSize + 8, kThumbSize + 8));
    m_thumbs->setResizeMode(QListView::Adjust);
    m_thumbs->setMovement(QListView::Static);
    m_thumbs->setMinimumWidth(3 * (kThumbSize + 8) + 24);
    pick->addWidget(m_thumbs, 1);
    // Takes the height the thumbnails leave when they are hidden (text models), so the text, tokens and
    // attention lines stay together at the top; with thumbnails shown it gets nothing (stretch 0 against 1).
    pick->addStretch(0);
    pl->addLayout(pick, 2);
    connect(m_index, &QSpinBox::valueChanged, this, [this](int v) {
        if (!checkIndex(v)) return;
        if (m_thumbs->currentRow() != v) m_thumbs->setCurrentRow(v < m_thumbs->count() ? v : -1);
        selectSample(v);
    });
    connect(m_thumbs, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row >= 0 && row != m_index->value()) m_index->setValue(row);
    });
    connect(m_openImage, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Image"), QString(),
                                                       tr("Images (*.png *.jpg *.jpeg *.pgm *.ppm *.pnm *.bmp);;"
                                                          "All files (*)"));
        if (!f.isEmpty()) predictImageFile(f);
    });

    auto* middle = new QVBoxLayout;
    m_inputView = new QLabel(predictTab);
    m_inputView->setFixedSize(140, 140);
    m_inputView->setAlignment(Qt::AlignCenter);
    m_inputView->setStyleSheet(QStringLiteral("QLabel { background: #202020; border: 1px solid #888; }"));
    middle->addWidget(m_inputView);
    middle->addWidget(m_saliency);
    m_saliency->setFixedWidth(m_inputView->width() + 40);
    m_saliency->setDisplaySize(m_inputView->size() - QSize(4, 4));
    connect(m_saliency, &SaliencyView::pictureChanged, this,
            [this](const QImage& picture) { m_inputView->setPixmap(QPixmap::fromImage(picture)); });
    middle->addStretch(1);
    pl->addLayout(middle);

    auto* right = new QVBoxLayout;
    m_predictedLabel = new QLabel(predictTab);
    m_predictedLabel->setObjectName(QStringLiteral("predictedClass"));
    m_predictedLabel->setWordWrap(true);
    QFont big = m_predictedLabel->font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    big.setBold(true);
    m_predictedLabel->setFont(big);
    right->addWidget(m_predictedLabel);
    m_probTable = new QTableWidget(0, 2, predictTab);
    m_probTable->setObjectName(QStringLiteral("probabilityTable"));
    m_probTable->setHorizontalHeaderLabels({tr("Class"), tr("Probability")});
    m_probTable->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_probTable->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    m_probTable->verticalHeader()->hide();
    m_probTable->verticalHeader()->setDefaultSectionSize(22);
    m_probTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_probTable->setSelectionMode(QAbstractItemView::NoSelection);
    right->addWidget(m_probTable, 1);
    pl->addLayout(right, 3);
    m_tabs->addTab(predictTab, tr("Prediction"));

    // --- Confusion matrix tab.
    auto* cmTab = new QWidget(m_tabs);
    auto* cl = new QVBoxLayout(cmTab);
    auto* cmRow = new QHBoxLayout;
    m_confusionButton = new QPushButton(tr("Confusion matrix"), cmTab);
    m_confusionButton->setObjectName(QStringLiteral("confusionButton"));
    m_confusionButton->setToolTip(tr("Evaluate the whole validation split"));
    m_progress = new QProgressBar(cmTab);
    m_progress->setRange(0, 100);
    m_progress->setValue(0);
    m_accuracy = new QLabel(cmTab);
    m_accuracy->setObjectName(QStringLiteral("confusionAccuracy"));
    cmRow->addWidget(m_confusionButton);
    cmRow->addWidget(m_progress, 1);
    cmRow->addWidget(m_accuracy, 2);
    cl->addLayout(cmRow);
    m_confusionTable = new QTableWidget(cmTab);
    m_confusionTable->setObjectName(QStringLiteral("confusionTable"));
    m_confusionTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_confusionTable->horizontalHeader()->setDefaultSectionSize(52);
    m_confusionTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_confusionTable->verticalHeader()->setDefaultSectionSize(22);
    auto* cmSplit = new QSplitter(Qt::Horizontal, cmTab);
    cmSplit->addWidget(m_confusionTable);
    // A cell's samples: what the model mistook for what, one click away.
    auto* cellBox = new QWidget(cmSplit);
    auto* cellLayout = new QVBoxLayout(cellBox);
    cellLayout->setContentsMargins(0, 0, 0, 0);
    m_cellTitle = new QLabel(tr("Click a cell to list its samples."), cellBox);
    m_cellTitle->setObjectName(QStringLiteral("confusionCellTitle"));
    m_cellTitle->setWordWrap(true);
    cellLayout->addWidget(m_cellTitle);
    m_cellSamples = new QListWidget(cellBox);
    m_cellSamples->setObjectName(QStringLiteral("confusionCellSamples"));
    m_cellSamples->setViewMode(QListView::IconMode);
    m_cellSamples->setIconSize(QSize(kThumbSize, kThumbSize));
    m_cellSamples->setResizeMode(QListView::Adjust);
    m_cellSamples->setMovement(QListView::Static);
    m_cellSamples->setToolTip(tr("Double-click a sample to predict it in the Prediction tab"));
    cellLayout->addWidget(m_cellSamples, 1);
    cmSplit->addWidget(cellBox);
    cmSplit->setStretchFactor(0, 3);
    cmSplit->setStretchFactor(1, 2);
    cl->addWidget(cmSplit, 1);
    connect(m_confusionTable, &QTableWidget::cellClicked, this, &PredictPanel::showCellSamples);
    connect(m_cellSamples, &QListWidget::itemDoubleClicked, this, [this](QListWidgetItem* item) {
        m_tabs->setCurrentIndex(0);
        selectSample(item->data(Qt::UserRole).toInt());
    });
    auto* legend =
        new QLabel(tr("Rows: true class; columns: predicted class. Shading: share of the row (green: correct, red: "
                      "confused). Click a cell for its samples."),
                   cmTab);
    legend->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
    cl->addWidget(legend);
    m_tabs->addTab(cmTab, tr("Confusion matrix"));
    connect(m_confusionButton, &QPushButton::clicked, this, &PredictPanel::runConfusionMatrix);

    m_status = new QLabel(this);
    m_status->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
    layout->addWidget(m_status);
}

bool PredictPanel::isBusy() const { return m_watcher->isRunning(); }

bool PredictPanel::hasModel() const { return m_session != nullptr; }

QString PredictPanel::modelSource() const { return m_session ? m_session->source : QString(); }

int PredictPanel::classCount() const { return m_session ? m_session->classes : 0; }

qint64 PredictPanel::validationCount() const { return m_session ? m_session->samples.count : 0; }

QStringList PredictPanel::classNames() const { return m_session ? m_session->classNames : QStringList(); }

QString PredictPanel::predictionText() const { return m_predictionText; }

QString PredictPanel::sourceText() const { return m_source->text(); }

QString PredictPanel::cellTitleText() const { return m_cellTitle->text(); }

QString PredictPanel::accuracyText() const { return m_accuracy->text(); }

QString PredictPanel::errorText() const { return m_error->text(); }

void PredictPanel::showError(const QString& text) {
    m_error->setText(text);
    m_error->setVisible(!text.isEmpty());
    if (!text.isEmpty()) emit failed(text);
}

bool PredictPanel::checkIndex(int index) {
    const int64_t count = m_session ? m_session->samples.count : 0;
    const bool ok = index >= 0 && index < count;
    setFieldError(
        m_index, ok || count == 0
                     ? QString()
                     : notAppliedText(QString::number(index),
                                      tr("0 to %1 (the %2 split's samples)").arg(count - 1).arg(m_session->splitName)));
    return ok;
}

void PredictPanel::setBusy(bool busy) {
    const bool ready = !busy && m_session;
    m_loadProject->setEnabled(!busy);
    m_openModel->setEnabled(!busy);
    m_openImage->setEnabled(ready);
    m_confusionButton->setEnabled(ready && m_session->samples.count > 0);
    m_index->setEnabled(m_session && m_session->samples.count > 0);
}

void PredictPanel::start(std::function<JobResult()> job) {
    auto result = std::make_shared<JobResult>();
    m_result = result;
    m_jobGeneration = m_generation;
    setBusy(true);
    m_watcher->setFuture(QtConcurrent::run([job = std::move(job), result] {
        try {
            *result = job();
        } catch (const EvaluationCancelled&) {
            result->cancelled = true;
        } catch (const std::exception& e) {
            result->error = q(e.what());
        }
    }));
}

void PredictPanel::loadModel(const QString& path) {
    if (isBusy()) return;
    showError({});
    QString source = path;
    m_fromProject = path.isEmpty();
    m_loadingRun.clear();
    if (m_fromProject) {
        const std::optional<ProjectRun> run = m_runPicker->chosen();
        if (!run) {
            showError(m_runPicker->whyNone());
            emit modelLoaded(false);
            return;
        }
        source = run->checkpoint;
        m_loadingRun = run->id == 0 ? tr("the project's checkpoint folder") : run->label();
    }
    const QString projectPath = m_doc->filePath();
    m_status->setText(tr("Loading %1...").arg(QFileInfo(source).fileName()));
    start([source, projectPath, runLabel = m_loadingRun] {
        JobResult r;
        r.kind = JobResult::Load;
        auto s = std::make_shared<PredictSession>();
        s->runLabel = runLabel;
        std::string file = source.toStdString();
        try {
            if (QFileInfo(source).isDir()) file = resolveCheckpointPath(file);
            s->model = loadModelFile(file);
        } catch (const std::exception& e) {
            const QString what = q(e.what());
            r.error = what.contains(QFileInfo(source).fileName()) ? what : tr("%1: %2").arg(source, what);
            return r;
        }
        s->source = q(file);
        s->backend = backendRegistry().create(Device::cpu());
        s->compiled = compileExportModel(s->model, *s->backend);
        s->inputShape = s->compiled->inputShape();
        s->classes = int(s->compiled->outputShape().numel());
        if (!s->model.int8Activations.empty()) {
            try {
                s->int8 = std::make_unique<Int8Engine>(s->model, s->model.int8Activations);
                const size_t islands = s->int8->floatIslands().size();
                s->runtime = islands == 0 ? tr("int8 engine")
                                          : tr("int8 engine (%n layer(s) in float32 between the grids, as the file "
                                               "has them)",
                                               nullptr, int(islands));
            } catch (const std::exception& e) {
                s->runtime = tr("float32 on the dequantized weights, not the int8 engine: %1").arg(q(e.what()));
            }
        }
        for (int k = 0; k < s->classes; ++k)
            s->classNames << (size_t(k) < s->model.classNames.size() && !s->model.classNames[size_t(k)].empty()
                                  ? q(s->model.classNames[size_t(k)])
                                  : tr("class %1").arg(k));
        try {
            DatasetBundle data = loadDataset(s->model.project.dataset, projectPath.toStdString());
            s->dataNormalization = data.normalization;
            const bool validation = data.validation.count > 0;
            s->samples = validation ? std::move(data.validation) : std::move(data.train);
            s->splitName = validation ? tr("validation") : tr("training");
            if (s->samples.sampleShape.numel() != s->inputShape.numel())
                throw std::runtime_error("its samples " + s->samples.sampleShape.toString() +
                                         " do not fit the model input " + s->inputShape.toString());
            const int64_t per = s->samples.sampleShape.numel();
            for (int64_t i = 0; i < std::min<int64_t>(kThumbnails, s->samples.count); ++i) {
                std::vector<float> raw(s->samples.inputs.begin() + i * per, s->samples.inputs.begin() + (i + 1) * per);
                undoNormalization(raw, s->dataNormalization);
                const QImage img = rawToImage(raw.data(), s->inputShape);
                if (img.isNull()) break;
                s->thumbnails << img;
            }
        } catch (const std::exception& e) {
            s->samples = DataSplit{};
            s->dataError =
                tr("The data set could not be loaded (%1), so only image files can be predicted.").arg(q(e.what()));
        }
        r.session = std::move(s);
        return r;
    });
}

void PredictPanel::selectSample(int index) {
    if (!m_session || index < 0 || index >= m_session->samples.count) return;
    // Keep the picker on the sample shown, whoever asked for it.
    if (m_index->value() != index) {
        m_index->blockSignals(true);
        m_index->setValue(index);
        m_index->blockSignals(false);
    }
    setFieldError(m_index, QString());
    if (m_thumbs->currentRow() != index) {
        m_thumbs->blockSignals(true);
        m_thumbs->setCurrentRow(index < m_thumbs->count() ? index : -1);
        m_thumbs->blockSignals(false);
    }
    if (isBusy()) {
        m_pendingIndex = index;  // the latest pick wins once the running job ends
        return;
    }
    showError({});
    auto s = m_session;
    const QImage thumb = sampleImage(index);
    start([s, index, thumb] {
        JobResult r;
        r.kind = JobResult::Predict;
        const int64_t per = s->samples.sampleShape.numel();
        r.predictions = predictOn(*s, s->samples.inputs.data() + index * per, 1);
        const int label = s->samples.labels[size_t(index)];
        r.truth = tr("%1 sample %2, true class: %3")
                      .arg(s->splitName)
                      .arg(index)
                      .arg(label >= 0 && label < s->classNames.size() ? s->classNames[label] : QString::number(label));
        r.input = thumb;
        r.sampleInput.assign(s->samples.inputs.begin() + index * per, s->samples.inputs.begin() + (index + 1) * per);
        if (s->model.project.dataset.kind == DatasetKind::Text) {
            const float* ids = s->samples.inputs.data() + index * per;
            const std::vector<std::string> words = sampleWords(ids, per, s->model.vocabulary);
            r.tokens = sampleTokens(ids, words);
            r.attention = attentionStrip(*s->compiled, ids, words, words.size());
            r.words = words;
        }
        return r;
    });
}

bool PredictPanel::isTextModel() const {
    return m_session && m_session->model.project.dataset.kind == DatasetKind::Text &&
           !m_session->model.vocabulary.empty();
}

QString PredictPanel::tokensText() const { return m_tokens->text(); }

QString PredictPanel::attentionText() const { return m_attention->isHidden() ? QString() : m_attention->text(); }

void PredictPanel::predictText(const QString& text) {
    if (!isTextModel()) return;
    if (isBusy()) {
        m_textPending = true;  // predicted when the running job ends
        return;
    }
    showError({});
    auto s = m_session;
    start([s, utf8 = text.toStdString()] {
        JobResult r;
        r.kind = JobResult::Predict;
        const DatasetSettings& ds = s->model.project.dataset;
        PredictInputs in = encodeTexts({utf8}, s->model);
        r.predictions = predictOn(*s, in.values.data(), 1);
        // The tokens as typed (words, characters or pieces), the ones the vocabulary lacks (id 1) marked, those
        // past max_tokens struck out.
        const TextEncoder encoder(ds.tokenizer, ds.maxTokens, s->model.vocabulary, s->model.tokenizerModel);
        const std::vector<std::string> words = encoder.tokens(utf8);
        const std::vector<int32_t> ids = encoder.ids(utf8);
        const size_t kept = std::min(words.size(), in.values.size());
        std::vector<bool> unknown(words.size(), false);
        for (size_t i = 0; i < words.size() && i < ids.size(); ++i) unknown[i] = ids[i] == 1;
        r.tokens = tokenLine(words, unknown, kept);
        r.attention = attentionStrip(*s->compiled, in.values.data(), words, kept);
        r.sampleInput = in.values;
        r.words.assign(words.begin(), words.begin() + std::ptrdiff_t(kept));
        if (words.size() > kept) r.tokens += tr(" <i>(cut at max_tokens %1)</i>").arg(ds.maxTokens);
        const int unknownCount = int(std::count(unknown.begin(), unknown.end(), true));
        r.truth = tr("typed text: %n token(s)", nullptr, int(words.size())) +
                  (unknownCount > 0 ? tr(", %n unknown", nullptr, unknownCount) : QString());
        return r;
    });
}

QImage PredictPanel::sampleImage(int index) const {
    if (!m_session) return {};
    if (index < m_session->thumbnails.size()) return m_session->thumbnails[index];
    const int64_t per = m_session->samples.sampleShape.numel();
    std::vector<float> raw(m_session->samples.inputs.begin() + index * per,
                           m_session->samples.inputs.begin() + (index + 1) * per);
    undoNormalization(raw, m_session->dataNormalization);
    return rawToImage(raw.data(), m_session->inputShape);
}

std::vector<float> PredictPanel::imageToRawInput(const QImage& image, const Shape& inputShape, QString* error,
                                                 data::ResizePolicy policy) {
    if (image.isNull()) {
        *error = tr("The image is empty.");
        return {};
    }
    // The pixels as they are (gray when every pixel is); fitting them to the model is core's (ImageFile.h).
    data::Image raw;
    const bool gray = image.isGrayscale();
    const QImage pixels = image.convertToFormat(gray ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
    raw.channels = gray ? 1 : 3;
    raw.height = pixels.height();
    raw.width = pixels.width();
    raw.values.resize(size_t(raw.channels * raw.height * raw.width));
    const size_t plane = size_t(raw.height * raw.width);
    for (int r = 0; r < pixels.height(); ++r) {
        const uchar* line = pixels.constScanLine(r);
        for (int k = 0; k < pixels.width(); ++k) {
            const size_t i = size_t(r) * size_t(raw.width) + size_t(k);
            for (int ch = 0; ch < raw.channels; ++ch) raw.values[size_t(ch) * plane + i] = line[raw.channels * k + ch];
        }
    }
    return fitToInput(raw, inputShape, error, policy);
}

std::vector<float> PredictPanel::fitToInput(const data::Image& image, const Shape& inputShape, QString* error,
                                            data::ResizePolicy policy) {
    try {
        return data::fitImageToInput(image, inputShape, policy).values;
    } catch (const std::exception& e) {
        QString what = q(e.what());
        if (!what.isEmpty()) what[0] = what[0].toUpper();
        *error = what + QLatin1Char('.');
        return {};
    }
}

std::vector<float> PredictPanel::readImageFile(const QString& path, const Shape& inputShape, QString* error,
                                               data::ResizePolicy policy) {
    // The formats core decodes (PNG, JPEG, BMP, PGM, PPM) go through core, as `strata-train predict` and
    // image-folder datasets read them; Qt decodes the rest, and both are fitted to the model the same way.
    if (data::isImageFileName(path.toStdString())) {
        data::Image image;
        try {
            const std::vector<int64_t>& dims = inputShape.dims();
            data::DecodeHint hint;
            if (dims.size() >= 2) hint = {dims[dims.size() - 2], dims.back(), policy};
            image = data::readImageFile(path.toStdString(), hint);
        } catch (const std::exception& e) {
            *error = q(e.what());
            return {};
        }
        return fitToInput(image, inputShape, error, policy);
    }
    QImage img(path);
    if (img.isNull()) {
        *error = tr("%1: not an image Qt can read (PNG, JPEG, BMP, PGM, PPM)").arg(path);
        return {};
    }
    return imageToRawInput(img, inputShape, error, policy);
}

void PredictPanel::predictImageFile(const QString& path) {
    if (!m_session || isBusy()) return;
    showError({});
    QString error;
    std::vector<float> raw =
        readImageFile(path, m_session->inputShape, &error, data::resizePolicyFor(m_session->model.project.dataset));
    if (raw.empty()) {
        showError(error.contains(QFileInfo(path).fileName()) ? error : tr("%1: %2").arg(path, error));
        return;
    }
    const QImage shown = rawToImage(raw.data(), m_session->inputShape);
    auto s = m_session;
    const QString name = QFileInfo(path).fileName();
    start([s, raw = std::move(raw), shown, name]() mutable {
        JobResult r;
        r.kind = JobResult::Predict;
        applyNormalization(raw, s->model.normalization);
        r.predictions = predictOn(*s, raw.data(), 1);
        r.sampleInput = raw;
        r.input = shown;
        r.truth = tr("image %1").arg(name);
        return r;
    });
}

void PredictPanel::runConfusionMatrix() {
    if (!m_session || isBusy() || m_session->samples.count == 0) return;
    showError({});
    auto s = m_session;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto cancel = m_cancel;
    QPointer<QProgressBar> bar = m_progress;
    m_progress->setValue(0);
    m_status->setText(tr("Evaluating %1 %2 samples...").arg(s->samples.count).arg(s->splitName));
    start([s, cancel, bar] {
        JobResult r;
        r.kind = JobResult::Confusion;
        auto progress = [&](int64_t done, int64_t total) {
            const int pct = int(100 * done / std::max<int64_t>(1, total));
            QMetaObject::invokeMethod(
                bar,
                [bar, pct] {
                    if (bar) bar->setValue(pct);
                },
                Qt::QueuedConnection);
            return !cancel->load();
        };
        if (s->int8) {  // the int8 engine, 256 samples at a time so that it can be cancelled
            const int64_t per = s->samples.sampleShape.numel(), n = s->samples.count;
            std::vector<int32_t> predicted;
            for (int64_t start = 0; start < n; start += 256) {
                const int64_t b = std::min<int64_t>(256, n - start);
                const Predictions p = predictOn(*s, s->samples.inputs.data() + start * per, b);
                predicted.insert(predicted.end(), p.predicted.begin(), p.predicted.end());
                if (!progress(start + b, n)) throw EvaluationCancelled();
            }
            r.confusion = confusionMatrix(s->samples.labels, predicted, s->classes);
            r.predicted = std::move(predicted);
            return r;
        }
        const SplitEvaluation e = evaluateSplit(*s->compiled, s->samples, 0, 256, progress);
        r.confusion = e.confusion;
        r.predicted = e.predictions.predicted;
        return r;
    });
}

void PredictPanel::projectTrained() {
    // The project's weights (its newest run with weights, or the run picked) are what the dock offers by
    // default: loaded after a run when nothing else is loaded, reloaded when they were showing, and tried
    // again when loading them failed (the error they left is gone once a run has kept weights).
    // A hidden dock loads them when it is first shown (no work for a dock nobody looks at).
    m_runPicker->refresh();
    if (isBusy()) return;
    if (m_session && m_fromProject)
        loadModel();
    else if (!m_session && isVisible())
        loadModel();
    else if (!m_session)
        m_loadWhenShown = true;
}

void PredictPanel::projectChanged() {
    // Another project (opened, new, or saved as a copy): nothing of the previous one stays: its model, its
    // predictions and confusion matrix, a load or evaluation still running.
    ++m_generation;
    if (m_cancel) *m_cancel = true;
    m_session.reset();
    m_lastInput.clear();
    m_fromProject = false;
    m_loadWhenShown = false;
    m_pendingIndex = -1;
    m_textPending = false;
    m_cellIndices.clear();
    m_confusionPredicted.clear();
    m_cellSamples->clear();
    m_cellTitle->clear();
    m_thumbs->clear();
    m_text->blockSignals(true);
    m_text->clear();
    m_text->blockSignals(false);
    m_tokens->clear();
    m_saliency->setModel(nullptr, {}, false);
    clearResults();
    m_status->clear();
    showError({});
    setFieldError(m_index, QString());
    setBusy(isBusy());
    showNoModel();
}

void PredictPanel::showNoModel() {
    m_source->setToolTip(QString());
    const std::optional<ProjectRun> run = m_runPicker->chosen();
    if (!run)  // the picker says there is no run; Load run says what to do
        m_source->setText(tr("No model loaded."));
    else
        m_source->setText(
            tr("No model loaded: \"Load run\" loads %1.")
                .arg(run->id == 0 ? tr("the project's checkpoint folder") : run->label().toHtmlEscaped()));
}

PredictPanel::CurrentSample PredictPanel::currentSample() const {
    CurrentSample c;
    if (!m_session) return c;
    // Aliasing pointers: they keep the whole session alive for as long as a worker holds them.
    c.model = std::shared_ptr<const ExportModel>(m_session, &m_session->model);
    c.samples = std::shared_ptr<const DataSplit>(m_session, &m_session->samples);
    c.input = m_lastInput;
    c.text = m_lastInputText;
    return c;
}

QString PredictPanel::modelRunText() const { return m_session ? m_session->runLabel : QString(); }

void PredictPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (m_loadWhenShown && !m_session && !isBusy()) {
        m_loadWhenShown = false;
        loadModel();
    }
}

void PredictPanel::finishJob() {
    const std::shared_ptr<JobResult> r = m_result;
    m_result.reset();
    m_status->clear();
    if (!r || m_jobGeneration != m_generation) {  // none, or the previous project's
        setBusy(false);
        return;
    }
    if (r->cancelled) {
        setBusy(false);
        return;
    }
    if (!r->error.isEmpty()) {
        setBusy(false);
        showError(r->error);
        if (r->kind == JobResult::Load) emit modelLoaded(false);
        return;
    }
    switch (r->kind) {
        case JobResult::Load:
            m_session = r->session;
            m_saliency->setModel(std::shared_ptr<const ExportModel>(m_session, &m_session->model),
                                 m_session->classNames, isTextModel());
            m_lastInput.clear();
            showModel();
            setBusy(false);
            emit modelLoaded(true);
            if (m_session->samples.count > 0) selectSample(m_index->value());
            return;
        case JobResult::Predict:
            showPrediction(r->predictions, r->input, r->truth, r->tokens);
            m_lastInput = r->sampleInput;
            m_lastInputText = r->truth;
            m_attention->setText(r->attention);
            m_attention->setVisible(!r->attention.isEmpty());
            m_saliency->setSample(std::move(r->sampleInput), r->input, m_predicted, std::move(r->words));
            break;
        case JobResult::Confusion:
            m_progress->setValue(100);
            m_confusionPredicted = r->predicted;
            showConfusion(r->confusion);
            break;
    }
    setBusy(false);
    if (r->kind == JobResult::Predict) emit predictionReady();
    if (r->kind == JobResult::Confusion) emit confusionReady();
    if (m_pendingIndex >= 0) {
        const int next = m_pendingIndex;
        m_pendingIndex = -1;
        selectSample(next);
    } else if (m_textPending) {
        m_textPending = false;
        predictText(m_text->text());
    }
}

void PredictPanel::showModel() {
    const PredictSession& s = *m_session;
    // The project's name in parentheses when the file has one ("best.safetensors (Fashion MLP)").
    const QString name = q(s.model.project.name).trimmed();
    QString text =
        (name.isEmpty()
             ? tr("<b>%1</b>").arg(QFileInfo(s.source).fileName().toHtmlEscaped())
             : tr("<b>%1</b> (%2)").arg(QFileInfo(s.source).fileName().toHtmlEscaped(), name.toHtmlEscaped())) +
        tr(": input %1, %2 classes").arg(q(s.inputShape.toString())).arg(s.classes);
    if (s.samples.count > 0) text += tr("; %1 %2 samples").arg(s.samples.count).arg(s.splitName);
    if (!s.runtime.isEmpty()) text += tr("; runs on: %1").arg(s.runtime.toHtmlEscaped());
    if (!s.runLabel.isEmpty()) text = tr("From %1: %2").arg(s.runLabel.toHtmlEscaped(), text);
    m_source->setText(text);
    m_source->setToolTip(s.source);
    if (!s.dataError.isEmpty()) showError(s.dataError);
    m_index->blockSignals(true);
    const int last = int(std::max<int64_t>(0, s.samples.count - 1));
    if (m_index->value() < 0 || m_index->value() > last)
        m_index->setValue(std::min(std::max(0, m_index->value()), last));
    m_index->blockSignals(false);
    setFieldError(m_index, QString());
    m_thumbs->clear();
    for (int i = 0; i < s.thumbnails.size(); ++i) {
        const QImage scaled =
            s.thumbnails[i].scaled(kThumbSize, kThumbSize, Qt::KeepAspectRatio, Qt::FastTransformation);
        auto* item = new QListWidgetItem(QIcon(QPixmap::fromImage(scaled)), QString(), m_thumbs);
        const int label = s.samples.labels[size_t(i)];
        item->setToolTip(tr("#%1: %2").arg(i).arg(label < s.classNames.size() ? s.classNames[label] : QString()));
    }
    m_thumbs->setVisible(!s.thumbnails.isEmpty());
    m_text->setVisible(isTextModel());
    m_tokens->setVisible(isTextModel());
    m_tokens->clear();
    m_inputView->setVisible(!isTextModel());
    clearResults();
}

// What a prediction or an evaluation showed: gone with the model or the samples it was about.
void PredictPanel::clearResults() {
    m_attention->clear();
    m_attention->hide();
    m_probabilities.clear();
    m_predicted = -1;
    m_predictionText.clear();
    m_probTable->setRowCount(0);
    m_predictedLabel->clear();
    m_inputView->clear();
    m_confusion = ConfusionMatrix{};
    m_confusionTable->clear();
    m_confusionTable->setRowCount(0);
    m_confusionTable->setColumnCount(0);
    m_accuracy->clear();
    m_progress->setValue(0);
}

void PredictPanel::showPrediction(const Predictions& p, const QImage& input, const QString& truth,
                                  const QString& tokens) {
    if (!tokens.isNull()) m_tokens->setText(tokens.isEmpty() ? tr("<i>(no tokens: all padding)</i>") : tokens);
    const QStringList& names = m_session->classNames;
    m_probabilities.clear();
    for (int k = 0; k < p.classes; ++k) m_probabilities << double(p.probabilities[size_t(k)]);
    m_predicted = p.predicted.empty() ? -1 : p.predicted[0];
    const QString predictedName = m_predicted >= 0 && m_predicted < names.size() ? names[m_predicted] : QString();
    m_predictionText = tr("%1 (%2%)").arg(predictedName).arg(100.0 * m_probabilities.value(m_predicted), 0, 'f', 1);
    m_predictedLabel->setText(tr("Predicted: %1<br><span style='font-weight:normal; font-size:small'>%2</span>")
                                  .arg(m_predictionText.toHtmlEscaped(), truth.toHtmlEscaped()));
    if (!input.isNull())
        m_inputView->setPixmap(QPixmap::fromImage(
            input.scaled(m_inputView->size() - QSize(4, 4), Qt::KeepAspectRatio, Qt::FastTransformation)));
    else
        m_inputView->setText(tr("(not an image)"));
    m_probTable->setRowCount(p.classes);
    for (int k = 0; k < p.classes; ++k) {
        auto* name = new QTableWidgetItem(k < names.size() ? names[k] : QString::number(k));
        if (k == m_predicted) {
            QFont f = name->font();
            f.setBold(true);
            name->setFont(f);
        }
        m_probTable->setItem(k, 0, name);
        auto* bar = qobject_cast<QProgressBar*>(m_probTable->cellWidget(k, 1));
        if (!bar) {
            bar = new QProgressBar(m_probTable);
            bar->setRange(0, 1000);
            bar->setTextVisible(true);
            bar->setMaximumHeight(18);
            bar->setAlignment(Qt::AlignCenter);
            m_probTable->setCellWidget(k, 1, bar);
        }
        bar->setValue(int(std::lround(1000.0 * m_probabilities[k])));
        bar->setFormat(QString::number(m_probabilities[k], 'f', 4));
        bar->setStyleSheet(k == m_predicted ? QStringLiteral("QProgressBar::chunk { background: #2e7d32; }")
                                            : QStringLiteral("QProgressBar::chunk { background: #5c8dd6; }"));
    }
    // The predicted class's row is scrolled into view, however many classes there are.
    if (m_predicted >= 0 && m_predicted < p.classes) m_probTable->scrollToItem(m_probTable->item(m_predicted, 0));
}

void PredictPanel::showCellSamples(int trueClass, int predictedClass) {
    m_cellSamples->clear();
    m_cellIndices.clear();
    const int n = m_confusion.classes;
    if (!m_session || trueClass < 0 || predictedClass < 0 || trueClass >= n || predictedClass >= n) return;
    m_confusionTable->setCurrentCell(trueClass, predictedClass);  // the cell listed, also when asked in code
    const QStringList& names = m_session->classNames;
    auto name = [&names](int k) { return k < names.size() ? names[k] : QString::number(k); };
    const auto& labels = m_session->samples.labels;
    const size_t count = std::min(labels.size(), m_confusionPredicted.size());
    for (size_t i = 0; i < count; ++i)
        if (labels[i] == trueClass && m_confusionPredicted[i] == predictedClass) m_cellIndices << qint64(i);
    // A few hundred thumbnails at most: the rest are counted, not drawn.
    constexpr int kMaxShown = 300;
    const bool images = !m_cellIndices.isEmpty() && !sampleImage(int(m_cellIndices[0])).isNull();
    for (qsizetype j = 0; j < std::min<qsizetype>(m_cellIndices.size(), kMaxShown); ++j) {
        const int i = int(m_cellIndices[j]);
        auto* item = new QListWidgetItem(QStringLiteral("#%1").arg(i), m_cellSamples);
        item->setData(Qt::UserRole, i);
        if (images)
            item->setIcon(QIcon(QPixmap::fromImage(
                sampleImage(i).scaled(kThumbSize, kThumbSize, Qt::KeepAspectRatio, Qt::FastTransformation))));
    }
    m_cellTitle->setText(
        tr("True %1, predicted %2: %n %3 sample(s)%4", nullptr, int(m_cellIndices.size()))
            .arg(name(trueClass), name(predictedClass), m_session->splitName,
                 m_cellIndices.size() > kMaxShown ? tr(" (the first %1 shown)").arg(kMaxShown) : QString()));
}

void PredictPanel::showConfusion(const ConfusionMatrix& m) {
    m_confusion = m;
    m_cellSamples->clear();
    m_cellIndices.clear();
    m_cellTitle->setText(tr("Click a cell to list its samples."));
    const QStringList& names = m_session->classNames;
    const int n = m.classes;
    m_confusionTable->clear();
    m_confusionTable->setRowCount(n + 1);
    m_confusionTable->setColumnCount(n + 1);
    QStringList headers;
    for (int k = 0; k < n; ++k) headers << (k < names.size() ? names[k] : QString::number(k));
    m_confusionTable->setVerticalHeaderLabels(headers + QStringList{tr("Precision")});
    // The columns are named like the rows (the data set's class names when it has them).
    m_confusionTable->setHorizontalHeaderLabels(headers + QStringList{tr("Recall")});
    for (int k = 0; k < n; ++k) m_confusionTable->horizontalHeaderItem(k)->setToolTip(headers[k]);
    for (int t = 0; t < n; ++t) {
        const double rowTotal = double(std::max<int64_t>(1, m.rowTotal(t)));
        for (int p = 0; p < n; ++p) {
            const int64_t c = m.at(t, p);
            auto* item = new QTableWidgetItem(QString::number(c));
            item->setTextAlignment(Qt::AlignCenter);
            // Diagonal in green, errors in red, shaded by the share of the true class's samples.
            const double share = double(c) / rowTotal;
            const QColor base = t == p ? QColor(46, 125, 50) : QColor(198, 40, 40);
            QColor bg = base;
            bg.setAlphaF(c == 0 ? 0.0f : float(0.12 + 0.88 * share));
            item->setBackground(bg);
            if (share > 0.55) item->setForeground(Qt::white);
            item->setToolTip(tr("true %1, predicted %2: %3 (%4% of the row)")
                                 .arg(headers[t], headers[p])
                                 .arg(c)
                                 .arg(100.0 * share, 0, 'f', 1));
            m_confusionTable->setItem(t, p, item);
        }
        const double recall = m.recall(t);
        auto* r = new QTableWidgetItem(std::isnan(recall) ? tr("n/a") : QString::number(100.0 * recall, 'f', 1) + '%');
        r->setTextAlignment(Qt::AlignCenter);
        m_confusionTable->setItem(t, n, r);
    }
    for (int p = 0; p < n; ++p) {
        const int64_t col = m.columnTotal(p);
        auto* item = new QTableWidgetItem(
            col == 0 ? tr("n/a") : QString::number(100.0 * double(m.at(p, p)) / double(col), 'f', 1) + '%');
        item->setTextAlignment(Qt::AlignCenter);
        m_confusionTable->setItem(n, p, item);
    }
    m_accuracy->setText(tr("Accuracy %1% (%2 of %3 %4 samples)")
                            .arg(100.0 * m.accuracy(), 0, 'f', 2)
                            .arg(m.correct())
                            .arg(m.total())
                            .arg(m_session->splitName));
}

}  // namespace strata::ui
