// LrFinderDialog: see LrFinderDialog.h.
#include "ui/LrFinderDialog.h"

#include <QCloseEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>
#include <cmath>

#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

QCPItemStraightLine* verticalLine(QCustomPlot* plot, const QColor& color) {
    auto* line = new QCPItemStraightLine(plot);
    line->setPen(QPen(color, 1.5, Qt::DashLine));
    line->setVisible(false);
    return line;
}

void placeAt(QCPItemStraightLine* line, double x) {
    line->point1->setCoords(x, 0);
    line->point2->setCoords(x, 1);
    line->setVisible(std::isfinite(x));
}

}  // namespace

LrFinderDialog::LrFinderDialog(ProjectDocument* doc, QWidget* parent)
    : QDialog(parent),
      m_doc(doc),
      m_plot(new QCustomPlot(this)),
      m_status(new QLabel(this)),
      m_timer(new QTimer(this)) {
    setObjectName(QStringLiteral("lrFinderDialog"));
    setWindowTitle(tr("Find Learning Rate"));
    resize(720, 480);
    m_plot->setObjectName(QStringLiteral("lrFinderPlot"));
    m_plot->addGraph();
    m_plot->graph(0)->setName(tr("loss"));
    m_plot->graph(0)->setPen(QPen(QColor(160, 160, 200)));
    m_plot->addGraph();
    m_plot->graph(1)->setName(tr("smoothed"));
    m_plot->graph(1)->setPen(QPen(QColor(30, 90, 200), 2));
    m_plot->xAxis->setScaleType(QCPAxis::stLogarithmic);
    m_plot->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_plot->xAxis->setNumberFormat(QStringLiteral("eb"));
    m_plot->xAxis->setNumberPrecision(0);
    m_plot->xAxis->setLabel(tr("learning rate (log)"));
    m_plot->yAxis->setLabel(tr("training loss"));
    m_plot->legend->setVisible(true);
    m_steepestLine = verticalLine(m_plot, QColor(220, 60, 40));
    m_minimumLine = verticalLine(m_plot, QColor(40, 150, 60));

    m_applySteepest = new QPushButton(this);
    m_applySteepest->setObjectName(QStringLiteral("applySteepest"));
    m_applyMinimum = new QPushButton(this);
    m_applyMinimum->setObjectName(QStringLiteral("applyMinimum"));
    m_rerun = new QPushButton(tr("Run Again"), this);
    for (QPushButton* b : {m_applySteepest, m_applyMinimum}) b->setEnabled(false);
    m_applySteepest->setText(tr("Use steepest descent"));
    m_applyMinimum->setText(tr("Use minimum / 10"));
    m_applySteepest->setToolTip(
        tr("Set training.learning_rate to the rate where the smoothed loss falls fastest "
           "(red line); Edit > Undo takes it back."));
    m_applyMinimum->setToolTip(
        tr("Set training.learning_rate to a tenth of the rate at the smoothed loss's "
           "minimum (green line); Edit > Undo takes it back."));
    connect(m_applySteepest, &QPushButton::clicked, this, [this] { apply(m_result.suggestion.steepest); });
    connect(m_applyMinimum, &QPushButton::clicked, this, [this] { apply(m_result.suggestion.minOver10); });
    connect(m_rerun, &QPushButton::clicked, this, [this] { start(); });

    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    buttons->addWidget(m_applySteepest);
    buttons->addWidget(m_applyMinimum);
    buttons->addWidget(m_rerun);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_plot, 1);
    layout->addWidget(m_status);
    layout->addLayout(buttons);
    m_status->setWordWrap(true);
    m_status->setMinimumHeight(2 * m_status->fontMetrics().lineSpacing() + 4);

    // The plot takes the worker's points in batches, so a fast sweep never floods the event loop.
    m_timer->setInterval(100);
    connect(m_timer, &QTimer::timeout, this, &LrFinderDialog::takePoints);
    connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, [this] {
        m_timer->stop();
        takePoints();
        const Outcome o = m_watcher.result();
        m_rerun->setEnabled(true);
        if (!o.error.isEmpty()) {
            m_status->setText(tr("The sweep failed: %1").arg(o.error));
            emit failed(o.error);
            return;
        }
        m_result = o.result;
        showResult();
        emit finished();
    });
}

LrFinderDialog::~LrFinderDialog() {
    m_cancel = true;
    m_watcher.waitForFinished();
}

