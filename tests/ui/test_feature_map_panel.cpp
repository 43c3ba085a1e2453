// The Feature maps dock in the workbench: with no model it says what to do; once the Predict dock has a trained
// Conv2D -> BatchNorm -> ReLU -> Dense model and a sample, selecting the Conv2D shows one map per channel and one
// tile per filter plus a histogram over the validation samples, a BatchNorm maps without filters, the Dense a
// histogram alone; another sample redraws the maps; a node added after training is named as missing; a selection
// replaced while a job runs shows the last one. STRATA_UI_SCREENSHOTS=<dir> saves the dock as feature-maps-test.png.
#include <QDockWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/FeatureMapPanel.h"
#include "ui/GraphScene.h"
#include "ui/MainWindow.h"
#include "ui/PredictPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {
int nodeId(const Graph& g, const std::string& name) {
    const Node* n = g.nodeByName(name);
    return n ? n->id : -1;
}
}  // namespace

class TestFeatureMapPanel : public QObject {
    Q_OBJECT

private slots:
    void followsTheSelectionInThePredictModel() {
        QTemporaryDir dir;
        Project p = test::convBatchNormProject();  // 1000 synthetic [1, 12, 12] samples, a fifth held out
        p.training.checkpointDir = dir.filePath(QStringLiteral("ckpt")).toStdString();
        int row = 0;
        for (const Node* n : p.graph.nodes()) p.graph.setPosition(n->id, 0, 120.0 * row++);
        {
            auto backend = test::makeCpuBackend();
            test::RecordedRun run;
            Trainer t(p, *backend, &run);
            QVERIFY2(t.run(), run.error.c_str());
        }
        MainWindow w;
        w.newProject(p);
        w.resize(1280, 800);
        w.show();
        auto* panel = w.findChild<FeatureMapPanel*>();
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("featureMapsDock"));
        QVERIFY(panel && dock);
        dock->show();
        dock->raise();
        GraphScene* scene = w.scene();
        const Graph& g = w.document()->graph();

        panel->refreshNow();
        QVERIFY2(panel->messageText().startsWith(QStringLiteral("Select a node")), qPrintable(panel->messageText()));
        scene->selectNodes({nodeId(g, "conv")});
        panel->refreshNow();
        QCOMPARE(panel->messageText(),
                 QStringLiteral("No trained model: train the project or pick a run in the Predict dock."));
        QCOMPARE(panel->featureMapCount(), 0);

        // The dock's button loads the project's checkpoint folder into the Predict dock, which predicts its first
        // validation sample.
        PredictPanel* predict = w.predictPanel();
        QSignalSpy predicted(predict, &PredictPanel::predictionReady);
        auto* load = panel->findChild<QPushButton*>(QStringLiteral("featureMapLoadRun"));
        QVERIFY(load && load->isVisible());
        load->click();
        QVERIFY(predicted.wait(60000));
        QVERIFY2(predict->modelSource().endsWith(QStringLiteral("best.safetensors")),
                 qPrintable(predict->modelSource()));
        panel->refreshNow();
        QCOMPARE(panel->nodeName(), QStringLiteral("conv"));
        QCOMPARE(panel->messageText(), QString());
        QCOMPARE(panel->featureMapCount(), 8);  // 8 channels
        QCOMPARE(panel->filterCount(), 8);
        QCOMPARE(panel->histogramBins(), FeatureMapPanel::kHistogramBins);
        QCOMPARE(panel->histogramCount(), int64_t(200) * 8 * 12 * 12);  // every value of the 200 validation samples
        QCOMPARE(panel->histogramSamples(), int64_t(200));
        const QImage first = panel->featureMap(0);
        QVERIFY(!first.isNull());

        // Another sample: the maps follow it.
        predict->selectSample(37);
        QVERIFY(predicted.wait(60000));
        panel->refreshNow();
        QCOMPARE(panel->featureMapCount(), 8);
        QVERIFY(panel->featureMap(0) != first);

        scene->selectNodes({nodeId(g, "bn")});
        panel->refreshNow();
        QCOMPARE(panel->nodeName(), QStringLiteral("bn"));
        QCOMPARE(panel->featureMapCount(), 8);
        QCOMPARE(panel->filterCount(), 0);

        scene->selectNodes({nodeId(g, "dense")});
        panel->refreshNow();
        QCOMPARE(panel->nodeName(), QStringLiteral("dense"));
        QCOMPARE(panel->featureMapCount(), 0);
        QCOMPARE(panel->filterCount(), 0);
        QCOMPARE(panel->histogramBins(), FeatureMapPanel::kHistogramBins);
        QCOMPARE(panel->histogramCount(), int64_t(200) * 4);

        // Several changes while a job runs: the last selection is what shows, and only it.
        QSignalSpy updated(panel, &FeatureMapPanel::updated);
        scene->selectNodes({nodeId(g, "conv")});
        QVERIFY(panel->isComputing());
        scene->selectNodes({nodeId(g, "relu")});
        scene->selectNodes({nodeId(g, "flatten")});
        panel->refreshNow();
        QCOMPARE(panel->nodeName(), QStringLiteral("flatten"));
        QCOMPARE(updated.count(), 1);
        QCOMPARE(panel->featureMapCount(), 0);
        QCOMPARE(panel->histogramCount(), int64_t(200) * 8 * 12 * 12);

        if (const QByteArray out = qgetenv("STRATA_UI_SCREENSHOTS"); !out.isEmpty()) {
            scene->selectNodes({nodeId(g, "conv")});
            panel->refreshNow();
            dock->grab().save(QString::fromUtf8(out) + QStringLiteral("/feature-maps-test.png"));
        }

        // A node the trained model lacks.
        const int added = w.document()->addNode(QStringLiteral("Dense"), QPointF(300, 0), Json{{"units", 3}});
        scene->selectNodes({added});
        panel->refreshNow();
        const std::string name = g.node(added)->name;
        QVERIFY2(panel->messageText().startsWith(QStringLiteral("node '%1' is not in the model").arg(q(name))),
                 qPrintable(panel->messageText()));
        QCOMPARE(panel->featureMapCount(), 0);
        QCOMPARE(panel->histogramBins(), 0);
    }

private:
    static QString q(const std::string& s) { return QString::fromStdString(s); }
};

QTEST_MAIN(TestFeatureMapPanel)
#include "test_feature_map_panel.moc"
