// ProjectorPanel: see ProjectorPanel.h.
#include "ui/ProjectorPanel.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPixmap>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <exception>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/infer/Embedding.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/Pca.h"
#include "core/infer/Tsne.h"
#include "core/train/Checkpoint.h"
#include "ui/PredictPanel.h"
#include "ui/RawImage.h"
#include "ui/RunPicker.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

// What a job shares with the GUI thread while it runs: its phase, progress and cancel flag.
struct ProjectorJob {
    std::atomic<bool> cancel{false};
    std::atomic<int> phase{0};  // 0 loading, 1 embedding, 2 reducing
    std::atomic<int> done{0}, total{0};
};

// A model's embeddings of the chosen samples, with what a point shows: kept between projections.
struct ProjectorEmbedding {
    QString source, project;
    int limit = 0;
    QString layer, splitName;
    QStringList classNames;
    std::vector<qint64> samples;  // validation indices
    std::vector<int32_t> labels, predicted;
    int64_t dim = 0;
    std::vector<float> rows;  // samples x dim
    QVector<QImage> thumbnails;
    QStringList texts;
};

struct ProjectorResult {
    std::shared_ptr<const ProjectorEmbedding> embedding;
    std::vector<float> coords;  // samples x 2
    QString xLabel, yLabel, error;
    bool cancelled = false;
};