bool LrFinderDialog::start(const LrFindOptions& optionsIn) {
    if (m_watcher.isRunning()) return false;
    m_cancel = false;
    m_result = {};
    {
        QMutexLocker lock(&m_mutex);
        m_pending.clear();
    }
    m_plot->graph(0)->data()->clear();
    m_plot->graph(1)->data()->clear();
    placeAt(m_steepestLine, NAN);
    placeAt(m_minimumLine, NAN);
    m_plot->replot();
    for (QPushButton* b : {m_applySteepest, m_applyMinimum, m_rerun}) b->setEnabled(false);
    m_status->setText(tr("Sweeping the learning rate on a copy of the model..."));
    const Project project = m_doc->project();
    const std::string path = m_doc->filePath().toStdString();
    m_watcher.setFuture(QtConcurrent::run([this, project, path, options = optionsIn]() -> Outcome {
        Outcome o;
        try {
            std::unique_ptr<Backend> backend = backendRegistry().create(Device::parseFirst(project.training.device),
                                                                        backendOptionsFor(project.training));
            LrFindOptions withPoints = options;
            // Each raw point is handed over for the timer to plot (the smoothed curve comes with the result);
            // between steps the sweep sees a close as a stop.
            withPoints.progress = [this](int, double lr, double loss) {
                QMutexLocker lock(&m_mutex);
                m_pending.append({lr, loss, NAN});
                return !m_cancel.load();
            };
            o.result = findLearningRate(project, path, *backend, withPoints);
        } catch (const std::exception& e) {
            o.error = QString::fromStdString(e.what());
        }
        return o;
    }));
    m_timer->start();
    return true;
}

int LrFinderDialog::plottedPoints() const { return m_plot->graph(0)->dataCount(); }

void LrFinderDialog::takePoints() {
    QVector<LrFindPoint> points;
    {
        QMutexLocker lock(&m_mutex);
        points.swap(m_pending);
    }
    if (points.isEmpty()) return;
    for (const LrFindPoint& p : points)
        if (std::isfinite(p.loss)) m_plot->graph(0)->addData(p.learningRate, p.loss);
    m_plot->rescaleAxes();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void LrFinderDialog::showResult() {
    QVector<double> x, raw, smooth;
    for (const LrFindPoint& p : m_result.points) {
        x.append(p.learningRate);
        raw.append(p.loss);
        smooth.append(p.smoothedLoss);
    }
    m_plot->graph(0)->setData(x, raw, true);
    m_plot->graph(1)->setData(x, smooth, true);
    m_plot->rescaleAxes();
    // The raw loss at the end of a diverging sweep dwarfs the descent: the value axis follows the smoothed
    // curve up to a little above where it started.
    if (!smooth.isEmpty()) {
        const double lo =
            std::min(*std::min_element(smooth.begin(), smooth.end()), *std::min_element(raw.begin(), raw.end()));
        const double hi = std::max(smooth.front(), lo) * 1.3;
        m_plot->yAxis->setRange(lo - 0.05 * (hi - lo), hi);
    }
    const LrSuggestion& s = m_result.suggestion;
    placeAt(m_steepestLine, s.steepest);
    placeAt(m_minimumLine, s.minOver10);
    m_plot->replot();
    m_applySteepest->setEnabled(std::isfinite(s.steepest));
    m_applyMinimum->setEnabled(std::isfinite(s.minOver10));
    if (std::isfinite(s.steepest)) m_applySteepest->setText(tr("Use %1 (steepest)").arg(s.steepest, 0, 'g', 2));
    if (std::isfinite(s.minOver10)) m_applyMinimum->setText(tr("Use %1 (min / 10)").arg(s.minOver10, 0, 'g', 2));
    QString text = tr("%1 steps on %2, batch %3; the project's learning rate is %4.")
                       .arg(m_result.points.size())
                       .arg(QString::fromStdString(m_result.device))
                       .arg(m_result.batch)
                       .arg(m_doc->project().training.learningRate, 0, 'g', 3);
    if (m_result.stoppedEarly)
        text += QStringLiteral(" ") + tr("Stopped: %1.").arg(QString::fromStdString(m_result.stopReason));
    if (!std::isfinite(s.steepest)) text += QStringLiteral(" ") + tr("The loss never fell: no suggestion.");
    m_status->setText(text);
    layout()->activate();
}

void LrFinderDialog::apply(double learningRate) {
    if (!std::isfinite(learningRate) || learningRate <= 0) return;
    // Two significant digits: what the button shows is what the setting gets.
    const double rounded = QString::number(learningRate, 'g', 2).toDouble();
    TrainingSettings ts = m_doc->project().training;
    ts.learningRate = rounded;
    m_doc->setTrainingSettings(ts);
    m_status->setText(tr("training.learning_rate set to %1 (Edit > Undo takes it back).").arg(rounded, 0, 'g', 2));
}

void LrFinderDialog::closeEvent(QCloseEvent* event) {
    m_cancel = true;
    QDialog::closeEvent(event);
}

}  // namespace strata::ui
