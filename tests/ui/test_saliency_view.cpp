// The Predict dock's saliency (ui/SaliencyView in PredictPanel), offscreen on a small trained conv model (synthetic
// 12 x 12 images, Conv2D -> BatchNorm -> ReLU -> Dense, 4 classes): the Grad-CAM overlay appears when toggled, for
// the predicted class by default and for the class picked, equal to core's map for that sample and class; a class
// picked while a map is computed replaces it (the stale one is dropped); toggled off, the plain picture returns; a
// text model gets a token saliency strip beside the attention strip, none for an image model. With
// STRATA_GRADCAM_SHOT=OUT.png and STRATA_GRADCAM_PROJECT=a trained project (e.g. examples/fashion_cnn.strata after
// `strata-train ... --max-steps 300 --checkpoint-dir DIR`), it also saves the dock's screenshot.
#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/infer/Saliency.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/PredictPanel.h"
#include "ui/SaliencyView.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

bool waitFor(QSignalSpy& spy, int ms = 60000) { return spy.count() > 0 || spy.wait(ms); }

// Waits until the view has no job left and at least one map arrived since the spy was made.
bool settle(SaliencyView& view, QSignalSpy& ready) {
    if (!waitFor(ready)) return false;
    return QTest::qWaitFor([&] { return !view.isBusy(); }, 60000);
}

bool loadInto(PredictPanel& panel, const QString& file) {
    panel.resize(980, 420);
    panel.show();
    QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
    QSignalSpy predicted(&panel, &PredictPanel::predictionReady);
    panel.loadModel(file);
    return waitFor(loaded) && loaded.takeFirst().at(0).toBool() && waitFor(predicted);
}

}  // namespace

class TestSaliencyView : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    ProjectDocument m_doc;
    Project m_project;

