// SaliencyView: the Grad-CAM overlay's controls and drawing, the token saliency strip, and their worker jobs.
#include "ui/SaliencyView.h"

#include <QCheckBox>
#include <QColor>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <exception>

#include <QtConcurrent/QtConcurrentRun>

#include "core/backend/BackendRegistry.h"
#include "core/export/ExportModel.h"
#include "core/infer/Saliency.h"

namespace strata::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// A heat colour map (blue, cyan, green, yellow, red) for a value in 0..1.
QColor heat(float v) {
    const auto ramp = [v](float centre) { return std::clamp(1.5f - std::abs(4.0f * v - centre), 0.0f, 1.0f); };
    return QColor::fromRgbF(ramp(3), ramp(2), ramp(1));
}

}  // namespace

// The model a view explains, compiled for saliency by the first job that needs it; used by one job at a time.
struct SaliencyEngine {
    std::shared_ptr<const ExportModel> file;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<SaliencyModel> model;

    SaliencyModel& compiled() {
        if (!model) {
            backend = backendRegistry().create(Device::cpu());
            model = std::make_unique<SaliencyModel>(*file, *backend);
        }
        return *model;
    }
};

struct SaliencyView::Job {
    quint64 id = 0;
    std::shared_ptr<SaliencyEngine> engine;
    bool text = false;
    std::vector<float> input;
    int classIndex = 0;
    std::string layer;
    GradCam cam;
    TokenSaliency tokens;
    QString error;
};

SaliencyView::SaliencyView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("saliencyView"));
    m_watcher = new QFutureWatcher<void>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, &SaliencyView::finished);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_toggle = new QCheckBox(tr("Grad-CAM"), this);
    m_toggle->setObjectName(QStringLiteral("gradCamToggle"));
    m_opacity = new QSlider(Qt::Horizontal, this);
    m_opacity->setObjectName(QStringLiteral("gradCamOpacity"));
    m_opacity->setRange(10, 90);
    m_opacity->setValue(55);
    m_opacity->setToolTip(tr("Opacity of the overlay"));
    row->addWidget(m_toggle);
    row->addWidget(m_opacity, 1);
    layout->addLayout(row);
    auto* form = new QFormLayout;
    form->setContentsMargins(0, 0, 0, 0);
    m_class = new QComboBox(this);
    m_class->setObjectName(QStringLiteral("gradCamClass"));
    m_class->setToolTip(tr("The class whose evidence is shown"));
    m_layer = new QComboBox(this);
    m_layer->setObjectName(QStringLiteral("gradCamLayer"));
    m_layer->setToolTip(tr("The convolution whose feature map is weighed (its activation, when one follows it)"));
    form->addRow(tr("Class:"), m_class);
    form->addRow(tr("Layer:"), m_layer);
    layout->addLayout(form);
    m_caption = new QLabel(this);
    m_caption->setObjectName(QStringLiteral("gradCamCaption"));
    m_caption->setWordWrap(true);
    m_caption->setStyleSheet(QStringLiteral("QLabel { color: #555; font-size: small; }"));
    // Room for three lines: a wrapped label in this fixed-width column is otherwise given one.
    m_caption->setMinimumHeight(3 * m_caption->fontMetrics().lineSpacing());
    m_caption->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    layout->addWidget(m_caption);

    m_tokens = new QLabel;  // placed (and parented) by the host
    m_tokens->setObjectName(QStringLiteral("predictSaliency"));
    m_tokens->setWordWrap(true);
    m_tokens->setTextFormat(Qt::RichText);
    m_tokens->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_tokens->setToolTip(
        tr("Text models: each token shaded by the size of the predicted class score's gradient at its embedding "
           "vector (the darkest: the score moves most with that token)"));
    m_tokens->hide();

    connect(m_toggle, &QCheckBox::toggled, this, [this] {
        m_class->setEnabled(m_toggle->isChecked());
        m_layer->setEnabled(m_toggle->isChecked());
        request();
    });
    connect(m_class, &QComboBox::currentIndexChanged, this, [this] { request(); });
    connect(m_layer, &QComboBox::currentIndexChanged, this, [this] { request(); });
    connect(m_opacity, &QSlider::valueChanged, this, [this] { compose(); });
    setModel(nullptr, {}, false);
}

