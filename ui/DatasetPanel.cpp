// DatasetPanel: see DatasetPanel.h.
#include "ui/DatasetPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/data/Dataset.h"
#include "ui/SettingWidgets.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

// A sample as a grey or colour picture, stretched to its own value range so that
// normalized inputs (which may be negative) stay visible.
QImage renderSample(const float* x, const Shape& shape) {
    int channels = 1, height = 0, width = 0;
    if (shape.rank() == 3) {
        channels = int(shape[0]);
        height = int(shape[1]);
        width = int(shape[2]);
    } else if (shape.rank() == 2) {
        height = int(shape[0]);
        width = int(shape[1]);
    }
    const int64_t n = int64_t(channels) * height * width;
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    const float range = hi > lo ? hi - lo : 1.f;
    auto level = [&](float v) { return int(std::lround(255.f * (v - lo) / range)); };
    const int64_t plane = int64_t(height) * width;
    QImage image(width, height, QImage::Format_RGB32);
    for (int r = 0; r < height; ++r) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
        for (int c = 0; c < width; ++c) {
            const int64_t i = int64_t(r) * width + c;
            if (channels >= 3)
                line[c] = qRgb(level(x[i]), level(x[plane + i]), level(x[2 * plane + i]));
            else {
                const int g = level(x[i]);
                line[c] = qRgb(g, g, g);
            }
        }
    }
    return image;
}

bool isImageShape(const Shape& shape) {
    if (shape.rank() == 2) return shape[0] >= 4 && shape[1] >= 4;
    return shape.rank() == 3 && (shape[0] == 1 || shape[0] == 3) && shape[1] >= 4 && shape[2] >= 4;
}

QVector<qint64> perClass(const DataSplit& split, int classes) {
    QVector<qint64> counts(std::max(classes, 0), 0);
    for (int32_t label : split.labels)
        if (label >= 0 && label < classes) ++counts[label];
    return counts;
}

}  // namespace

DatasetPanel::DatasetPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    buildUi();
    m_watcher = new QFutureWatcher<DatasetPreview>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] {
        if (m_loadingGeneration == m_generation) {
            showPreview(m_watcher->result());
        } else {  // the previous project's data: dropped, and this one's loads
            m_previewButton->setEnabled(true);
            m_autoPreview->start();
        }
    });
    connect(m_doc, &ProjectDocument::settingsChanged, this, &DatasetPanel::syncFromDocument);
    connect(m_doc, &ProjectDocument::settingsChanged, this, &DatasetPanel::datasetEdited);
    m_autoPreview = new QTimer(this);
    m_autoPreview->setSingleShot(true);
    m_autoPreview->setInterval(400);
    connect(m_autoPreview, &QTimer::timeout, this, [this] {
        if (!isVisible()) return;  // showEvent loads it when the panel is shown
        if (m_watcher->isRunning())
            m_autoPreview->start();  // showPreview would show older settings: try again after it
        else
            loadPreview();
    });
    connect(m_doc, &ProjectDocument::projectReset, this, [this] {
        m_editors.clearRefusals();  // another project: what was refused in the last one is gone
        syncFromDocument();
        clearPreview();  // and so is its data: the new project's preview loads when the panel is shown
    });
    syncFromDocument();
}

DatasetPanel::~DatasetPanel() { m_watcher->waitForFinished(); }

QString DatasetPanel::previewStatusText() const { return m_previewStatus->text(); }

QString DatasetPanel::pickerStartPath(const QString& fieldText) const {
    const QString projectDir =
        m_doc->filePath().isEmpty() ? QDir::currentPath() : QFileInfo(m_doc->filePath()).absolutePath();
    if (!fieldText.trimmed().isEmpty()) return QDir(projectDir).absoluteFilePath(fieldText.trimmed());
    const QString last = QSettings().value(QStringLiteral("dataset/lastPickerFolder")).toString();
    return !last.isEmpty() && QFileInfo(last).isDir() ? last : projectDir;
}

void DatasetPanel::rememberPickedFile(const QString& absolutePath) {
    QSettings().setValue(QStringLiteral("dataset/lastPickerFolder"), QFileInfo(absolutePath).absolutePath());
}

void DatasetPanel::datasetEdited() {
    const DatasetSettings& now = m_doc->project().dataset;
    if (m_previewValid && now == m_previewed) return;  // another group's change: the preview still holds
    // What the status said ("Loaded.", a load error, a refused shape) was about the settings before.
    if (!m_watcher->isRunning()) m_previewStatus->clear();
    m_autoPreview->start();
}

void DatasetPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (!m_previewValid || !(m_doc->project().dataset == m_previewed)) m_autoPreview->start();
}

QString DatasetPanel::pickPath(const QString& caption, const QString& start, bool folder) {
    if (m_pathPicker) return m_pathPicker(caption, start, folder);
    return folder ? QFileDialog::getExistingDirectory(this, caption, start)
                  : QFileDialog::getOpenFileName(this, caption, start);
}

