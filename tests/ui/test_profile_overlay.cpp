// Train > Profile Layers: the workbench profiles the project off the GUI thread, then tints every profiled
// node by its time share (the heaviest layer darkest) and lists its figures in the node's tooltip; the
// status bar gives the step split. STRATA_UI_SCREENSHOTS=<dir> saves the canvas as profile-overlay.png.
#include <QAction>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

#include "tests/support/TestProjects.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/MainWindow.h"
#include "ui/NodeItem.h"
#include "ui/ProfileOverlay.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

class TestProfileOverlay : public QObject {
    Q_OBJECT
    QTemporaryDir m_cache;

private slots:
    void initTestCase() {
        // The roofline cache goes to $XDG_CACHE_HOME/strata: keep it out of the user's.
        qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
    }

    void profileTintsNodesAndFillsTooltips() {
        Project p;
        p.name = "profile-overlay";
        const std::vector<int> ids =
            test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 28, 28}}}},
                                     {"Conv2D", "conv1", Json{{"filters", 16}, {"padding", {1, 1}}}},
                                     {"ReLU", "relu1"},
                                     {"MaxPool2D", "pool1"},
                                     {"Conv2D", "conv2", Json{{"filters", 32}, {"padding", {1, 1}}}},
                                     {"ReLU", "relu2"},
                                     {"MaxPool2D", "pool2"},
                                     {"Flatten", "flatten"},
                                     {"Dense", "fc", Json{{"units", 4}}}});
        for (size_t i = 0; i < ids.size(); ++i) p.graph.setPosition(ids[i], 0, 130.0 * double(i));
        test::useBlobs(p, 320, 4, {1, 28, 28});
        p.training.batchSize = 32;
        p.training.device = "cpu";
        p.training.threads = 1;

        MainWindow w;
        w.newProject(p);
        w.resize(1300, 1000);
        w.show();
        QVERIFY(w.profileAction());
        QSignalSpy done(w.profiler(), &ProfileRunner::finished);
        QSignalSpy failed(w.profiler(), &ProfileRunner::failed);
        w.profileAction()->trigger();
        QVERIFY(!w.profileAction()->isEnabled());  // one profile at a time
        QVERIFY(done.wait(60000));
        QCOMPARE(failed.count(), 0);
        QVERIFY(w.profileAction()->isEnabled());

        const ProfileReport& r = w.profiler()->report();
        QCOMPARE(int(r.layers.size()), int(ids.size()) - 1);
        GraphScene* scene = w.scene();
        QCOMPARE(scene->nodeItem(ids[0])->profileShare(), -1.0);  // the Input is not profiled
        double heaviest = -1;
        int heaviestNode = -1;
        for (size_t i = 1; i < ids.size(); ++i) {
            NodeItem* item = scene->nodeItem(ids[i]);
            QVERIFY(item->profileShare() >= 0);
            const QString tip = item->toolTip();
            QVERIFY2(tip.contains("of the step's compute") && tip.contains("GFLOP/s"), qPrintable(tip));
            if (item->profileShare() > heaviest) {
                heaviest = item->profileShare();
                heaviestNode = ids[i];
            }
        }
        // conv2 does by far the most work (32 filters over 16 channels at 14x14).
        QCOMPARE(heaviestNode, ids[4]);
        QVERIFY(scene->nodeItem(ids[4])->toolTip().contains("bound"));
        // The convolution's time is its products; the pooling after it has none.
        QVERIFY2(scene->nodeItem(ids[4])->toolTip().contains("% in matrix products and convolutions"),
                 qPrintable(scene->nodeItem(ids[4])->toolTip()));
        QVERIFY2(scene->nodeItem(ids[6])->toolTip().contains("<br>0% in matrix products"),
                 qPrintable(scene->nodeItem(ids[6])->toolTip()));
        const QString status = w.statusBar()->currentMessage();
        QVERIFY2(status.contains("data wait") && status.contains("matrix products and convolutions"),
                 qPrintable(status));

        const QString dir = qEnvironmentVariable("STRATA_UI_SCREENSHOTS");
        if (!dir.isEmpty()) {
            w.view()->zoomToFit();
            QTest::qWait(50);
            w.grab().save(dir + "/profile-overlay.png");
        }
        clearProfile(scene);
        QCOMPARE(scene->nodeItem(ids[4])->profileShare(), -1.0);
        QVERIFY(!scene->nodeItem(ids[4])->toolTip().contains("GFLOP"));
    }
};

QTEST_MAIN(TestProfileOverlay)
#include "test_profile_overlay.moc"