namespace {

constexpr int kBatch = 128;
constexpr double kPickRadius = 8;  // pixels

QString q(const std::string& s) { return QString::fromStdString(s); }

struct Cancelled {};

std::shared_ptr<ProjectorEmbedding> embed(const QString& source, const QString& project, int limit, ProjectorJob& job) {
    auto e = std::make_shared<ProjectorEmbedding>();
    e->source = source;
    e->project = project;
    e->limit = limit;
    std::string file = source.toStdString();
    if (QFileInfo(source).isDir()) file = resolveCheckpointPath(file);
    const ExportModel model = loadModelFile(file);
    const std::unique_ptr<Backend> backend = backendRegistry().create(Device::cpu());
    const std::unique_ptr<Model> compiled = compileExportModel(model, *backend);
    const int classes = int(compiled->outputShape().numel());
    for (int k = 0; k < classes; ++k)
        e->classNames << (size_t(k) < model.classNames.size() && !model.classNames[size_t(k)].empty()
                              ? q(model.classNames[size_t(k)])
                              : ProjectorPanel::tr("class %1").arg(k));
    DatasetBundle data = loadDataset(model.project.dataset, project.toStdString());
    const bool validation = data.validation.count > 0;
    const DataSplit& split = validation ? data.validation : data.train;
    e->splitName = validation ? ProjectorPanel::tr("validation") : ProjectorPanel::tr("training");
    if (split.streamed())
        throw std::runtime_error(
            "the data set is streamed from disk; the projector needs it in memory (turn off "
            "streaming in the Dataset panel)");
    const int64_t per = split.sampleShape.numel();
    if (per != compiled->inputShape().numel())
        throw std::runtime_error("the data set's samples " + split.sampleShape.toString() +
                                 " do not fit the model input " + compiled->inputShape().toString());
    // Evenly spread over the split, so every class appears in its share.
    const int64_t n = std::min<int64_t>(limit, split.count);
    for (int64_t i = 0; i < n; ++i) e->samples.push_back(i * split.count / n);
    job.phase = 1;
    job.total = int(n);
    std::vector<float> inputs;
    for (int64_t start = 0; start < n; start += kBatch) {
        if (job.cancel) throw Cancelled{};
        const int64_t m = std::min<int64_t>(kBatch, n - start);
        inputs.assign(size_t(m * per), 0.0f);
        for (int64_t i = 0; i < m; ++i)
            std::copy_n(split.inputs.begin() + e->samples[size_t(start + i)] * per, per, inputs.begin() + i * per);
        const Embeddings part = embedSamples(*compiled, inputs.data(), m, kBatch);
        if (e->dim == 0) {
            e->dim = part.dim;
            e->layer = q(part.layer);
        }
        e->rows.insert(e->rows.end(), part.rows.begin(), part.rows.end());
        e->predicted.insert(e->predicted.end(), part.predictions.predicted.begin(), part.predictions.predicted.end());
        job.done = int(start + m);
    }
    const bool text = model.project.dataset.kind == DatasetKind::Text && !model.vocabulary.empty();
    for (const qint64 s : e->samples) {
        e->labels.push_back(split.labels[size_t(s)]);
        std::vector<float> raw(split.inputs.begin() + s * per, split.inputs.begin() + (s + 1) * per);
        if (text) {
            QStringList words;
            for (const float id : raw) {
                if (id == 0.0f) break;  // padding ends the sample
                const auto k = static_cast<size_t>(id);
                words << (k < model.vocabulary.size() ? q(model.vocabulary[k]) : QStringLiteral("?"));
            }
            e->texts << words.join(QLatin1Char(' '));
        } else {
            undoNormalization(raw, data.normalization);
            e->thumbnails << rawToImage(raw.data(), split.sampleShape);
        }
    }
    return e;
}

std::shared_ptr<ProjectorResult> runJob(std::shared_ptr<const ProjectorEmbedding> cached, QString source,
                                        QString project, int limit, ProjectorPanel::Method method,
                                        const std::shared_ptr<ProjectorJob>& job) {
    auto r = std::make_shared<ProjectorResult>();
    try {
        if (!cached || cached->source != source || cached->project != project || cached->limit != limit)
            cached = embed(source, project, limit, *job);
        r->embedding = cached;
        const ProjectorEmbedding& e = *cached;
        const auto n = int64_t(e.samples.size());
        job->phase = 2;
        job->done = 0;
        if (method == ProjectorPanel::Method::Pca) {
            if (n < 2) throw std::runtime_error("PCA needs at least 2 samples");
            const int components = e.dim >= 2 ? 2 : 1;
            const PcaResult p = pca(e.rows.data(), n, e.dim, components);
            r->coords.assign(size_t(n * 2), 0.0f);
            for (int64_t i = 0; i < n; ++i)
                for (int c = 0; c < components; ++c)
                    r->coords[size_t(i * 2 + c)] = p.projected[size_t(i * components + c)];
            auto share = [&](int c) {
                return p.totalVariance > 0 ? 100.0 * p.variances[size_t(c)] / p.totalVariance : 0.0;
            };
            r->xLabel = ProjectorPanel::tr("PC1 (%1% of the variance)").arg(share(0), 0, 'f', 1);
            r->yLabel = components > 1 ? ProjectorPanel::tr("PC2 (%1% of the variance)").arg(share(1), 0, 'f', 1)
                                       : ProjectorPanel::tr("(one dimension)");
        } else {
            if (n < 4) throw std::runtime_error("t-SNE needs at least 4 samples");
            TsneOptions o;
            o.perplexity = std::min(30.0, double(n - 1) / 3.0);
            job->total = o.iterations;
            o.progress = [&job](int iteration) {
                job->done = iteration + 1;
                return !job->cancel.load();
            };
            r->coords = tsne(e.rows.data(), n, e.dim, o);
            if (job->cancel) throw Cancelled{};
            r->xLabel = ProjectorPanel::tr("t-SNE 1");
            r->yLabel = ProjectorPanel::tr("t-SNE 2 (perplexity %1)").arg(o.perplexity, 0, 'g', 3);
        }
    } catch (const Cancelled&) {
        r->cancelled = true;
    } catch (const std::exception& ex) {
        r->error = q(ex.what());
    }
    return r;
}

}  // namespace