QLineEdit* DatasetPanel::pathEdit(QWidget* parent, const char* key, QWidget** row, bool registered, bool folder) {
    auto* box = new QWidget(parent);
    auto* layout = new QHBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    const SettingInfo& spec = m_editors.find(key);
    const QString caption = folder ? QString(settingLabel(spec)).replace(tr("file"), tr("folder")) : settingLabel(spec);
    auto* edit =
        registered ? m_editors.add<QLineEdit>(key, box) : static_cast<QLineEdit*>(createSettingEditor(spec, box));
    edit->setPlaceholderText(tr("(none)"));
    auto* browse = new QToolButton(box);
    browse->setText(QStringLiteral("..."));
    browse->setToolTip(folder ? tr("Choose a folder") : tr("Choose a file"));
    browse->setProperty("pickKind", folder ? QStringLiteral("folder") : QStringLiteral("file"));
    layout->addWidget(edit, 1);
    layout->addWidget(browse);
    if (!registered) connect(edit, &QLineEdit::editingFinished, this, &DatasetPanel::commit);
    connect(browse, &QToolButton::clicked, this, [this, edit, caption, key, folder] {
        const QString projectDir =
            m_doc->filePath().isEmpty() ? QDir::currentPath() : QFileInfo(m_doc->filePath()).absolutePath();
        QString path = pickPath(caption, pickerStartPath(edit->text()), folder);
        if (path.isEmpty()) return;
        rememberPickedFile(path);
        // Paths inside the project's folder are stored relative to it, so the project can move.
        if (!m_doc->filePath().isEmpty()) {
            const QString rel = QDir(projectDir).relativeFilePath(path);
            if (!rel.startsWith(QLatin1String(".."))) path = rel;
        }
        edit->setText(path);
        commit();
        if (std::string(key) == "train_images") fillIdxCompanions(QDir(projectDir).absoluteFilePath(path));
    });
    *row = withFieldError(box, edit);
    (*row)->setProperty("pathRow", true);
    return edit;
}

QMap<QString, QString> DatasetPanel::idxCompanions(const QString& trainImages) {
    QMap<QString, QString> found;
    const QFileInfo info(trainImages);
    const QString name = info.fileName();
    auto existing = [&info](const QString& candidate) {
        const QString path = info.dir().filePath(candidate);
        return candidate != info.fileName() && QFileInfo::exists(path) ? path : QString();
    };
    auto labelsOf = [](QString n) { return n.replace(QLatin1String("images-idx3"), QLatin1String("labels-idx1")); };
    if (const QString labels = existing(labelsOf(name)); !labels.isEmpty()) found.insert("train_labels", labels);
    if (!name.startsWith(QLatin1String("train"))) return found;
    for (const char* prefix : {"t10k", "test"}) {
        const QString val = QString::fromLatin1(prefix) + name.mid(5);
        if (const QString images = existing(val); !images.isEmpty()) {
            found.insert("validation_images", images);
            if (const QString labels = existing(labelsOf(val)); !labels.isEmpty())
                found.insert("validation_labels", labels);
            break;
        }
    }
    return found;
}

void DatasetPanel::fillIdxCompanions(const QString& trainImages) {
    const QString projectDir = m_doc->filePath().isEmpty() ? QString() : QFileInfo(m_doc->filePath()).absolutePath();
    const QMap<QString, QString> found = idxCompanions(trainImages);
    bool changed = false;
    for (auto it = found.begin(); it != found.end(); ++it) {
        QLineEdit* edit = m_idxEdits.value(it.key());
        if (!edit || !edit->text().trimmed().isEmpty()) continue;  // what the user set stays
        QString path = it.value();
        if (!projectDir.isEmpty()) {
            const QString rel = QDir(projectDir).relativeFilePath(path);
            if (!rel.startsWith(QLatin1String(".."))) path = rel;
        }
        edit->setText(path);
        changed = true;
    }
    if (changed) commit();
}