private slots:
    void initTestCase() {
        m_project = test::convBatchNormProject();
        m_project.dataset.classNames = {"ring", "cross", "bar", "dot"};
        m_project.training.checkpointDir = m_dir.filePath("ckpt").toStdString();
        const std::string why = test::trainQuietly(m_project);
        QVERIFY2(why.empty(), why.c_str());
        m_doc.newProject(m_project);
        QString error;
        QVERIFY2(m_doc.save(m_dir.filePath("conv.strata"), &error), qPrintable(error));
    }

    void gradCamOverlayFollowsTheClass() {
        PredictPanel panel(&m_doc);
        QVERIFY2(loadInto(panel, m_dir.filePath("ckpt")), qPrintable(panel.errorText()));
        SaliencyView* view = panel.saliencyView();
        QVERIFY(view->isVisible());
        QVERIFY(view->tokenText().isEmpty());
        QCOMPARE(view->layerCombo()->count(), 1);
        QCOMPARE(view->layerCombo()->currentText(), QStringLiteral("conv"));
        QCOMPARE(view->classCombo()->count(), 5);  // "predicted class" and the four
        // Off by default: nothing computed, the plain picture.
        QVERIFY(!view->overlayToggle()->isChecked());
        QVERIFY(view->shownMap().empty());

        QSignalSpy ready(view, &SaliencyView::saliencyReady);
        QSignalSpy picture(view, &SaliencyView::pictureChanged);
        view->overlayToggle()->setChecked(true);
        QVERIFY(settle(*view, ready));
        QVERIFY2(view->errorText().isEmpty(), qPrintable(view->errorText()));
        const int predicted = panel.predictedClass();
        QVERIFY(predicted >= 0);
        QCOMPARE(view->shownClass(), predicted);
        QCOMPARE(view->shownMap().size(), size_t(144));
        QVERIFY(view->caption().contains(panel.classNames()[predicted]));
        QVERIFY(view->caption().contains(QStringLiteral("relu")));
        QVERIFY(picture.count() > 0);
        const QImage overlaid = view->picture();
        QVERIFY(!overlaid.isNull());

        // The map is core's for this sample and class.
        const ExportModel file = loadModelFile(resolveCheckpointPath(m_dir.filePath("ckpt").toStdString()));
        DatasetBundle data = loadDataset(m_project.dataset, m_dir.filePath("conv.strata").toStdString());
        const int index = 0;
        QCOMPARE(panel.findChild<QSpinBox*>(QStringLiteral("predictIndex"))->value(), index);
        auto backend = backendRegistry().create(Device::cpu());
        SaliencyModel core(file, *backend);
        const float* sample = data.validation.inputs.data() + index * 144;
        QCOMPARE(view->shownMap(), core.gradCam(sample, predicted).map);

        // Another class: its map, which differs.
        const int other = (predicted + 1) % 4;
        ready.clear();
        view->classCombo()->setCurrentIndex(view->classCombo()->findData(other));
        QVERIFY(settle(*view, ready));
        QCOMPARE(view->shownClass(), other);
        const std::vector<float> expected = core.gradCam(sample, other).map;
        QCOMPARE(view->shownMap(), expected);
        QVERIFY(view->shownMap() != core.gradCam(sample, predicted).map);
        QVERIFY(view->picture() != overlaid);

        // Two picks in a row: the first's map, computed meanwhile, is dropped; the second's is shown.
        const int third = (predicted + 2) % 4;
        ready.clear();
        view->classCombo()->setCurrentIndex(view->classCombo()->findData(predicted));
        view->classCombo()->setCurrentIndex(view->classCombo()->findData(third));
        QVERIFY(settle(*view, ready));
        QTest::qWait(50);
        QCOMPARE(view->shownClass(), third);
        QCOMPARE(ready.count(), 1);
        QCOMPARE(view->shownMap(), core.gradCam(sample, third).map);

        // Off: the plain picture, no map.
        picture.clear();
        view->overlayToggle()->setChecked(false);
        QVERIFY(view->shownMap().empty());
        QCOMPARE(picture.count(), 1);
        QVERIFY(view->picture() != overlaid);
    }

    // A text model: the token strip under the attention strip, for the predicted class; no Grad-CAM controls.
    void textModelGetsTokenSaliency() {
        QTemporaryDir dir;
        const QString file = dir.filePath("sentiment.safetensors");
        writeSafetensorsExport(file.toStdString(), test::sentimentTextModel(), ExportPrecision::F32);
        ProjectDocument doc;
        PredictPanel panel(&doc);
        panel.resize(980, 420);
        panel.show();
        QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
        panel.loadModel(file);
        QVERIFY(waitFor(loaded));
        QVERIFY2(loaded.takeFirst().at(0).toBool(), qPrintable(panel.errorText()));
        SaliencyView* view = panel.saliencyView();
        QVERIFY(!view->isVisible());
        QSignalSpy ready(view, &SaliencyView::saliencyReady);
        panel.predictText(QStringLiteral("good bad"));
        QVERIFY(settle(*view, ready));
        const QString strip = view->tokenText();
        QVERIFY2(strip.contains(QStringLiteral("good")) && strip.contains(QStringLiteral("bad")), qPrintable(strip));
        QVERIFY2(strip.contains(QStringLiteral("(gradient at embed, for ")), qPrintable(strip));
        // The score is the mean of the real tokens' vectors: each token's gradient is the same, the padding's
        // (masked) none.
        QVERIFY2(strip.contains(QStringLiteral("rgba(40,110,220,0.86)'>good")), qPrintable(strip));
        QVERIFY2(strip.contains(QStringLiteral("rgba(40,110,220,0.86)'>bad")), qPrintable(strip));
        QCOMPARE(view->shownClass(), panel.predictedClass());
        QVERIFY(view->tokenStrip()->isVisible());
    }

    // Opt-in: the screenshot of docs/predict-gradcam.png.
    void screenshot() {
        const QString shot = qEnvironmentVariable("STRATA_GRADCAM_SHOT");
        const QString project = qEnvironmentVariable("STRATA_GRADCAM_PROJECT");
        if (shot.isEmpty() || project.isEmpty()) QSKIP("set STRATA_GRADCAM_SHOT and STRATA_GRADCAM_PROJECT");
        ProjectDocument doc;
        QString error;
        QVERIFY2(doc.load(project, &error), qPrintable(error));
        PredictPanel panel(&doc);
        QVERIFY2(loadInto(panel, QString::fromStdString(doc.project().training.checkpointDir)),
                 qPrintable(panel.errorText()));
        const int sample = qEnvironmentVariableIntValue("STRATA_GRADCAM_SAMPLE");
        QSignalSpy predicted(&panel, &PredictPanel::predictionReady);
        panel.selectSample(sample);
        if (sample != 0) QVERIFY(waitFor(predicted));
        QSignalSpy ready(panel.saliencyView(), &SaliencyView::saliencyReady);
        panel.saliencyView()->overlayToggle()->setChecked(true);
        QVERIFY(settle(*panel.saliencyView(), ready));
        QVERIFY(panel.grab().save(shot));
    }
};

QTEST_MAIN(TestSaliencyView)
#include "test_saliency_view.moc"
