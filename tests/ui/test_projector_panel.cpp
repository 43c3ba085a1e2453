// The Projector dock: a small trained model's validation samples become one point each, coloured by their true
// class (checked against the data set read independently), by PCA and t-SNE; clicking a point selects its sample
// (the side panel names it and the Predict dock predicts it); a newer request drops the older job's result; the
// workbench lists the dock in its View menu. STRATA_UI_SCREENSHOTS=<dir> saves the panel as projector.png.
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QMenuBar>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <qcustomplot.h>

#include "core/data/Dataset.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/MainWindow.h"
#include "ui/PredictPanel.h"
#include "ui/ProjectorPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

// A trained 4-class blobs MLP saved in `dir` (tiny.strata, checkpoints in dir/ckpt), open in `doc`.
void makeTrainedProject(const QTemporaryDir& dir, ProjectDocument& doc) {
    Project p = test::blobsMlpProject("Projector Blobs");
    p.dataset.classNames = {"north", "east", "south", "west"};
    p.training.checkpointDir = dir.filePath("ckpt").toStdString();
    const std::string why = test::trainQuietly(p);
    QVERIFY2(why.empty(), why.c_str());
    doc.newProject(p);
    QString error;
    QVERIFY2(doc.save(dir.filePath("tiny.strata"), &error), qPrintable(error));
}

bool computeNow(ProjectorPanel& panel) {
    QSignalSpy done(&panel, &ProjectorPanel::computed);
    panel.compute();
    return done.wait(120000);
}

}  // namespace

class TestProjectorPanel : public QObject {
    Q_OBJECT
private slots:
    void onePointPerSampleColouredByClassAndClickSelects() {
        QTemporaryDir dir;
        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        PredictPanel predict(&doc);
        predict.resize(900, 400);
        predict.show();
        QSignalSpy loaded(&predict, &PredictPanel::modelLoaded);
        predict.loadModel(dir.filePath("ckpt"));
        QVERIFY(loaded.wait(60000));
        QVERIFY2(loaded.first().at(0).toBool(), qPrintable(predict.errorText()));

        ProjectorPanel panel(&doc, &predict);
        panel.setSampleLimit(1000);
        panel.setMethod(ProjectorPanel::Method::Pca);
        panel.resize(900, 450);
        QSignalSpy computed(&panel, &ProjectorPanel::computed);
        panel.show();  // opening it projects the Predict dock's model
        QVERIFY(computed.wait(120000));
        QTRY_VERIFY(!panel.isComputing());

        // One point per validation sample (a quarter of 1200), each with its sample's true class.
        const DatasetBundle data = loadDataset(doc.project().dataset, dir.filePath("tiny.strata").toStdString());
        QCOMPARE(data.validation.count, 300);
        const auto points = panel.points();
        QCOMPARE(points.size(), 300);
        QSet<qint64> samples;
        for (const auto& p : points) {
            samples.insert(p.sample);
            QCOMPARE(p.label, data.validation.labels[size_t(p.sample)]);
        }
        QCOMPARE(samples.size(), 300);
        QCOMPARE(panel.classNames(), QStringList({"north", "east", "south", "west"}));
        // A scatter per class, with as many points as the class has samples, named in the legend.
        for (int k = 0; k < 4; ++k) {
            const int expected = int(std::count(data.validation.labels.begin(), data.validation.labels.end(), k));
            QCOMPARE(panel.plot()->graph(k)->data()->size(), expected);
            QCOMPARE(panel.plot()->graph(k)->name(), panel.classNames()[k]);
        }
        QVERIFY(panel.plot()->xAxis->label().startsWith("PC1"));
        QVERIFY2(panel.statusText().contains("300 validation samples"), qPrintable(panel.statusText()));

        // Clicking a point selects its sample: the side panel names it and the Predict dock can predict it.
        int target = -1;
        for (int i = points.size() - 1; i >= 0 && target < 0; --i)
            if (panel.pointAt(panel.pixelOf(i)) == i && points[i].sample != 0) target = i;
        QVERIFY(target >= 0);
        // Hovering shows a point's sample without selecting it.
        const int other = target > 0 ? target - 1 : target + 1;
        if (panel.pointAt(panel.pixelOf(other)) == other) {
            QMouseEvent move(QEvent::MouseMove, QPointF(panel.pixelOf(other)),
                             QPointF(panel.plot()->mapToGlobal(panel.pixelOf(other))), Qt::NoButton, Qt::NoButton,
                             Qt::NoModifier);
            QApplication::sendEvent(panel.plot(), &move);
            QTRY_VERIFY2(panel.detailText().contains(QStringLiteral("sample %1<").arg(points[other].sample)),
                         qPrintable(panel.detailText()));
            QCOMPARE(panel.selectedSample(), qint64(-1));
        }
        connect(&panel, &ProjectorPanel::sampleSelected, &predict,
                [&predict](qint64 s) { predict.selectSample(int(s)); });
        QSignalSpy selected(&panel, &ProjectorPanel::sampleSelected);
        QSignalSpy predicted(&predict, &PredictPanel::predictionReady);
        QTest::mouseClick(panel.plot(), Qt::LeftButton, {}, panel.pixelOf(target));
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.first().at(0).toLongLong(), points[target].sample);
        QCOMPARE(panel.selectedSample(), points[target].sample);
        QVERIFY2(panel.detailText().contains(QStringLiteral("sample %1<").arg(points[target].sample)),
                 qPrintable(panel.detailText()));
        QVERIFY(panel.detailText().contains(panel.classNames()[points[target].label]));
        QVERIFY(predicted.wait(60000));
        // The Predict dock predicts the same sample as the projector did.
        QCOMPARE(predict.predictedClass(), points[target].predicted);
        // A click on empty space selects nothing new.
        QTest::mouseClick(panel.plot(), Qt::LeftButton, {}, QPoint(2, 2));
        QCOMPARE(selected.count(), 1);