void DatasetPanel::buildUi() {
    auto* root = new QHBoxLayout(this);
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    root->addWidget(splitter);

    // --- Settings (left)
    auto* scroll = new QScrollArea(splitter);
    scroll->setWidgetResizable(true);
    auto* form = new QWidget(scroll);
    auto* formLayout = new QVBoxLayout(form);
    scroll->setWidget(form);

    // Ranges, choices, labels and tooltips come from the settings table (core/graph/Settings.cpp).
    // Every field but a check box has a line under it that says why a value typed there is not applied
    // (a path row carries its line already: pathEdit).
    auto row = [this](QFormLayout* rows, const char* key, QWidget* editor) {
        if (qobject_cast<QCheckBox*>(editor))
            rows->addRow(editor);
        else
            rows->addRow(settingLabel(m_editors.find(key)),
                         editor->property("pathRow").toBool() ? editor : withFieldError(editor));
    };
    auto* sourceBox = new QGroupBox(tr("Source"), form);
    auto* sourceForm = new QFormLayout(sourceBox);
    m_kind = m_editors.add<QComboBox>("kind", sourceBox);
    row(sourceForm, "kind", m_kind);
    // One page per kind, in the order of the kind's choices (the combo's order).
    m_kindPages = new QStackedWidget(sourceBox);
    sourceForm->addRow(m_kindPages);

    QWidget* pathRow = nullptr;
    auto* idxPage = new QWidget(m_kindPages);
    auto* idxForm = new QFormLayout(idxPage);
    idxForm->setContentsMargins(0, 0, 0, 0);
    for (const char* key : {"train_images", "train_labels", "validation_images", "validation_labels"}) {
        m_idxEdits.insert(QString::fromLatin1(key), pathEdit(idxPage, key, &pathRow));
        row(idxForm, key, pathRow);
    }
    m_kindPages->addWidget(idxPage);

    // csv and text share train_path and validation_path: the csv page's editors are the table's,
    // the text page's show the same values (settingsFromWidgets takes the page of the kind).
    auto* csvPage = new QWidget(m_kindPages);
    auto* csvForm = new QFormLayout(csvPage);
    csvForm->setContentsMargins(0, 0, 0, 0);
    m_csvTrain = pathEdit(csvPage, "train_path", &pathRow);
    row(csvForm, "train_path", pathRow);
    m_csvVal = pathEdit(csvPage, "validation_path", &pathRow);
    row(csvForm, "validation_path", pathRow);
    m_labelColumn = m_editors.add<QLineEdit>("label_column", csvPage);
    row(csvForm, "label_column", m_labelColumn);
    m_kindPages->addWidget(csvPage);

    auto* textPage = new QWidget(m_kindPages);
    auto* textForm = new QFormLayout(textPage);
    textForm->setContentsMargins(0, 0, 0, 0);
    m_textTrain = pathEdit(textPage, "train_path", &pathRow, false);
    row(textForm, "train_path", pathRow);
    m_textVal = pathEdit(textPage, "validation_path", &pathRow, false);
    row(textForm, "validation_path", pathRow);
    m_tokenizer = m_editors.add<QComboBox>("tokenizer", textPage);
    row(textForm, "tokenizer", m_tokenizer);
    m_maxTokens = m_editors.add<QSpinBox>("max_tokens", textPage);
    row(textForm, "max_tokens", m_maxTokens);
    m_maxVocab = m_editors.add<QSpinBox>("max_vocab", textPage);
    row(textForm, "max_vocab", m_maxVocab);
    pathEdit(textPage, "tokenizer_model", &pathRow);
    row(textForm, "tokenizer_model", pathRow);
    m_kindPages->addWidget(textPage);

    auto* synthPage = new QWidget(m_kindPages);
    auto* synthForm = new QFormLayout(synthPage);
    synthForm->setContentsMargins(0, 0, 0, 0);
    m_synthSamples = m_editors.add<QSpinBox>("synthetic_samples", synthPage);
    row(synthForm, "synthetic_samples", m_synthSamples);
    m_synthClasses = m_editors.add<QSpinBox>("synthetic_classes", synthPage);
    row(synthForm, "synthetic_classes", m_synthClasses);
    m_synthShape = m_editors.add<QLineEdit>("synthetic_shape", synthPage);
    row(synthForm, "synthetic_shape", m_synthShape);
    m_kindPages->addWidget(synthPage);

    // image_folder: train_path and validation_path shown again (as on the text page), plus its own settings.
    auto* imagePage = new QWidget(m_kindPages);
    auto* imageForm = new QFormLayout(imagePage);
    imageForm->setContentsMargins(0, 0, 0, 0);
    // Folders here (a CSV of path,label can be typed instead): named and picked as folders.
    m_imageTrain = pathEdit(imagePage, "train_path", &pathRow, false, true);
    m_imageTrain->setPlaceholderText(tr("a folder of class folders (or a CSV of path,label)"));
    imageForm->addRow(tr("Training folder"), pathRow);
    m_imageVal = pathEdit(imagePage, "validation_path", &pathRow, false, true);
    m_imageVal->setPlaceholderText(tr("optional: a folder of class folders (or a CSV)"));
    imageForm->addRow(tr("Validation folder"), pathRow);
    row(imageForm, "image_shape", m_editors.add<QLineEdit>("image_shape", imagePage));
    auto* applyShape = new QPushButton(tr("Set the Input node to this shape"), imagePage);
    applyShape->setObjectName("apply_input_shape");
    connect(applyShape, &QPushButton::clicked, this, &DatasetPanel::applyImageShapeToInput);
    imageForm->addRow(QString(), applyShape);
    row(imageForm, "image_resize", m_editors.add<QComboBox>("image_resize", imagePage));
    row(imageForm, "strict_images", m_editors.add<QCheckBox>("strict_images", imagePage));
    auto* threads = m_editors.add<QSpinBox>("decode_threads", imagePage);
    showZeroAs(threads, tr("one per core"));
    row(imageForm, "decode_threads", threads);
    row(imageForm, "image_loading", m_editors.add<QComboBox>("image_loading", imagePage));
    row(imageForm, "loader_batches", m_editors.add<QSpinBox>("loader_batches", imagePage));
    auto* cacheMemory = m_editors.add<QSpinBox>("cache_memory_mb", imagePage);
    showZeroAs(cacheMemory, tr("always a file"));
    row(imageForm, "cache_memory_mb", cacheMemory);
    m_kindPages->addWidget(imagePage);
    formLayout->addWidget(sourceBox);

    // What the network learns (dataset.task) and the targets each task reads; the table says which apply.
    auto* taskBox = new QGroupBox(tr("Task"), form);
    auto* taskForm = new QFormLayout(taskBox);
    row(taskForm, "task", m_editors.add<QComboBox>("task", taskBox));
    row(taskForm, "target_columns", m_editors.add<QLineEdit>("target_columns", taskBox));
    row(taskForm, "standardize_targets", m_editors.add<QCheckBox>("standardize_targets", taskBox));
    row(taskForm, "label_separator", m_editors.add<QLineEdit>("label_separator", taskBox));
    auto* threshold = m_editors.add<QDoubleSpinBox>("threshold", taskBox, 2);
    threshold->setSingleStep(0.05);
    row(taskForm, "threshold", threshold);
    row(taskForm, "image_target", m_editors.add<QComboBox>("image_target", taskBox));
    auto* masking = m_editors.add<QDoubleSpinBox>("masking_fraction", taskBox, 2);
    masking->setSingleStep(0.05);
    row(taskForm, "masking_fraction", masking);
    for (const char* key : {"target_path", "validation_target_path"}) {
        pathEdit(taskBox, key, &pathRow, true, true);
        row(taskForm, key, pathRow);
    }
    formLayout->addWidget(taskBox);

    auto* prepBox = new QGroupBox(tr("Preparation"), form);
    auto* prepForm = new QFormLayout(prepBox);
    m_validationSplit = m_editors.add<QDoubleSpinBox>("validation_split", prepBox, 3);
    m_validationSplit->setSingleStep(0.05);
    row(prepForm, "validation_split", m_validationSplit);
    m_normalization = m_editors.add<QComboBox>("normalization", prepBox);
    row(prepForm, "normalization", m_normalization);
    m_classNames = m_editors.add<QLineEdit>("class_names", prepBox);
    m_classNames->setPlaceholderText(tr("comma-separated; empty: from the data"));
    row(prepForm, "class_names", m_classNames);
    formLayout->addWidget(prepBox);

    auto* augBox = new QGroupBox(tr("Augmentation (images, training split)"), form);
    auto* augForm = new QFormLayout(augBox);
    m_cropPadding = m_editors.add<QSpinBox>("crop_padding", augBox);
    m_cropPadding->setSuffix(tr(" px"));
    row(augForm, "crop_padding", m_cropPadding);
    m_flip = m_editors.add<QCheckBox>("horizontal_flip", augBox);
    row(augForm, "horizontal_flip", m_flip);
    m_noise = m_editors.add<QDoubleSpinBox>("noise_std", augBox, 3);
    m_noise->setSingleStep(0.01);
    row(augForm, "noise_std", m_noise);
    for (const char* key : {"resized_crop_min_area", "rotation_degrees", "brightness", "contrast"}) {
        auto* spin = m_editors.add<QDoubleSpinBox>(key, augBox, 2);
        spin->setSingleStep(std::string(key) == "rotation_degrees" ? 5.0 : 0.05);
        row(augForm, key, spin);
    }
    formLayout->addWidget(augBox);

    auto* limitBox = new QGroupBox(tr("Limits"), form);
    auto* limitForm = new QFormLayout(limitBox);
    m_trainLimit = m_editors.add<QSpinBox>("train_limit", limitBox);
    showZeroAs(m_trainLimit, tr("all"));
    row(limitForm, "train_limit", m_trainLimit);
    m_valLimit = m_editors.add<QSpinBox>("validation_limit", limitBox);
    showZeroAs(m_valLimit, tr("all"));
    row(limitForm, "validation_limit", m_valLimit);
    formLayout->addWidget(limitBox);

    auto* previewRow = new QHBoxLayout;
    m_previewButton = new QPushButton(tr("Load preview"), form);
    connect(m_previewButton, &QPushButton::clicked, this, &DatasetPanel::loadPreview);
    previewRow->addWidget(m_previewButton);
    m_previewStatus = new QLabel(form);
    m_previewStatus->setWordWrap(true);
    previewRow->addWidget(m_previewStatus, 1);
    formLayout->addLayout(previewRow);
    formLayout->addStretch(1);

    m_editors.connectAll(this, [this] { commit(); });
    connect(m_kind, &QComboBox::currentIndexChanged, m_kindPages, &QStackedWidget::setCurrentIndex);

    // --- Preview (right)
    auto* previewPane = new QWidget(splitter);
    auto* previewLayout = new QVBoxLayout(previewPane);
    m_description = new QLabel(tr("No preview loaded."), previewPane);
    // Not word-wrapped: a wrapped label in this layout gets too little height and clips its lines.
    m_description->setTextInteractionFlags(Qt::TextSelectableByMouse);
    previewLayout->addWidget(m_description);
    m_sampleViews = new QStackedWidget(previewPane);
    m_imageGrid = new QListWidget(m_sampleViews);
    m_imageGrid->setViewMode(QListView::IconMode);
    m_imageGrid->setIconSize(QSize(56, 56));
    m_imageGrid->setGridSize(QSize(84, 84));
    m_imageGrid->setResizeMode(QListView::Adjust);
    m_imageGrid->setMovement(QListView::Static);
    m_imageGrid->setSelectionMode(QAbstractItemView::NoSelection);
    m_sampleViews->addWidget(m_imageGrid);
    m_table = new QTableWidget(m_sampleViews);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_sampleViews->addWidget(m_table);
    m_textList = new QListWidget(m_sampleViews);
    m_textList->setWordWrap(true);
    m_sampleViews->addWidget(m_textList);
    previewLayout->addWidget(m_sampleViews, 3);
    m_balance = new QCustomPlot(previewPane);
    m_balance->setMinimumHeight(180);
    m_balance->plotLayout()->insertRow(0);
    m_balance->plotLayout()->addElement(
        0, 0,
        new QCPTextElement(m_balance, tr("Class balance"), QFont(font().family(), font().pointSize(), QFont::Bold)));
    m_balance->yAxis->setLabel(tr("samples"));
    m_balance->legend->setVisible(true);
    m_balance->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    previewLayout->addWidget(m_balance, 2);
    m_sizes = new QCustomPlot(previewPane);
    m_sizes->setObjectName(QStringLiteral("imageSizeChart"));
    m_sizes->setMinimumHeight(170);
    m_sizes->plotLayout()->insertRow(0);
    m_sizesTitle = new QCPTextElement(m_sizes, tr("Image sizes (width x height)"),
                                      QFont(font().family(), font().pointSize(), QFont::Bold));
    m_sizes->plotLayout()->addElement(0, 0, m_sizesTitle);
    m_sizes->yAxis->setLabel(tr("files"));
    m_sizes->hide();
    previewLayout->addWidget(m_sizes, 1);

    splitter->addWidget(scroll);
    splitter->addWidget(previewPane);
    splitter->setStretchFactor(0, 0);
    splitter->setStretchFactor(1, 1);
}

