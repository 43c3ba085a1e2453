// The workbench's Check (issues 34 and 35): an image folder, a text set and a table each disagreeing with their
// graph in every way at once; Train > Check lists every mismatch in the Problems panel with a fix button; each
// fix is one edit that Undo takes back; the summary never calls the graph valid while its data disagrees; and
// Start runs the check by itself and refuses with the whole list, before any run starts.
// STRATA_UI_SCREENSHOTS=<dir> saves check-problems.png.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QUndoStack>

#include "tests/support/TestProjects.h"
#include "ui/DataChecker.h"
#include "ui/DevicePicker.h"
#include "ui/MainWindow.h"
#include "ui/ProblemsPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/Templates.h"

using namespace strata;
using namespace strata::ui;

namespace {

QAction* checkAction(MainWindow& w) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text().remove(QLatin1Char('&')) == QLatin1String("Check Data Against Graph")) return a;
    return nullptr;
}

// Class folders of 8 x 8 gray PNGs: `classes` classes of 4 images each.
QString writeImageFolder(const QTemporaryDir& dir, int classes) {
    const QString root = dir.filePath(QStringLiteral("images"));
    for (int c = 0; c < classes; ++c) {
        QDir().mkpath(QStringLiteral("%1/class%2").arg(root).arg(c));
        for (int i = 0; i < 4; ++i) {
            QImage image(8, 8, QImage::Format_Grayscale8);
            image.fill(c * 60 + i * 10);
            image.save(QStringLiteral("%1/class%2/%3.png").arg(root).arg(c).arg(i));
        }
    }
    return root;
}

// "label,text" rows in 2 classes over 40 distinct words (a vocabulary of 42 with <pad> and <unk>).
QString writeTexts(const QTemporaryDir& dir) {
    const QString path = dir.filePath(QStringLiteral("texts.csv"));
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    f.write("label,text\n");
    for (int i = 0; i < 40; ++i)
        f.write(QStringLiteral("%1,word%2 word%3\n").arg(i % 2 ? "neg" : "pos").arg(i).arg((i + 1) % 40).toUtf8());
    return path;
}

// 4 numeric features and a label in 3 classes.
QString writeTable(const QTemporaryDir& dir) {
    const QString path = dir.filePath(QStringLiteral("table.csv"));
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    f.write("a,b,c,d,label\n");
    for (int i = 0; i < 60; ++i)
        f.write(QStringLiteral("%1,%2,%3,%4,%5\n").arg(i % 7).arg(i % 5).arg(i % 3).arg(i % 2).arg(i % 3).toUtf8());
    return path;
}

}  // namespace

class TestDataCheckPanel : public QObject {
    Q_OBJECT

    // Check lists `expected` (a part of each row's message, in order), each row with its fix; then each fix is
    // applied by its button (one undoable edit: undone, the row is back; redone, it goes) until nothing is left
    // and the summary says the graph fits its data.
    void checkAndFixAll(MainWindow& w, const QStringList& expected, const QString& shot = {}) {
        ProblemsPanel* problems = w.problems();
        DataChecker* checker = w.dataChecker();
        checkAction(w)->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(checker->state() == DataChecker::State::Checked, 30000);
        QCOMPARE(problems->problemCount(), int(expected.size()));
        for (int i = 0; i < expected.size(); ++i) {
            QVERIFY2(problems->messageAt(i).contains(expected[i]), qPrintable(problems->messageAt(i)));
            QVERIFY2(problems->fixButton(i), qPrintable(expected[i]));
        }
        QVERIFY2(!problems->summaryText().contains(QStringLiteral("valid")), qPrintable(problems->summaryText()));
        if (!shot.isEmpty() && !qEnvironmentVariable("STRATA_UI_SCREENSHOTS").isEmpty()) {
            QDockWidget* dock = w.dockNamed(QStringLiteral("problemsDock"));
            dock->setFloating(true);
            dock->resize(760, 220);
            QTest::qWait(50);
            dock->grab().save(qEnvironmentVariable("STRATA_UI_SCREENSHOTS") + QLatin1Char('/') + shot);
            dock->setFloating(false);
        }
        QUndoStack* undo = w.document()->undoStack();
        for (qsizetype left = expected.size(); left > 0; --left) {
            const int edits = undo->count();
            QVERIFY(!problems->fixButton(0)->text().isEmpty());
            problems->fixButton(0)->click();
            QTRY_COMPARE(problems->problemCount(), int(left - 1));
            QCOMPARE(undo->count(), edits + 1);
            undo->undo();
            QTRY_COMPARE(problems->problemCount(), int(left));
            undo->redo();
            QTRY_COMPARE(problems->problemCount(), int(left - 1));
        }
        QVERIFY2(problems->summaryText().contains(QStringLiteral("fits its data")),
                 qPrintable(problems->summaryText()));
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_data_check_panel"));
        QSettings().clear();
    }

