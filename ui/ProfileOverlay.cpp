// ProfileOverlay: see ProfileOverlay.h.
#include "ui/ProfileOverlay.h"

#include <QHash>
#include <algorithm>

#include <QtConcurrent/QtConcurrentRun>

#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "ui/GraphScene.h"
#include "ui/NodeItem.h"

namespace strata::ui {

QString profileFigures(const LayerProfile& l, const Roofline& roofline) {
    const QString fwd =
        l.fused ? QStringLiteral("fused into the layer before") : QStringLiteral("%1 ms").arg(l.forwardMs, 0, 'f', 3);
    const QString bwd =
        l.absorbed ? QStringLiteral("done by the layer after") : QStringLiteral("%1 ms").arg(l.backwardMs, 0, 'f', 3);
    QString text =
        QStringLiteral("<b>%1%</b> of the step's compute<br>forward %2, backward %3<br>%4 GFLOP, %5 MB moved")
            .arg(100 * l.share, 0, 'f', 1)
            .arg(fwd, bwd)
            .arg(l.forwardGflop + l.backwardGflop, 0, 'g', 3)
            .arg(l.bytesMoved / 1e6, 0, 'f', 2);
    text += QStringLiteral("<br>%1 GFLOP/s, %2 GB/s").arg(l.gflops, 0, 'f', 1).arg(l.gbps, 0, 'f', 1);
    if (const double ms = l.forwardMs + l.backwardMs; ms > 0)
        text += QStringLiteral("<br>%1% in matrix products and convolutions")
                    .arg(100 * std::min(1.0, l.productMs / ms), 0, 'f', 0);
    if (roofline.peakGflops > 0 && roofline.peakGBps > 0 && l.bytesMoved > 0) {
        // Arithmetic intensity against the ridge point says which roof bounds the layer.
        const double intensity = (l.forwardGflop + l.backwardGflop) * 1e9 / l.bytesMoved;
        const double ridge = roofline.peakGflops / roofline.peakGBps;
        const double roof = std::min(roofline.peakGflops, intensity * roofline.peakGBps);
        text += QStringLiteral("<br>%1 FLOP/byte: %2-bound, %3% of its roof (%4 GFLOP/s)")
                    .arg(intensity, 0, 'f', 2)
                    .arg(intensity < ridge ? QStringLiteral("memory") : QStringLiteral("compute"))
                    .arg(roof > 0 ? 100 * l.gflops / roof : 0.0, 0, 'f', 0)
                    .arg(roof, 0, 'f', 1);
    }
    return text;
}

QString profileSummary(const ProfileReport& r) {
    const double step = std::max(1e-9, r.stepMs);
    return QStringLiteral(
               "Profile on %1, batch %2: step %3 ms = compute %4%, data wait %5%, framework overhead %6%; matrix "
               "products and convolutions %7% of the compute")
        .arg(QString::fromStdString(r.device))
        .arg(r.batch)
        .arg(r.stepMs, 0, 'f', 2)
        .arg(100 * std::min(r.computeMs, step) / step, 0, 'f', 0)
        .arg(100 * r.dataWaitMs / step, 0, 'f', 0)
        .arg(100 * r.overheadMs / step, 0, 'f', 0)
        .arg(r.computeMs > 0 ? 100 * std::min(1.0, r.productMs / r.computeMs) : 0.0, 0, 'f', 0);
}

void applyProfile(GraphScene* scene, const ProfileReport& report) {
    QHash<int, const LayerProfile*> byNode;
    for (const LayerProfile& l : report.layers) byNode.insert(l.node, &l);
    for (NodeItem* item : scene->nodeItems()) {
        const LayerProfile* l = byNode.value(item->id(), nullptr);
        if (l)
            item->setProfile(l->share, profileFigures(*l, report.roofline));
        else
            item->setProfile(-1, {});
    }
}

void clearProfile(GraphScene* scene) {
    for (NodeItem* item : scene->nodeItems()) item->setProfile(-1, {});
}

ProfileRunner::ProfileRunner(QObject* parent) : QObject(parent) {
    connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, [this] {
        const Outcome o = m_watcher.result();
        if (!o.error.isEmpty()) {
            emit failed(o.error);
            return;
        }
        m_report = o.report;
        emit finished();
    });
}

ProfileRunner::~ProfileRunner() { m_watcher.waitForFinished(); }

bool ProfileRunner::start(const Project& project, const QString& projectPath, int steps) {
    if (m_watcher.isRunning()) return false;
    const std::string path = projectPath.toStdString();
    m_watcher.setFuture(QtConcurrent::run([project, path, steps]() -> Outcome {
        Outcome o;
        try {
            std::unique_ptr<Backend> backend = backendRegistry().create(Device::parseFirst(project.training.device),
                                                                        backendOptionsFor(project.training));
            ProfileOptions options;
            options.steps = steps;
            o.report = profileProject(project, path, *backend, options);
        } catch (const std::exception& e) {
            o.error = QString::fromStdString(e.what());
        }
        return o;
    }));
    return true;
}

}  // namespace strata::ui