void DatasetPanel::syncFromDocument() {
    const DatasetSettings& s = m_doc->project().dataset;
    m_updating = true;
    m_editors.show(s);
    m_kindPages->setCurrentIndex(m_kind->currentIndex());
    m_textTrain->setText(m_csvTrain->text());
    m_textVal->setText(m_csvVal->text());
    m_imageTrain->setText(m_csvTrain->text());
    m_imageVal->setText(m_csvVal->text());
    m_updating = false;
}

DatasetSettings DatasetPanel::settingsFromWidgets() const {
    DatasetSettings s = m_doc->project().dataset;
    m_editors.read(s);
    if (s.kind == DatasetKind::Text) {
        s.trainPath = m_textTrain->text().trimmed().toStdString();
        s.validationPath = m_textVal->text().trimmed().toStdString();
    } else if (s.kind == DatasetKind::ImageFolder) {
        s.trainPath = m_imageTrain->text().trimmed().toStdString();
        s.validationPath = m_imageVal->text().trimmed().toStdString();
    }
    return s;
}

void DatasetPanel::commit() {
    if (m_updating) return;
    const DatasetSettings s = settingsFromWidgets();
    if (s == m_doc->project().dataset) return;
    m_doc->setDatasetSettings(s);
}

bool DatasetPanel::previewRunning() const { return m_watcher->isRunning(); }