        if (const QByteArray shots = qgetenv("STRATA_UI_SCREENSHOTS"); !shots.isEmpty())
            panel.grab().save(QString::fromUtf8(shots) + QStringLiteral("/projector-blobs.png"));
    }

    void tsneAndAStaleJobIsDropped() {
        QTemporaryDir dir;
        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        ProjectorPanel panel(nullptr, nullptr);
        panel.setModelSource(dir.filePath("ckpt"), dir.filePath("tiny.strata"));
        panel.setSampleLimit(60);
        panel.setMethod(ProjectorPanel::Method::Tsne);
        QVERIFY(computeNow(panel));
        QCOMPARE(panel.points().size(), 60);
        QVERIFY(panel.plot()->xAxis->label().startsWith("t-SNE"));
        // Same-class points end up nearer each other than other classes' (blobs separate well).
        double same = 0, other = 0;
        int nSame = 0, nOther = 0;
        const auto pts = panel.points();
        for (int i = 0; i < pts.size(); ++i)
            for (int j = i + 1; j < pts.size(); ++j) {
                const double d = std::hypot(pts[i].x - pts[j].x, pts[i].y - pts[j].y);
                (pts[i].label == pts[j].label ? same : other) += d;
                ++(pts[i].label == pts[j].label ? nSame : nOther);
            }
        QVERIFY2(same / nSame < 0.5 * other / nOther,
                 qPrintable(QString("%1 vs %2").arg(same / nSame).arg(other / nOther)));

        // A t-SNE job on more samples, replaced at once by PCA: only PCA's result is shown.
        panel.setSampleLimit(300);
        QSignalSpy computed(&panel, &ProjectorPanel::computed);
        panel.compute();
        QVERIFY(panel.isComputing());
        panel.setMethod(ProjectorPanel::Method::Pca);  // a new request while one runs
        QVERIFY(computed.wait(120000));
        QTRY_VERIFY(!panel.isComputing());
        QTest::qWait(50);
        QCOMPARE(computed.count(), 1);
        QCOMPARE(panel.jobsStarted(), 3);
        QCOMPARE(panel.points().size(), 300);
        QVERIFY(panel.plot()->xAxis->label().startsWith("PC1"));

        // Cancel: the projection shown stays.
        panel.setMethod(ProjectorPanel::Method::Tsne);
        panel.cancel();
        QTRY_VERIFY_WITH_TIMEOUT(!panel.isComputing(), 60000);
        QCOMPARE(panel.points().size(), 300);
        QVERIFY(panel.plot()->xAxis->label().startsWith("PC1"));
        QVERIFY(panel.statusText().startsWith("Cancelled"));
    }

    void noModelSaysWhy() {
        ProjectorPanel panel(nullptr, nullptr);
        panel.setModelSource(QStringLiteral("/nonexistent/best.safetensors"), QStringLiteral("/nonexistent/p.strata"));
        QSignalSpy failed(&panel, &ProjectorPanel::failed);
        panel.compute();
        QVERIFY(failed.wait(60000));
        QVERIFY2(panel.errorText().contains("/nonexistent/best.safetensors"), qPrintable(panel.errorText()));
        QVERIFY(panel.points().isEmpty());
    }

    // Not a check: STRATA_PROJECTOR_MODEL=<checkpoint>|<project.strata> with STRATA_UI_SCREENSHOTS=<dir> saves
    // that model's t-SNE projection as projector.png (docs/projector.png: a short fashion_cnn run).
    void screenshotOfAModel() {
        const QStringList model = QString::fromUtf8(qgetenv("STRATA_PROJECTOR_MODEL")).split(QLatin1Char('|'));
        const QByteArray shots = qgetenv("STRATA_UI_SCREENSHOTS");
        if (model.size() != 2 || shots.isEmpty()) QSKIP("STRATA_PROJECTOR_MODEL and STRATA_UI_SCREENSHOTS not set");
        ProjectorPanel panel(nullptr, nullptr);
        panel.setModelSource(model[0], model[1]);
        panel.setSampleLimit(1500);
        panel.setMethod(ProjectorPanel::Method::Tsne);
        panel.resize(1000, 560);
        panel.show();
        QVERIFY2(computeNow(panel), qPrintable(panel.errorText()));
        const int point = int(panel.points().size()) / 3;
        QTest::mouseClick(panel.plot(), Qt::LeftButton, {}, panel.pixelOf(point));
        panel.grab().save(QString::fromUtf8(shots) + QStringLiteral("/projector.png"));
    }

    void workbenchHasTheDock() {
        MainWindow w;
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("projectorDock"));
        QVERIFY(dock);
        QVERIFY(w.findChild<ProjectorPanel*>());
        bool listed = false;
        for (QAction* menu : w.menuBar()->actions())
            if (menu->menu())
                for (QAction* a : menu->menu()->actions()) listed |= a == dock->toggleViewAction();
        QVERIFY(listed);
        if (const QByteArray shots = qgetenv("STRATA_UI_SCREENSHOTS"); !shots.isEmpty()) {
            w.resize(1280, 800);
            w.show();
            dock->raise();
            QTest::qWait(300);
            w.grab().save(QString::fromUtf8(shots) + QStringLiteral("/projector-workbench.png"));
        }
    }
};

QTEST_MAIN(TestProjectorPanel)
#include "test_projector_panel.moc"