SaliencyView::~SaliencyView() {
    m_watcher->waitForFinished();
    if (!m_tokens->parent()) delete m_tokens;
}

// Busy from the start of a job to its finished() call: the future may be done before its signal arrives.
bool SaliencyView::isBusy() const { return m_job != nullptr; }

void SaliencyView::setModel(std::shared_ptr<const ExportModel> model, const QStringList& classNames, bool text) {
    ++m_latest;  // a job of the previous model is stale
    m_engine.reset();
    if (model) {
        m_engine = std::make_shared<SaliencyEngine>();
        m_engine->file = std::move(model);
    }
    // A text model without an Embedding (no token vectors to explain) shows no strip; a model whose outputs are
    // not class scores (regression, image to image) neither a strip nor a map.
    m_text = text;
    if (text && m_engine && !takesTokens(m_engine->file->project.graph)) m_engine.reset();
    const TaskKind task = m_engine ? m_engine->file->project.dataset.task : TaskKind::Classification;
    if (task != TaskKind::Classification && task != TaskKind::MultiLabel) m_engine.reset();
    m_input.clear();
    m_picture = QImage();
    m_predicted = -1;
    m_words.clear();
    m_map.clear();
    m_shownClass = -1;
    m_shownLayer.clear();
    m_composed = QImage();
    m_error.clear();
    m_caption->clear();
    m_tokens->clear();
    m_tokens->hide();

    const QSignalBlocker classes(m_class), layers(m_layer);
    m_class->clear();
    m_layer->clear();
    m_class->addItem(tr("predicted class"), -1);
    for (int k = 0; k < classNames.size(); ++k) m_class->addItem(classNames[k], k);
    if (m_engine)
        for (const std::string& name : gradCamLayerNames(m_engine->file->project.graph)) m_layer->addItem(q(name));
    m_layer->setCurrentIndex(m_layer->count() - 1);  // the last convolution: Grad-CAM's usual choice
    const bool convolutional = m_layer->count() > 0;
    m_toggle->setEnabled(convolutional);
    const QString tip =
        tr("Overlay where the chosen class's evidence lies: the class score's gradient at a "
           "convolution's feature map weighs its channels (Grad-CAM); red is most, blue least");
    m_toggle->setToolTip(convolutional ? tip : tip + tr("\nThis model has no Conv2D layer: no feature map to weigh."));
    m_class->setEnabled(m_toggle->isChecked());
    m_layer->setEnabled(m_toggle->isChecked());
    setVisible(m_engine && !text);
}

void SaliencyView::setSample(std::vector<float> input, const QImage& picture, int predicted,
                             std::vector<std::string> words) {
    m_input = std::move(input);
    m_picture = picture;
    m_predicted = predicted;
    m_words = std::move(words);
    request();
}

int SaliencyView::classToExplain() const {
    const int chosen = m_class->currentData().toInt();
    return m_text || chosen < 0 ? m_predicted : chosen;
}

void SaliencyView::request() {
    ++m_latest;
    m_map.clear();
    if (!m_engine || m_input.empty() || classToExplain() < 0) return;
    if (!m_text && !m_toggle->isChecked()) {
        m_caption->clear();
        compose();  // the plain picture
        return;
    }
    if (isBusy()) {
        m_pending = true;  // started when the running job ends; its result is dropped
        return;
    }
    m_pending = false;
    auto job = std::make_shared<Job>();
    job->id = m_latest;
    job->engine = m_engine;
    job->text = m_text;
    job->input = m_input;
    job->classIndex = classToExplain();
    job->layer = m_layer->currentText().toStdString();
    m_job = job;
    m_watcher->setFuture(QtConcurrent::run([job] {
        try {
            SaliencyModel& model = job->engine->compiled();
            if (job->text)
                job->tokens = model.tokenSaliency(job->input.data(), job->classIndex);
            else
                job->cam = model.gradCam(job->input.data(), job->classIndex, job->layer);
        } catch (const std::exception& e) {
            job->error = q(e.what());
        }
    }));
}

