// Train > Find Learning Rate: the sweep runs off the GUI thread, its loss is drawn against the learning rate on
// a log axis with the suggestions marked, one click sets training.learning_rate (undoable), and closing the
// window stops a running sweep. STRATA_UI_SCREENSHOTS=<dir> saves the window as lr-finder.png.
#include <QAction>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>
#include <QUndoStack>
#include <cmath>

#include <qcustomplot.h>

#include "tests/support/TestProjects.h"
#include "ui/LrFinderDialog.h"
#include "ui/MainWindow.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

class TestLrFinderDialog : public QObject {
    Q_OBJECT

private slots:
    void sweepPlotsAndApplies() {
        Project p = test::blobsMlpProject("lr-dialog", 16, 4);
        MainWindow w;
        w.newProject(p);
        w.show();
        auto* action = w.findChild<QAction*>(QStringLiteral("findLearningRateAction"));
        QVERIFY(action);
        action->trigger();
        auto* dialog = w.findChild<LrFinderDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->isRunning());
        QVERIFY(!dialog->applySteepestButton()->isEnabled());
        QSignalSpy done(dialog, &LrFinderDialog::finished);
        QVERIFY(done.wait(120000));
        const LrFindResult& r = dialog->result();
        QVERIFY(r.points.size() >= 3);
        QCOMPARE(dialog->plottedPoints(), int(r.points.size()));
        auto* plot = dialog->findChild<QCustomPlot*>(QStringLiteral("lrFinderPlot"));
        QVERIFY(plot);
        QCOMPARE(plot->xAxis->scaleType(), QCPAxis::stLogarithmic);
        QVERIFY(std::isfinite(r.suggestion.steepest));
        QVERIFY(dialog->applySteepestButton()->isEnabled());
        if (const QByteArray dir = qgetenv("STRATA_UI_SCREENSHOTS"); !dir.isEmpty())
            dialog->grab().save(QString::fromUtf8(dir) + QStringLiteral("/lr-finder.png"));

        // One click: the rate the button shows becomes the setting; Undo takes it back.
        const double before = w.document()->project().training.learningRate;
        dialog->applySteepestButton()->click();
        const double applied = w.document()->project().training.learningRate;
        QCOMPARE(applied, QString::number(r.suggestion.steepest, 'g', 2).toDouble());
        QVERIFY(dialog->applySteepestButton()->text().contains(QString::number(applied, 'g', 2)));
        w.document()->undoStack()->undo();
        QCOMPARE(w.document()->project().training.learningRate, before);

        // Closing the window stops a sweep long before its 100000 steps.
        LrFindOptions slow;
        slow.steps = 100000;
        slow.maxLearningRate = 1e-6;  // a sweep that never diverges
        QVERIFY(dialog->start(slow));
        QVERIFY(QTest::qWaitFor([&] { return dialog->plottedPoints() > 0; }, 60000));
        dialog->close();
        QVERIFY(done.wait(60000));
        QVERIFY(dialog->result().stoppedEarly);
        QVERIFY(dialog->result().points.size() < 100000);
    }
};

QTEST_MAIN(TestLrFinderDialog)
#include "test_lr_finder_dialog.moc"