ProjectorPanel::ProjectorPanel(ProjectDocument* doc, PredictPanel* predict, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_predict(predict),
      m_method(new QComboBox(this)),
      m_limit(new QSpinBox(this)),
      m_compute(new QPushButton(tr("Compute"), this)),
      m_cancel(new QPushButton(tr("Cancel"), this)),
      m_progress(new QProgressBar(this)),
      m_status(new QLabel(this)),
      m_error(new QLabel(this)),
      m_thumb(new QLabel(this)),
      m_detail(new QLabel(this)),
      m_plot(new QCustomPlot(this)),
      m_poll(new QTimer(this)) {
    setObjectName(QStringLiteral("projectorPanel"));
    m_method->setObjectName(QStringLiteral("projectorMethod"));
    m_method->addItems({tr("PCA"), tr("t-SNE")});
    m_method->setToolTip(
        tr("PCA: the two directions of largest variance (fast, linear). t-SNE: keeps neighbours "
           "together (exact, O(n²) a step: keep the sample count to a few thousand)."));
    m_limit->setRange(4, 20000);
    m_limit->setValue(1000);
    m_limit->setSuffix(tr(" samples"));
    m_limit->setToolTip(tr("At most this many validation samples, evenly spread over the split"));
    m_cancel->setEnabled(false);
    m_progress->setVisible(false);
    m_status->setWordWrap(true);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color:#b00020"));
    m_error->hide();
    m_thumb->setFixedSize(112, 112);
    m_thumb->setAlignment(Qt::AlignCenter);
    m_detail->setWordWrap(true);
    m_detail->setTextFormat(Qt::RichText);
    m_detail->setMinimumWidth(160);
    m_detail->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_detail->setText(tr("Hover over a point to see its sample; click to select it."));

    m_plot->legend->setVisible(false);  // until there are classes to name
    m_plot->legend->setFont(QFont(font().family(), 8));
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    m_plot->setMouseTracking(true);
    m_plot->installEventFilter(this);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Method"), this));
    top->addWidget(m_method);
    top->addWidget(m_limit);
    top->addWidget(m_compute);
    top->addWidget(m_cancel);
    top->addWidget(m_progress, 1);
    top->addStretch(0);
    auto* side = new QVBoxLayout;
    side->addWidget(m_thumb);
    side->addWidget(m_detail, 1);
    auto* middle = new QHBoxLayout;
    middle->addWidget(m_plot, 1);
    middle->addLayout(side);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(middle, 1);
    layout->addWidget(m_status);
    layout->addWidget(m_error);

    connect(m_compute, &QPushButton::clicked, this, &ProjectorPanel::compute);
    connect(m_cancel, &QPushButton::clicked, this, &ProjectorPanel::cancel);
    connect(m_method, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_points.isEmpty() || isComputing()) compute();
    });
    m_poll->setInterval(100);
    connect(m_poll, &QTimer::timeout, this, [this] {
        if (!m_job) return;
        const int phase = m_job->phase, done = m_job->done, total = m_job->total;
        m_progress->setRange(0, phase == 0 ? 0 : std::max(total, 1));
        m_progress->setValue(done);
        m_progress->setFormat(phase == 0   ? tr("loading the model and data")
                              : phase == 1 ? tr("embedding %v of %m samples")
                                           : tr("%1: %v of %m").arg(m_method->currentText()));
    });
    if (m_predict) {
        connect(m_predict, &PredictPanel::modelLoaded, this, [this](bool ok) {
            m_stale = true;
            if (ok && isVisible()) compute();
        });
        // Without a model in the Predict dock the picker's run is projected: a new run replaces it.
        connect(m_predict->runPicker(), &RunPicker::runChosen, this, [this] {
            if (m_predict->hasModel() || !m_fixedSource.isEmpty()) return;
            m_stale = true;
            if (isVisible()) compute();
        });
    }
    m_status->setText(tr("The penultimate layer's activations of the validation samples, in 2-D."));
}

ProjectorPanel::~ProjectorPanel() {
    if (m_job) m_job->cancel = true;
    for (QFutureWatcherBase* w : findChildren<QFutureWatcherBase*>()) w->waitForFinished();
}

void ProjectorPanel::setModelSource(const QString& modelPath, const QString& projectPath) {
    m_fixedSource = modelPath;
    m_fixedProject = projectPath;
    m_stale = true;
}

void ProjectorPanel::setMethod(Method method) { m_method->setCurrentIndex(method == Method::Tsne ? 1 : 0); }

ProjectorPanel::Method ProjectorPanel::method() const {
    return m_method->currentIndex() == 1 ? Method::Tsne : Method::Pca;
}

void ProjectorPanel::setSampleLimit(int limit) { m_limit->setValue(limit); }

int ProjectorPanel::sampleLimit() const { return m_limit->value(); }

QString ProjectorPanel::statusText() const { return m_status->text(); }

