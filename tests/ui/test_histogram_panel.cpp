// The Histograms dock and the canvas badges: a workbench run sampling every 5 steps fills the dock (one sample
// per 5 steps, every trainable tensor listed, the heat map re-binned off the GUI thread and only while the dock
// is shown); verdicts become badges on their nodes, with the verdict as tooltip, and a new run clears them.
// STRATA_UI_SCREENSHOTS=<dir> saves the dock as histograms.png and the canvas as health-badges.png.
#include <QDockWidget>
#include <QSignalSpy>
#include <QTest>

#include "tests/support/TestProjects.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/HistogramPanel.h"
#include "ui/LayerHealthOverlay.h"
#include "ui/MainWindow.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/EngineWorker.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {
int nodeId(const Graph& g, const std::string& name) {
    for (const Node* n : g.nodes())
        if (n->name == name) return n->id;
    return -1;
}
}  // namespace

class TestHistogramPanel : public QObject {
    Q_OBJECT

private slots:
    void runFillsTheDockAndBadgesTheCanvas() {
        Project p = test::blobsMlpProject("hist-dock", 16, 4);
        int row = 0;
        for (const Node* n : p.graph.nodes()) p.graph.setPosition(n->id, 0, 130.0 * row++);
        MainWindow w;
        w.newProject(p);
        w.resize(1280, 800);
        w.show();
        auto* panel = w.findChild<HistogramPanel*>();
        auto* dash = w.findChild<TrainingDashboard*>();
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("histogramsDock"));
        QVERIFY(panel && dash && dock);
        dock->hide();  // closed: samples are kept, nothing is re-binned
        dash->worker()->setHistogramEvery(5);
        QSignalSpy done(dash, &TrainingDashboard::trainingFinished);
        dash->startTraining(30);
        QVERIFY(done.wait(120000));
        QTRY_COMPARE(panel->sampleCount(), 6);  // steps 0, 5, ..., 25
        QVERIFY(panel->tensors().contains(QStringLiteral("dense1.weight")));
        QVERIFY(panel->tensors().contains(QStringLiteral("dense2.bias")));
        panel->refreshNow();
        QCOMPARE(panel->heatMapColumns(), 0);
        dock->show();
        dock->raise();
        panel->selectTensor(QStringLiteral("dense1.weight"), true);
        panel->refreshNow();
        QCOMPARE(panel->heatMapColumns(), 6);
        // Each column is one sample's gradient histogram re-binned: it sums to 1.
        for (int c = 0; c < 6; ++c) {
            double sum = 0;
            for (int r = 0; r < panel->heatMapShown().rows; ++r) sum += panel->heatMapShown().at(r, c);
            QVERIFY(std::abs(sum - 1) < 1e-4);
        }
        if (const QByteArray dir = qgetenv("STRATA_UI_SCREENSHOTS"); !dir.isEmpty()) {
            panel->selectTensor(QStringLiteral("dense1.weight"), false);
            panel->refreshNow();
            panel->grab().save(QString::fromUtf8(dir) + QStringLiteral("/histograms.png"));
        }

        // Verdicts: a badge on each node with one, its tooltip the verdict; healthy nodes none.
        auto* scene = w.findChild<GraphScene*>();
        QVERIFY(scene);
        const int dense1 = nodeId(p.graph, "dense1"), relu1 = nodeId(p.graph, "relu1");
        LayerHealth vanishing;
        vanishing.node = dense1;
        vanishing.layer = "dense1";
        vanishing.gradient = GradientHealth::Vanishing;
        vanishing.text = "vanishing gradient: RMS 0";
        LayerHealth dead;
        dead.node = relu1;
        dead.layer = "relu1";
        dead.dead = true;
        dead.text = "dead ReLU: 100% of its 32 units gave 0";
        LayerHealth fine;
        fine.node = nodeId(p.graph, "dense2");
        emit panel->healthChanged({vanishing, dead, fine});
        auto badges = layerHealthBadges(scene);
        QCOMPARE(int(badges.size()), 2);
        std::sort(badges.begin(), badges.end());
        QCOMPARE(badges[0].first, std::min(dense1, relu1));
        QVERIFY(badges[0].second.contains(dense1 < relu1 ? "vanishing" : "dead ReLU"));
        if (const QByteArray dir = qgetenv("STRATA_UI_SCREENSHOTS"); !dir.isEmpty())
            w.findChild<GraphView*>()->zoomToFit(),
                w.findChild<GraphView*>()->grab().save(QString::fromUtf8(dir) + QStringLiteral("/health-badges.png"));
        // A new run starts clean.
        dash->startTraining(2);
        QVERIFY(done.wait(120000));
        QVERIFY(layerHealthBadges(scene).size() <= 2);
        QTRY_VERIFY(panel->sampleCount() == 1);
    }
};

QTEST_MAIN(TestHistogramPanel)
#include "test_histogram_panel.moc"