void SaliencyView::finished() {
    const std::shared_ptr<Job> job = std::move(m_job);
    if (m_pending) {
        request();
        return;
    }
    if (!job || job->id != m_latest || job->engine != m_engine) return;
    const QString className = m_class->itemText(m_class->findData(job->classIndex));
    m_error = job->error;
    if (job->text) {
        QString html;
        if (!m_error.isEmpty()) {
            html = tr("<b>Saliency</b>: <span style='color:#b00020'>%1</span>").arg(m_error.toHtmlEscaped());
        } else {
            const TokenSaliency& t = job->tokens;
            html = tr("<b>Saliency</b> (gradient at %1, for %2): ")
                       .arg(q(t.embeddingNode).toHtmlEscaped(), className.toHtmlEscaped());
            const size_t n = std::min(m_words.size(), t.values.size());
            for (size_t i = 0; i < n; ++i) {
                const double level = t.isToken[i] ? std::abs(double(t.values[i])) : 0.0;
                html += QStringLiteral("<span style='background-color:rgba(40,110,220,%1)'>%2</span> ")
                            .arg(0.06 + 0.8 * level, 0, 'f', 2)
                            .arg(q(m_words[i]).toHtmlEscaped());
            }
        }
        m_tokens->setText(html.trimmed());
        m_tokens->setVisible(true);
        m_shownClass = job->classIndex;
        emit saliencyReady();
        return;
    }
    if (!m_error.isEmpty()) {
        m_caption->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(m_error.toHtmlEscaped()));
        compose();
        emit saliencyReady();
        return;
    }
    const GradCam& cam = job->cam;
    m_map = cam.map;
    m_mapWidth = int(cam.width);
    m_mapHeight = int(cam.height);
    m_shownClass = job->classIndex;
    m_shownLayer = q(cam.layer);
    const QString at = cam.activationNode == cam.layer
                           ? q(cam.layer).toHtmlEscaped()
                           : tr("%1 (after %2)").arg(q(cam.activationNode), q(cam.layer)).toHtmlEscaped();
    m_caption->setText(cam.empty ? tr("No positive evidence for %1 in %2.").arg(className.toHtmlEscaped(), at)
                                 : tr("Evidence for <b>%1</b> in %2.").arg(className.toHtmlEscaped(), at));
    compose();
    emit saliencyReady();
}

void SaliencyView::compose() {
    if (m_text || m_picture.isNull()) return;
    QImage base = m_picture.scaled(m_displaySize, Qt::KeepAspectRatio, Qt::FastTransformation)
                      .convertToFormat(QImage::Format_ARGB32_Premultiplied);
    const bool overlay = m_toggle->isChecked() && !m_map.empty() &&
                         size_t(m_mapWidth) * size_t(m_mapHeight) == m_map.size() && m_mapWidth > 0;
    if (overlay) {
        // Colour and opacity both rise with the map, so the picture stays readable where there is no evidence.
        QImage heatImage(m_mapWidth, m_mapHeight, QImage::Format_ARGB32);
        const double opacity = m_opacity->value() / 100.0;
        for (int y = 0; y < m_mapHeight; ++y) {
            auto* line = reinterpret_cast<QRgb*>(heatImage.scanLine(y));
            for (int x = 0; x < m_mapWidth; ++x) {
                const float v = m_map[size_t(y) * size_t(m_mapWidth) + size_t(x)];
                QColor c = heat(v);
                c.setAlphaF(float(opacity * (0.35 + 0.65 * double(v))));
                line[x] = c.rgba();
            }
        }
        QPainter p(&base);
        p.setRenderHint(QPainter::SmoothPixmapTransform);
        p.drawImage(base.rect(), heatImage);
    }
    m_composed = base;
    emit pictureChanged(m_composed);
}

QString SaliencyView::caption() const { return m_caption->text(); }

QString SaliencyView::tokenText() const { return m_tokens->isHidden() ? QString() : m_tokens->text(); }

}  // namespace strata::ui