QString ProjectorPanel::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

QString ProjectorPanel::detailText() const { return m_detail->text(); }

// The Predict dock's model when it has one, else its picker's run (the newest with weights).
QString ProjectorPanel::currentSource(QString* projectPath, QString* why) const {
    if (!m_fixedSource.isEmpty()) {
        *projectPath = m_fixedProject;
        return m_fixedSource;
    }
    if (!m_predict || !m_doc) {
        *why = tr("No model to project.");
        return {};
    }
    *projectPath = m_doc->filePath();
    if (m_predict->hasModel()) return m_predict->modelSource();
    const std::optional<ProjectRun> run = m_predict->runPicker()->chosen();
    if (!run) {
        *why = m_predict->runPicker()->whyNone();
        if (why->isEmpty()) *why = tr("No run with weights: train the project first.");
        return {};
    }
    return run->checkpoint;
}

void ProjectorPanel::compute() {
    QString project, why;
    const QString source = currentSource(&project, &why);
    if (source.isEmpty()) {
        m_error->setText(why);
        m_error->show();
        emit failed(why);
        return;
    }
    m_error->hide();
    // The running job, if any, is cancelled; its result is dropped when it ends.
    if (m_job) m_job->cancel = true;
    m_job = std::make_shared<ProjectorJob>();
    const quint64 generation = ++m_generation;
    ++m_running;
    ++m_jobsStarted;
    setComputing(true);
    m_status->setText(tr("Projecting %1 with %2...").arg(QFileInfo(source).fileName(), m_method->currentText()));
    auto* watcher = new QFutureWatcher<std::shared_ptr<ProjectorResult>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        --m_running;
        finish(watcher->result(), generation);
        watcher->deleteLater();
    });
    watcher->setFuture(
        QtConcurrent::run(runJob, m_stale ? nullptr : m_emb, source, project, m_limit->value(), method(), m_job));
}

void ProjectorPanel::cancel() {
    if (m_job) m_job->cancel = true;
}

void ProjectorPanel::setComputing(bool on) {
    m_cancel->setEnabled(on);
    m_progress->setVisible(on);
    if (on) {
        m_progress->setRange(0, 0);
        m_poll->start();
    } else {
        m_poll->stop();
    }
}

void ProjectorPanel::finish(const std::shared_ptr<ProjectorResult>& r, quint64 generation) {
    if (generation != m_generation) return;  // a newer request replaced it
    setComputing(false);
    m_job.reset();
    if (r->cancelled) {
        m_status->setText(tr("Cancelled; the previous projection is still shown."));
        return;
    }
    if (!r->error.isEmpty()) {
        m_error->setText(tr("Could not project the model: %1").arg(r->error));
        m_error->show();
        emit failed(m_error->text());
        return;
    }
    m_emb = r->embedding;
    m_stale = false;
    const ProjectorEmbedding& e = *m_emb;
    m_classNames = e.classNames;
    m_points.clear();
    for (size_t i = 0; i < e.samples.size(); ++i)
        m_points.push_back(Point{r->coords[i * 2], r->coords[i * 2 + 1], e.samples[i], e.labels[i], e.predicted[i]});
    m_selected = m_hovered = -1;
    m_plot->xAxis->setLabel(r->xLabel);
    m_plot->yAxis->setLabel(r->yLabel);
    showPoints();
    int right = 0;
    for (const Point& p : std::as_const(m_points)) right += p.label == p.predicted ? 1 : 0;
    m_status->setText(tr("%1 %2 samples, layer '%3' (%4 values each) by %5; %6 of them predicted right.")
                          .arg(m_points.size())
                          .arg(e.splitName, e.layer)
                          .arg(e.dim)
                          .arg(m_method->currentText())
                          .arg(right));
    emit computed();
}