void DatasetPanel::clearPreview() {
    ++m_generation;
    m_preview = DatasetPreview{};
    m_previewValid = false;
    m_previewStatus->clear();
    m_description->setText(tr("No preview loaded."));
    m_imageGrid->clear();
    m_table->clear();
    m_table->setRowCount(0);
    m_table->setColumnCount(0);
    m_textList->clear();
    m_balance->clearPlottables();
    m_balance->replot();
    m_sizes->clearPlottables();
    m_sizes->hide();
    m_autoPreview->start();
}

void DatasetPanel::loadPreview() {
    if (m_watcher->isRunning()) return;
    commit();
    const DatasetSettings settings = m_doc->project().dataset;
    const QString path = m_doc->filePath();
    m_autoPreview->stop();
    m_previewed = settings;
    m_previewValid = true;
    m_previewButton->setEnabled(false);
    m_previewStatus->setText(tr("Loading..."));
    m_loadingGeneration = m_generation;
    m_watcher->setFuture(QtConcurrent::run([settings, path] { return buildPreview(settings, path); }));
}

bool DatasetPanel::applyImageShapeToInput() {
    commit();
    const std::vector<int64_t> shape = m_doc->project().dataset.imageShape;
    auto refuse = [this](const QString& why) {
        m_previewStatus->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(why.toHtmlEscaped()));
        return false;
    };
    if (shape.size() != 3) return refuse(tr("Set the image shape first (C,H,W, e.g. 3,64,64)."));
    int input = -1, inputs = 0;
    for (const Node* n : m_doc->graph().nodes())
        if (const strata::LayerType* type = m_doc->graph().layerType(n->id); type && type->isGraphInput()) {
            input = n->id;
            ++inputs;
        }
    if (inputs != 1) return refuse(tr("The graph has %n Input node(s); one is needed.", nullptr, inputs));
    if (!m_doc->setParam(input, QStringLiteral("shape"), Json(shape)))
        return refuse(tr("The Input node did not take the shape."));
    m_previewStatus->setText(tr("The Input node now takes %1.").arg(QString::fromStdString(Shape(shape).toString())));
    return true;
}

