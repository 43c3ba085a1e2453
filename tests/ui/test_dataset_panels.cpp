// DatasetPanel and TrainingSettingsPanel: edits reach the document as undoable
// commands and undo brings the widgets back; the dataset preview loads on a
// worker and shows sample pictures (image-shaped data), table rows (flat data)
// and the class balance, or the loader's error; the LR preview plots core's
// learningRateAt over every step of the run.
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>
#include <QUndoStack>
#include <fstream>

#include "core/train/LrSchedule.h"
#include "qcustomplot.h"
#include "tests/support/TestProjects.h"
#include "ui/DatasetPanel.h"
#include "ui/TrainingSettingsPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

Project imageProject() {
    Project p;
    p.name = "panels";
    p.graph.addNode("Input", "input", Json{{"shape", {1, 8, 8}}});
    test::useBlobs(p, 400, 5, {1, 8, 8});
    p.training.batchSize = 25;
    p.training.epochs = 2;
    return p;
}

template <typename T>
T* widgetWithValue(QWidget* root, double value) {
    for (T* w : root->findChildren<T*>())
        if (w->value() == value) return w;
    return nullptr;
}

QString screenshotDir() { return qEnvironmentVariable("STRATA_UI_SCREENSHOTS"); }

}  // namespace

class TestDatasetPanels : public QObject {
    Q_OBJECT
private slots:
    // Issue 17: picking the training images of a Fashion-MNIST-style folder fills in the labels and the
    // validation files (IDX naming: train-/t10k-, images-idx3/labels-idx1); fields already set stay.
    void trainImagesFillTheirCompanions() {
        QTemporaryDir dir;
        for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                              "t10k-labels-idx1-ubyte.gz"}) {
            QFile file(dir.filePath(f));
            QVERIFY(file.open(QIODevice::WriteOnly));
        }
        const QString train = dir.filePath("train-images-idx3-ubyte.gz");
        const QMap<QString, QString> found = DatasetPanel::idxCompanions(train);
        QCOMPARE(found.value("train_labels"), dir.filePath("train-labels-idx1-ubyte.gz"));
        QCOMPARE(found.value("validation_images"), dir.filePath("t10k-images-idx3-ubyte.gz"));
        QCOMPARE(found.value("validation_labels"), dir.filePath("t10k-labels-idx1-ubyte.gz"));
        QVERIFY(DatasetPanel::idxCompanions(dir.filePath("other.gz")).isEmpty());

        ProjectDocument doc;
        Project p = test::blobsMlpProject("idx");
        p.dataset.kind = DatasetKind::Idx;
        p.dataset.trainImages = train.toStdString();
        p.dataset.validationLabels = "mine.gz";  // set by the user: kept
        doc.newProject(p);
        DatasetPanel panel(&doc);
        panel.fillIdxCompanions(train);
        const DatasetSettings& d = doc.project().dataset;
        QCOMPARE(QString::fromStdString(d.trainLabels), dir.filePath("train-labels-idx1-ubyte.gz"));
        QCOMPARE(QString::fromStdString(d.validationImages), dir.filePath("t10k-images-idx3-ubyte.gz"));
        QCOMPARE(d.validationLabels, std::string("mine.gz"));
    }

    void datasetEditsAreUndoable() {
        ProjectDocument doc;
        doc.newProject(imageProject());
        DatasetPanel panel(&doc);
        auto* samples = widgetWithValue<QSpinBox>(&panel, 400);
        QVERIFY(samples);
        samples->setValue(800);
        QCOMPARE(doc.project().dataset.syntheticSamples, int64_t(800));
        QCOMPARE(doc.undoStack()->count(), 1);
        doc.undoStack()->undo();
        QCOMPARE(doc.project().dataset.syntheticSamples, int64_t(400));
        QCOMPARE(samples->value(), 400);  // the widget follows the document
        // Re-reading the document pushes nothing.
        panel.syncFromDocument();
        QCOMPARE(doc.undoStack()->index(), 0);
    }

    void imagePreviewShowsSamplesAndBalance() {
        ProjectDocument doc;
        doc.newProject(imageProject());
        DatasetPanel panel(&doc);
        panel.resize(1000, 700);
        panel.show();
        QSignalSpy ready(&panel, &DatasetPanel::previewReady);
        QSignalSpy count(&panel, &DatasetPanel::trainSampleCountKnown);
        panel.loadPreview();
        QVERIFY(ready.wait(30000));
        const DatasetPreview& p = panel.preview();
        QVERIFY2(p.error.isEmpty(), qPrintable(p.error));
        QCOMPARE(p.trainCount, qint64(300));
        QCOMPARE(p.validationCount, qint64(100));
        QCOMPARE(p.images.size(), 32);
        QCOMPARE(p.labels.size(), 32);
        QCOMPARE(p.images[0].size(), QSize(8, 8));
        QCOMPARE(p.classNames.size(), 5);
        qint64 train = 0, val = 0;
        for (qint64 c : p.trainPerClass) train += c;
        for (qint64 c : p.validationPerClass) val += c;
        QCOMPARE(train, qint64(300));
        QCOMPARE(val, qint64(100));
        QCOMPARE(count.count(), 1);
        QCOMPARE(count.at(0).at(0).toLongLong(), qint64(300));
        if (!screenshotDir().isEmpty()) panel.grab().save(screenshotDir() + "/dataset_panel.png");
    }

    // An image folder: classes from the sorted folder names, thumbnails of every class (a folder lists
    // class by class), the skipped files with their reasons, and the image-folder page of settings.
    void imageFolderPreviewShowsClassesAndSkippedFiles() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QStringList classes{"zebra", "apple", "moon"};
        for (int c = 0; c < classes.size(); ++c) {
            QVERIFY(QDir(tmp.path()).mkpath(classes[c]));
            for (int k = 0; k < 6 + 4 * c; ++k) {
                QImage img(20 + 4 * k, 16, QImage::Format_RGB888);  // sizes vary: resized to 16x16
                for (int y = 0; y < img.height(); ++y)
                    for (int x = 0; x < img.width(); ++x)
                        img.setPixelColor(x, y, QColor::fromHsv((120 * c + 6 * x) % 360, 200, 80 + 10 * y));
                QVERIFY(img.save(
                    tmp.filePath(QStringLiteral("%1/%2.%3").arg(classes[c]).arg(k).arg(k % 2 ? "jpg" : "png"))));
            }
        }
        QFile zero(tmp.filePath("moon/empty.png"));
        QVERIFY(zero.open(QIODevice::WriteOnly));
        zero.close();
        Project p = imageProject();
        p.graph = Graph{};
        p.graph.addNode("Input", "input", Json{{"shape", {3, 16, 16}}});
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::ImageFolder;
        p.dataset.trainPath = tmp.path().toStdString();
        p.dataset.imageShape = {3, 16, 16};
        p.dataset.imageResize = ImageResize::CenterCrop;
        p.dataset.validationSplit = 0.25;
        ProjectDocument doc;
        doc.newProject(p);
        DatasetPanel panel(&doc);
        panel.resize(1100, 720);
        panel.show();
        auto* shapeEdit = panel.findChild<QLineEdit*>("image_shape");
        QVERIFY(shapeEdit && shapeEdit->isVisible());  // the image folder page is the one shown
        QCOMPARE(shapeEdit->text(), QString("3,16,16"));
        QSignalSpy ready(&panel, &DatasetPanel::previewReady);
        panel.loadPreview();
        QVERIFY(ready.wait(30000));
        const DatasetPreview& pv = panel.preview();
        QVERIFY2(pv.error.isEmpty(), qPrintable(pv.error));
        QCOMPARE(pv.classNames, (QStringList{"apple", "moon", "zebra"}));
        QCOMPARE(pv.trainCount + pv.validationCount, qint64(6 + 10 + 14));
        // 25% of each class (apple 10, zebra 6); moon's 14 include the bad file, dropped after the split.
        QCOMPARE(pv.validationPerClass[0], qint64(3));
        QCOMPARE(pv.validationPerClass[2], qint64(2));
        QVERIFY(pv.validationPerClass[1] == 3 || pv.validationPerClass[1] == 4);
        QCOMPARE(pv.labels.mid(0, 3), (QStringList{"apple", "moon", "zebra"}));
        QCOMPARE(pv.images[0].size(), QSize(16, 16));
        QCOMPARE(pv.imageSizes.size(), 14);  // widths 20, 24, ... 72 by height 16
        QVERIFY2(pv.imageSizes.contains("20x16: 3"), qPrintable(pv.imageSizes.join(" ")));
        // The histogram of sizes: the 11 most frequent, then the other 3 sizes in one bar; every file counted.
        QCustomPlot* sizes = panel.imageSizeChart();
        QVERIFY(sizes->isVisible());
        QCOMPARE(sizes->plottableCount(), 1);
        auto* bars = qobject_cast<QCPBars*>(sizes->plottable(0));
        QVERIFY(bars);
        QCOMPARE(bars->data()->size(), DatasetPanel::kSizeBars);
        double files = 0;
        for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) files += it->value;
        QCOMPARE(files, double(pv.trainCount + pv.validationCount));
        QCOMPARE(bars->data()->at(DatasetPanel::kSizeBars - 1)->value, 3.0);  // 64, 68 and 72 wide: one file each
        auto ticker = sizes->xAxis->ticker().dynamicCast<QCPAxisTickerText>();
        QVERIFY(ticker);
        QCOMPARE(ticker->ticks().value(0), pv.imageSizeCounts[0].first);
        QCOMPARE(ticker->ticks().value(DatasetPanel::kSizeBars - 1), QStringLiteral("3 other sizes"));
        QCOMPARE(pv.skipped.size(), 1);
        QVERIFY2(pv.skipped[0].contains("empty.png") && pv.skipped[0].contains("empty (0 bytes)"),
                 qPrintable(pv.skipped[0]));
        if (!screenshotDir().isEmpty()) panel.grab().save(screenshotDir() + "/dataset_panel_image_folder.png");

        // The data's shape offered to the Input node: one undoable command.
        DatasetSettings gray = doc.project().dataset;
        gray.imageShape = {1, 12, 12};
        doc.setDatasetSettings(gray);
        const int before = doc.undoStack()->count();
        QVERIFY(panel.applyImageShapeToInput());
        const Node* in = doc.graph().nodes().front();
        QVERIFY(in->params.at("shape") == Json({1, 12, 12}));
        QCOMPARE(doc.undoStack()->count(), before + 1);
        doc.undoStack()->undo();
        QVERIFY(doc.graph().nodes().front()->params.at("shape") == Json({3, 16, 16}));
    }

    // Issue 17: a shown panel loads its preview by itself, an edit clears the "Loaded." it no longer
    // describes at once and a new preview of the edited settings follows without a click.
    void previewLoadsByItselfAndItsStatusFollowsEdits() {
        ProjectDocument doc;
        doc.newProject(imageProject());
        DatasetPanel panel(&doc);
        QSignalSpy ready(&panel, &DatasetPanel::previewReady);
        panel.resize(1000, 700);
        panel.show();
        QVERIFY(ready.wait(30000));
        QCOMPARE(panel.previewStatusText(), QStringLiteral("Loaded."));
        QCOMPARE(panel.preview().trainCount, qint64(300));
        ready.clear();
        auto* samples = widgetWithValue<QSpinBox>(&panel, 400);
        QVERIFY(samples);
        samples->setValue(800);
        QVERIFY(panel.previewStatusText().isEmpty());  // not "Loaded.": that was the 400-sample set
        QVERIFY(ready.wait(30000));
        QCOMPARE(panel.previewStatusText(), QStringLiteral("Loaded."));
        QCOMPARE(panel.preview().trainCount, qint64(600));
        // A hidden panel does not load; it catches up when shown.
        panel.hide();
        ready.clear();
        samples->setValue(400);
        QTest::qWait(700);
        QCOMPARE(ready.count(), 0);
        panel.show();
        QVERIFY(ready.wait(30000));
        QCOMPARE(panel.preview().trainCount, qint64(300));
    }

    // Issue 17: a file picker opens where the last one chose a file, unless its field names a file.
    void pickersRememberTheLastFolder() {
        QTemporaryDir dir;
        QVERIFY(QDir(dir.path()).mkpath("fashion"));
        ProjectDocument doc;
        doc.newProject(imageProject());
        DatasetPanel panel(&doc);
        DatasetPanel::rememberPickedFile(dir.filePath("fashion/train-images-idx3-ubyte.gz"));
        QCOMPARE(QDir(panel.pickerStartPath(QString())).canonicalPath(), QDir(dir.filePath("fashion")).canonicalPath());
        QCOMPARE(panel.pickerStartPath(dir.filePath("other/x.gz")), dir.filePath("other/x.gz"));
    }

    // Issue 34: image_folder's paths are folders: labelled so, with a folder in the placeholder, and their
    // button opens a folder picker (a file picker could not pick one); the CSV page's keep a file picker.
    void imageFolderFieldsPickFolders() {
        QTemporaryDir dir;
        QDir().mkpath(dir.filePath("images/cat"));
        ProjectDocument doc;
        Project p = imageProject();
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::ImageFolder;
        doc.newProject(p);
        DatasetPanel panel(&doc);
        QList<bool> folders;
        QStringList captions;
        panel.setPathPicker([&](const QString& caption, const QString&, bool folder) {
            captions << caption;
            folders << folder;
            return folder ? dir.filePath("images") : dir.filePath("train.csv");
        });
        auto rowLabelled = [&](const QString& text) -> QWidget* {
            for (QLabel* label : panel.findChildren<QLabel*>())
                if (label->text() == text && label->buddy()) return label->buddy();
            return nullptr;
        };
        for (const QString& label : {QStringLiteral("Training folder"), QStringLiteral("Validation folder")}) {
            QWidget* row = rowLabelled(label);
            QVERIFY2(row, qPrintable(label));
            auto* edit = row->findChild<QLineEdit*>();
            auto* browse = row->findChild<QToolButton*>();
            QVERIFY(edit && browse);
            QVERIFY2(edit->placeholderText().contains("folder"), qPrintable(edit->placeholderText()));
            QCOMPARE(browse->property("pickKind").toString(), QStringLiteral("folder"));
            browse->click();
            QCOMPARE(folders.back(), true);
            QCOMPARE(captions.back(), label);
            QCOMPARE(edit->text(), dir.filePath("images"));
        }
        QCOMPARE(doc.project().dataset.trainPath, dir.filePath("images").toStdString());
        QCOMPARE(doc.project().dataset.validationPath, dir.filePath("images").toStdString());
        // The CSV page's training file is a file.
        QWidget* csvRow = rowLabelled(QStringLiteral("Training file"));
        QVERIFY(csvRow);
        QCOMPARE(csvRow->findChild<QToolButton*>()->property("pickKind").toString(), QStringLiteral("file"));
        csvRow->findChild<QToolButton*>()->click();
        QCOMPARE(folders.back(), false);
    }

    void flatPreviewShowsRows() {
        DatasetSettings s = imageProject().dataset;
        s.syntheticShape = {6};
        const DatasetPreview p = DatasetPanel::buildPreview(s, QString(), 10);
        QVERIFY2(p.error.isEmpty(), qPrintable(p.error));
        QVERIFY(p.images.isEmpty());
        QCOMPARE(p.rows.size(), 10);
        QCOMPARE(p.columns.size(), 6);
        QCOMPARE(p.rows[0].size(), 6);
    }

    // A text CSV: the tokens of the first samples, the length distribution in quarters of max_tokens (the texts
    // past it marked as cut) and, when more than a tenth are cut, the warning in the description.
    void textPreviewShowsTokensAndLengths() {
        QTemporaryDir dir;
        {
            std::ofstream f(dir.filePath("train.csv").toStdString());
            f << "label,text\n";
            for (int i = 0; i < 20; ++i) {
                f << (i % 2 ? "b" : "a") << ",";
                for (int w = 0; w <= i; ++w) f << "w" << w % 5 << " ";  // 1 to 20 words
                f << "\n";
            }
        }
        DatasetSettings s;
        s.kind = DatasetKind::Text;
        s.tokenizer = Tokenizer::Word;
        s.trainPath = dir.filePath("train.csv").toStdString();
        s.validationSplit = 0.0;
        s.maxTokens = 8;
        const DatasetPreview p = DatasetPanel::buildPreview(s, QString(), 4);
        QVERIFY2(p.error.isEmpty(), qPrintable(p.error));
        QCOMPARE(p.texts.size(), 4);
        QCOMPARE(p.texts[2], QStringLiteral("w0 w1 w2"));
        // 20 texts of 1..20 words, quarters of 8 tokens: 1-2, 3-4, 5-6, 7-8, then 9-10 ... 17-18 cut, > 18 cut.
        QCOMPARE(p.textLengthCounts.size(), 9);
        QCOMPARE(p.textLengthCounts[0], (QPair<QString, qint64>{QStringLiteral("1-2"), 2}));
        QCOMPARE(p.textLengthCounts[4].first, QStringLiteral("9-10 (cut)"));
        QCOMPARE(p.textLengthCounts[8], (QPair<QString, qint64>{QStringLiteral("> 16 (cut)"), 4}));
        QVERIFY2(p.description.contains("12 of 20 training texts (60%) have more than max_tokens 8"),
                 qPrintable(p.description));
    }

    void previewReportsLoaderError() {
        DatasetSettings s;
        s.kind = DatasetKind::Idx;
        s.trainImages = "/nonexistent/strata-preview-images.gz";
        s.trainLabels = "/nonexistent/strata-preview-labels.gz";
        const DatasetPreview p = DatasetPanel::buildPreview(s, QString());
        QVERIFY(p.error.contains("strata-preview-images"));
        QCOMPARE(p.trainCount, qint64(0));
    }

    void lrPreviewFollowsCoreSchedule() {
        ProjectDocument doc;
        Project project = imageProject();
        project.training.schedule = ScheduleKind::Cosine;
        project.training.warmupSteps = 3;
        project.training.learningRate = 0.1;
        doc.newProject(project);
        TrainingSettingsPanel panel(&doc);
        panel.resize(500, 900);
        // 400 samples, a quarter held out: 300 / batch 25 = 12 steps per epoch, 2 epochs.
        QCOMPARE(panel.previewStepsPerEpoch(), qint64(12));
        QCOMPARE(panel.previewPointCount(), 24);
        const TrainingSettings& s = doc.project().training;
        for (int step : {0, 1, 3, 12, 23}) QCOMPARE(panel.previewValueAt(step), learningRateAt(s, step, 12));
        // A known training-set size (from a dataset preview) wins over the estimate.
        panel.setTrainSampleCount(250);
        QCOMPARE(panel.previewStepsPerEpoch(), qint64(10));
        QCOMPARE(panel.previewPointCount(), 20);

        // Edits are undoable and the preview follows them.
        auto* lr = widgetWithValue<QDoubleSpinBox>(&panel, 0.1);
        QVERIFY(lr);
        lr->setValue(0.2);
        QCOMPARE(doc.project().training.learningRate, 0.2);
        QCOMPARE(panel.previewValueAt(5), learningRateAt(doc.project().training, 5, 10));
        doc.undoStack()->undo();
        QCOMPARE(doc.project().training.learningRate, 0.1);
        QCOMPARE(lr->value(), 0.1);
        if (!screenshotDir().isEmpty()) {
            panel.show();
            QTest::qWait(50);
            panel.grab().save(screenshotDir() + "/training_settings.png");
        }
    }
};

QTEST_MAIN(TestDatasetPanels)
#include "test_dataset_panels.moc"