    // Images: the MLP template (Input [1, 28, 28], 10 classes) on a folder of 8 x 8 images in 3 classes.
    void imageFolder() {
        QTemporaryDir dir;
        Project p = mlpTemplate();
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::ImageFolder;
        p.dataset.trainPath = writeImageFolder(dir, 3).toStdString();
        p.dataset.imageShape = {1, 8, 8};
        MainWindow w;
        w.newProject(p);
        checkAndFixAll(w,
                       {QStringLiteral("Input 'image' expects [1, 28, 28] but the data's samples are [1, 8, 8]"),
                        QStringLiteral("'logits' (Dense) is [10] but the data has 3 classes")},
                       QStringLiteral("check-problems.png"));
        QCOMPARE(w.document()->graph().nodeByName("logits")->params.at("units").get<int>(), 3);
    }

    // Text: a sequence length, an Embedding smaller than the vocabulary (issue 35) and a class count, at once.
    void textSet() {
        QTemporaryDir dir;
        Project p = textClassifierTemplate();
        p.dataset.trainPath = writeTexts(dir).toStdString();
        p.dataset.maxTokens = 24;
        p.dataset.validationSplit = 0;
        p.graph.setParams(p.graph.nodeByName("embed")->id, {{"vocab", 10}, {"dim", 8}});
        MainWindow w;
        w.newProject(p);
        checkAndFixAll(w, {QStringLiteral("Input 'tokens' expects [16] but the data's samples are [24]"),
                           QStringLiteral("Embedding 'embed' has a vocabulary of 10 but the data's has 42 tokens"),
                           QStringLiteral("'logits' (Dense) is [4] but the data has 2 classes")});
        QCOMPARE(w.document()->graph().nodeByName("embed")->params.at("vocab").get<int>(), 42);
    }

    // A table: 4 features in 3 classes against Input [16] -> ... -> Dense 4.
    void table() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("table");
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::Csv;
        p.dataset.trainPath = writeTable(dir).toStdString();
        MainWindow w;
        w.newProject(p);
        checkAndFixAll(w, {QStringLiteral("Input 'input' expects [16] but the data's samples are [4]"),
                           QStringLiteral("'dense2' (Dense) is [4] but the data has 3 classes")});
    }

    // Start checks by itself: the data is read, the run is refused with every mismatch (banner, Problems in
    // front), nothing starts; fixed, the refusal goes and Start trains.
    void startRefusesWithTheList() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("start-check");
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::Csv;
        p.dataset.trainPath = writeTable(dir).toStdString();
        p.training.epochs = 50;
        MainWindow w;
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.newProject(p);
        w.dockNamed(QStringLiteral("problemsDock"))->hide();
        QSignalSpy started(w.dashboard(), &TrainingDashboard::trainingStarted);
        QSignalSpy refused(w.dashboard(), &TrainingDashboard::startRefused);
        w.dashboard()->startTraining();
        QTRY_COMPARE_WITH_TIMEOUT(refused.count(), 1, 30000);
        QCOMPARE(started.count(), 0);
        QVERIFY(!w.dashboard()->isRunning());
        const QString banner = w.dashboard()->errorText();
        QVERIFY2(banner.contains(QStringLiteral("(2 problems)")) && banner.contains(QStringLiteral("[4]")) &&
                     banner.contains(QStringLiteral("3 classes")),
                 qPrintable(banner));
        QVERIFY(w.dockNamed(QStringLiteral("problemsDock"))->isVisible());
        QCOMPARE(w.problems()->problemCount(), 2);

        for (int i = 0; i < 2; ++i) {
            w.problems()->fixButton(0)->click();
            QTRY_COMPARE(w.problems()->problemCount(), 1 - i);
        }
        QVERIFY2(!w.dashboard()->errorVisible(), qPrintable(w.dashboard()->errorText()));
        QSignalSpy finished(w.dashboard(), &TrainingDashboard::trainingFinished);
        w.dashboard()->startTraining();
        QCOMPARE(started.count(), 1);
        w.dashboard()->stopTraining();
        QVERIFY(finished.wait(60000));
    }
};

QTEST_MAIN(TestDataCheckPanel)
#include "test_data_check_panel.moc"