DatasetPreview DatasetPanel::buildPreview(const DatasetSettings& settings, const QString& projectPath, int maxSamples) {
    DatasetPreview p;
    try {
        const DatasetBundle data = loadDataset(settings, projectPath.toStdString());
        p.description = QString::fromStdString(data.description);
        p.sampleShape = QString::fromStdString(data.train.sampleShape.toString());
        p.trainCount = data.train.count;
        p.validationCount = data.validation.count;
        for (int c = 0; c < data.numClasses; ++c)
            p.classNames << (c < int(data.classNames.size()) ? QString::fromStdString(data.classNames[size_t(c)])
                                                             : QString::number(c));
        p.trainPerClass = perClass(data.train, data.numClasses);
        std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> bySize;
        for (const auto& [size, n] : data.imageSizes) bySize.push_back({n, size});
        std::stable_sort(bySize.begin(), bySize.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        for (const auto& [n, size] : bySize) {
            const QString wh = QStringLiteral("%1x%2").arg(size.first).arg(size.second);
            p.imageSizes << QStringLiteral("%1: %2").arg(wh).arg(n);
            p.imageSizeCounts.push_back({wh, n});
        }
        for (const SkippedFile& f : data.skipped)
            p.skipped << QString::fromStdString(f.path) + QStringLiteral(": ") + QString::fromStdString(f.reason);
        p.validationPerClass = perClass(data.validation, data.numClasses);

        const DataSplit& split = data.train;
        const int64_t per = split.sampleShape.numel();
        const int64_t shown = std::min<int64_t>(maxSamples, split.count);
        auto labelOf = [&](int64_t i) {
            const int32_t l = split.labels[size_t(i)];
            return l >= 0 && l < p.classNames.size() ? p.classNames[l] : QString::number(l);
        };
        if (settings.kind == DatasetKind::Text) {
            const bool words = settings.tokenizer == Tokenizer::Word;
            for (int64_t i = 0; i < shown; ++i) {
                QString text;
                for (int64_t t = 0; t < per; ++t) {
                    const auto id = int64_t(std::lround(split.inputs[size_t(i * per + t)]));
                    if (id == 0) continue;  // padding
                    const QString token = id > 0 && id < int64_t(data.vocabulary.size())
                                              ? QString::fromStdString(data.vocabulary[size_t(id)])
                                              : QStringLiteral("\u2047");
                    if (words && !text.isEmpty()) text += QLatin1Char(' ');
                    text += token;
                }
                // SentencePiece marks a piece that starts a word with U+2581; shown as the space it stands for.
                if (settings.tokenizer == Tokenizer::SentencePiece)
                    text = text.replace(QChar(0x2581), QLatin1Char(' ')).trimmed();
                p.texts << text;
                p.labels << labelOf(i);
            }
            // Lengths in quarters of max_tokens up to twice it; the texts past max_tokens are cut.
            const int64_t q = std::max<int64_t>(1, (settings.maxTokens + 3) / 4);
            std::vector<qint64> buckets(9, 0);
            for (int64_t n : data.textLengths) buckets[size_t(std::min<int64_t>(8, n == 0 ? 0 : (n - 1) / q))]++;
            for (size_t k = 0; k < buckets.size(); ++k) {
                const int64_t lo = int64_t(k) * q + 1, hi = int64_t(k + 1) * q;
                const QString range =
                    k + 1 == buckets.size() ? tr("> %1").arg(lo - 1) : QStringLiteral("%1-%2").arg(lo).arg(hi);
                p.textLengthCounts.push_back({lo > settings.maxTokens ? range + tr(" (cut)") : range, buckets[k]});
            }
            while (!p.textLengthCounts.isEmpty() && p.textLengthCounts.back().second == 0)
                p.textLengthCounts.pop_back();  // no empty ranges past the longest text
        } else if (isImageShape(split.sampleShape)) {
            // A folder lists class by class: show the classes in turn, so every class has thumbnails.
            std::vector<std::vector<int64_t>> byClass(size_t(std::max(1, data.numClasses)));
            for (int64_t i = 0; i < split.count; ++i) {
                const auto l = size_t(std::max(0, split.labels[size_t(i)]));
                if (l < byClass.size()) byClass[l].push_back(i);
            }
            std::vector<int64_t> order;
            for (size_t k = 0; int64_t(order.size()) < shown; ++k) {
                bool any = false;
                for (const std::vector<int64_t>& rows : byClass)
                    if (k < rows.size() && int64_t(order.size()) < shown) {
                        order.push_back(rows[k]);
                        any = true;
                    }
                if (!any) break;
            }
            if (settings.kind != DatasetKind::ImageFolder) {
                order.resize(size_t(shown));
                std::iota(order.begin(), order.end(), 0);
            }
            for (int64_t i : order) {
                p.images << renderSample(split.inputs.data() + i * per, split.sampleShape);
                p.labels << labelOf(i);
            }
        } else {
            const int64_t columns = std::min<int64_t>(per, 64);
            for (int64_t c = 0; c < columns; ++c) p.columns << QStringLiteral("x%1").arg(c);
            for (int64_t i = 0; i < shown; ++i) {
                QStringList row;
                for (int64_t c = 0; c < columns; ++c) row << QString::number(split.inputs[size_t(i * per + c)], 'g', 4);
                p.rows << row;
                p.labels << labelOf(i);
            }
        }
    } catch (const std::exception& e) {
        p.error = QString::fromStdString(e.what());
    }
    return p;
}

void DatasetPanel::showPreview(const DatasetPreview& preview) {
    m_previewButton->setEnabled(true);
    // Edited while it loaded: a newer one follows.
    if (!(m_doc->project().dataset == m_previewed)) m_autoPreview->start();
    if (!preview.error.isEmpty()) {
        m_previewStatus->setText(
            QStringLiteral("<span style='color:#b00020'>%1</span>").arg(preview.error.toHtmlEscaped()));
        emit previewReady();
        return;
    }
    m_preview = preview;
    m_previewStatus->setText(preview.skipped.isEmpty()
                                 ? tr("Loaded.")
                                 : tr("Loaded; %n file(s) skipped:", nullptr, int(preview.skipped.size())) +
                                       QLatin1Char('\n') +
                                       QStringList(preview.skipped.mid(0, 8)).join(QLatin1Char('\n')) +
                                       (preview.skipped.size() > 8 ? QStringLiteral("\n...") : QString()));
    m_description->setText(
        tr("%1. Sample shape %2; showing the first %n training sample(s).", nullptr,
           int(std::max({preview.images.size(), preview.rows.size(), preview.texts.size()})))
            .arg(preview.description, preview.sampleShape) +
        (preview.imageSizes.size() > 1
             ? QLatin1Char('\n') + tr("Image sizes vary (width x height: files): %1%2")
                                       .arg(QStringList(preview.imageSizes.mid(0, 8)).join(", "),
                                            preview.imageSizes.size() > 8 ? ", ..." : "")
         : preview.imageSizes.size() == 1
             ? QLatin1Char('\n') + tr("Every image is %1.").arg(preview.imageSizes[0].section(':', 0, 0))
             : QString()));

    m_imageGrid->clear();
    m_table->clear();
    m_textList->clear();
    if (!preview.images.isEmpty()) {
        for (qsizetype i = 0; i < preview.images.size(); ++i) {
            const QImage scaled = preview.images[i].scaled(56, 56, Qt::KeepAspectRatio, Qt::FastTransformation);
            m_imageGrid->addItem(new QListWidgetItem(QIcon(QPixmap::fromImage(scaled)), preview.labels.value(i)));
        }
        m_sampleViews->setCurrentWidget(m_imageGrid);
    } else if (!preview.texts.isEmpty()) {
        for (qsizetype i = 0; i < preview.texts.size(); ++i)
            m_textList->addItem(QStringLiteral("[%1] %2").arg(preview.labels.value(i), preview.texts[i]));
        m_sampleViews->setCurrentWidget(m_textList);
    } else {
        m_table->setColumnCount(int(preview.columns.size()) + 1);
        m_table->setRowCount(int(preview.rows.size()));
        m_table->setHorizontalHeaderLabels(QStringList{tr("label")} + preview.columns);
        for (int r = 0; r < preview.rows.size(); ++r) {
            m_table->setItem(r, 0, new QTableWidgetItem(preview.labels.value(r)));
            for (int c = 0; c < preview.rows[r].size(); ++c)
                m_table->setItem(r, c + 1, new QTableWidgetItem(preview.rows[r][c]));
        }
        m_table->resizeColumnsToContents();
        m_sampleViews->setCurrentWidget(m_table);
    }

    // Grouped bars: training and validation count per class.
    m_balance->clearPlottables();
    const int classes = int(preview.classNames.size());
    QVector<double> ticks(classes), train(classes), val(classes), trainX(classes), valX(classes);
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    for (int c = 0; c < classes; ++c) {
        ticks[c] = c;
        trainX[c] = c - 0.2;
        valX[c] = c + 0.2;
        train[c] = double(preview.trainPerClass.value(c));
        val[c] = double(preview.validationPerClass.value(c));
        ticker->addTick(c, preview.classNames[c]);
    }
    auto* trainBars = new QCPBars(m_balance->xAxis, m_balance->yAxis);
    trainBars->setName(tr("training (%1)").arg(preview.trainCount));
    trainBars->setWidth(0.4);
    trainBars->setBrush(QColor(31, 119, 180, 200));
    trainBars->setPen(Qt::NoPen);
    trainBars->setData(trainX, train, true);
    if (preview.validationCount > 0) {
        auto* valBars = new QCPBars(m_balance->xAxis, m_balance->yAxis);
        valBars->setName(tr("validation (%1)").arg(preview.validationCount));
        valBars->setWidth(0.4);
        valBars->setBrush(QColor(214, 39, 40, 200));
        valBars->setPen(Qt::NoPen);
        valBars->setData(valX, val, true);
    }
    m_balance->xAxis->setTicker(ticker);
    m_balance->xAxis->setTickLabelRotation(classes > 6 ? 30 : 0);
    m_balance->xAxis->setRange(-0.6, classes - 0.4);
    double top = 1;
    for (int c = 0; c < classes; ++c) top = std::max({top, train[c], val[c]});
    m_balance->yAxis->setRange(0, top * 1.15);
    m_balance->replot();
    showImageSizes(preview);

    if (m_doc->project().dataset == m_previewed) emit trainSampleCountKnown(preview.trainCount);
    emit previewReady();
}

void DatasetPanel::showImageSizes(const DatasetPreview& preview) {
    // Files per size, the most frequent first; past kSizeBars - 1 sizes the rest share an "other" bar.
    m_sizes->clearPlottables();
    const bool text = preview.imageSizeCounts.isEmpty() && !preview.textLengthCounts.isEmpty();
    const auto& sizes = text ? preview.textLengthCounts : preview.imageSizeCounts;
    m_sizesTitle->setText(text ? tr("Training text lengths (tokens)") : tr("Image sizes (width x height)"));
    m_sizes->yAxis->setLabel(text ? tr("texts") : tr("files"));
    m_sizes->setVisible(sizes.size() > 1);
    if (sizes.size() <= 1) return;
    const qsizetype shown = sizes.size() > kSizeBars ? kSizeBars - 1 : sizes.size();
    QVector<double> x, counts;
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    for (qsizetype i = 0; i < shown; ++i) {
        x << double(i);
        counts << double(sizes[i].second);
        ticker->addTick(double(i), sizes[i].first);
    }
    if (shown < sizes.size()) {
        qint64 rest = 0;
        for (qsizetype i = shown; i < sizes.size(); ++i) rest += sizes[i].second;
        x << double(shown);
        counts << double(rest);
        ticker->addTick(double(shown), tr("%1 other sizes").arg(sizes.size() - shown));  // at least 2
    }
    auto* bars = new QCPBars(m_sizes->xAxis, m_sizes->yAxis);
    bars->setWidth(0.7);
    bars->setBrush(QColor(44, 160, 44, 200));
    bars->setPen(Qt::NoPen);
    bars->setData(x, counts, true);
    m_sizes->xAxis->setTicker(ticker);
    // Down to the left, so that the last label stays inside the chart.
    m_sizes->xAxis->setTickLabelRotation(x.size() > 6 ? -30 : 0);
    m_sizes->yAxis->ticker()->setTickCount(3);
    m_sizes->xAxis->setRange(-0.6, double(x.size()) - 0.4);
    m_sizes->yAxis->setRange(0, *std::max_element(counts.begin(), counts.end()) * 1.15);
    m_sizes->replot();
}

}  // namespace strata::ui