void ProjectorPanel::showPoints() {
    m_plot->clearGraphs();
    const int classes = int(m_classNames.size());
    for (int k = 0; k < classes; ++k) {
        QCPGraph* g = m_plot->addGraph();
        // Ten distinct colours (Tableau's), then hues around the wheel.
        static const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
        const QColor colour = k < 10 ? QColor(kPalette[k]) : QColor::fromHsv((k * 47) % 360, 200, 210);
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, colour, colour, 5));
        g->setName(m_classNames[k]);
        QVector<double> xs, ys;
        for (const Point& p : std::as_const(m_points))
            if (p.label == k) {
                xs << p.x;
                ys << p.y;
            }
        g->setData(xs, ys);
    }
    m_highlight = m_plot->addGraph();
    m_highlight->setLineStyle(QCPGraph::lsNone);
    m_highlight->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 2), Qt::NoBrush, 12));
    m_highlight->removeFromLegend();
    m_plot->legend->setVisible(classes > 0);
    m_plot->rescaleAxes();
    m_plot->xAxis->scaleRange(1.08);
    m_plot->yAxis->scaleRange(1.08);
    m_plot->replot();
}

QPoint ProjectorPanel::pixelOf(int point) const {
    const Point& p = m_points[point];
    return QPoint(int(std::lround(m_plot->xAxis->coordToPixel(p.x))),
                  int(std::lround(m_plot->yAxis->coordToPixel(p.y))));
}

int ProjectorPanel::pointAt(const QPoint& pixel) const {
    int best = -1;
    double bestDistance = kPickRadius * kPickRadius;
    for (int i = 0; i < m_points.size(); ++i) {
        const double dx = m_plot->xAxis->coordToPixel(m_points[i].x) - pixel.x();
        const double dy = m_plot->yAxis->coordToPixel(m_points[i].y) - pixel.y();
        if (dx * dx + dy * dy <= bestDistance) {
            bestDistance = dx * dx + dy * dy;
            best = i;
        }
    }
    return best;
}

void ProjectorPanel::showDetail(int point) {
    if (point < 0 || !m_emb) return;
    const Point& p = m_points[point];
    auto name = [this](int k) { return k >= 0 && k < m_classNames.size() ? m_classNames[k] : QString::number(k); };
    QString html = tr("<b>%1 sample %2</b><br>true class: %3<br>predicted: %4")
                       .arg(m_emb->splitName)
                       .arg(p.sample)
                       .arg(name(p.label).toHtmlEscaped(), name(p.predicted).toHtmlEscaped());
    if (p.label != p.predicted) html += tr("<br><span style='color:#b00020'>misclassified</span>");
    if (point < m_emb->texts.size()) html += QStringLiteral("<br><i>%1</i>").arg(m_emb->texts[point].toHtmlEscaped());
    m_detail->setText(html);
    if (point < m_emb->thumbnails.size() && !m_emb->thumbnails[point].isNull())
        m_thumb->setPixmap(QPixmap::fromImage(m_emb->thumbnails[point].scaled(112, 112, Qt::KeepAspectRatio)));
    else
        m_thumb->clear();
}

bool ProjectorPanel::eventFilter(QObject* watched, QEvent* event) {
    if (watched == m_plot && (event->type() == QEvent::MouseMove || event->type() == QEvent::MouseButtonPress)) {
        const auto* mouse = static_cast<QMouseEvent*>(event);
        const int i = pointAt(mouse->position().toPoint());
        if (event->type() == QEvent::MouseMove) {
            if (i >= 0 && i != m_hovered) {
                m_hovered = i;
                showDetail(i);
                QToolTip::showText(mouse->globalPosition().toPoint(), m_detail->text(), m_plot);
            } else if (i < 0 && m_hovered >= 0) {
                m_hovered = -1;
                if (m_selected >= 0) showDetail(m_selected);
            }
        } else if (i >= 0 && mouse->button() == Qt::LeftButton) {
            m_selected = i;
            showDetail(i);
            m_highlight->setData(QVector<double>{m_points[i].x}, QVector<double>{m_points[i].y});
            m_plot->replot();
            emit sampleSelected(m_points[i].sample);
        }
    }
    return QWidget::eventFilter(watched, event);
}

void ProjectorPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    // Opening the dock projects the current model once; a closed dock computes nothing.
    if ((m_stale || m_points.isEmpty()) && !isComputing()) {
        QString project, why;
        if (!currentSource(&project, &why).isEmpty())
            compute();
        else if (m_points.isEmpty())
            m_status->setText(why);
    }
}

}  // namespace strata::ui
