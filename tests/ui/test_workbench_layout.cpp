// The workbench as a new user finds it on a small screen and at the keyboard (issue 34): laid out at 1280 x 720
// and 1024 x 700 with nothing clipped (every widget inside its parent or scrolled to, no dock under its minimum,
// the window's minimum within the screen, Start on the toolbar), the Dataset panel usable while docked; the
// mouse wheel never changing a field without focus; every focusable control showing focus; Start reachable by
// F5 and from the toolbar by Tab; Ctrl+E opening the export dialog with the focus anywhere.
#include <QAbstractScrollArea>
#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFocusFrame>
#include <QKeyEvent>
#include <QLineEdit>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTest>
#include <QToolBar>
#include <QToolButton>
#include <QTreeWidget>
#include <QWheelEvent>

#include "tests/support/TestProjects.h"
#include "ui/ChartPanel.h"
#include "ui/DatasetPanel.h"
#include "ui/ExportDialog.h"
#include "ui/GraphView.h"
#include "ui/LayerPalette.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/TrainingSettingsPanel.h"
#include "ui/WorkbenchInput.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/Templates.h"

using namespace strata;
using namespace strata::ui;

namespace {

// Widgets that stick out of their parent, or that a scroll area holds larger than it shows without the
// scroll bar to reach the rest: "Class (objectName) in Parent: geometry outside WxH".
QStringList clippedWidgets(QWidget* root) {
    QStringList out;
    // A dock behind another's tab is parked outside the window: it and what it holds are not shown.
    QList<QWidget*> parked;
    for (QDockWidget* d : root->findChildren<QDockWidget*>())
        if (!d->isFloating() && !root->rect().intersects(d->geometry())) parked << d;
    auto isParked = [&](QWidget* w) {
        for (QWidget* d : parked)
            if (w == d || d->isAncestorOf(w)) return true;
        return false;
    };
    for (QWidget* w : root->findChildren<QWidget*>()) {
        QWidget* parent = w->parentWidget();
        if (!w->isVisible() || !parent || w->isWindow() || isParked(w)) continue;
        const QString who = QStringLiteral("%1 (%2) in %3")
                                .arg(w->metaObject()->className(), w->objectName(), parent->metaObject()->className());
        if (auto* area = qobject_cast<QAbstractScrollArea*>(parent->parentWidget());
            area && parent == area->viewport()) {
            // Scrolled content: what does not fit must be reachable by a scroll bar.
            if (w->width() > parent->width() + 1 && !area->horizontalScrollBar()->isVisible())
                out << who + QStringLiteral(": %1 px wide in %2 without a scroll bar")
                                 .arg(w->width())
                                 .arg(parent->width());
            if (w->height() > parent->height() + 1 && !area->verticalScrollBar()->isVisible())
                out << who + QStringLiteral(": %1 px high in %2 without a scroll bar")
                                 .arg(w->height())
                                 .arg(parent->height());
            continue;
        }
        if (qobject_cast<QFocusFrame*>(w)) continue;  // drawn around its widget, outside it by design
        if (!parent->rect().adjusted(-1, -1, 1, 1).contains(w->geometry()))
            out << who + QStringLiteral(": %1,%2 %3x%4 outside %5x%6")
                             .arg(w->x())
                             .arg(w->y())
                             .arg(w->width())
                             .arg(w->height())
                             .arg(parent->width())
                             .arg(parent->height());
    }
    return out;
}

QStringList docksUnderMinimum(MainWindow& w) {
    QStringList out;
    for (QDockWidget* d : w.findChildren<QDockWidget*>()) {
        if (!d->isVisible()) continue;
        const QSize min = d->minimumSizeHint().expandedTo(d->minimumSize());
        if (d->width() < min.width() || d->height() < min.height())
            out << QStringLiteral("%1: %2x%3 under %4x%5")
                       .arg(d->objectName())
                       .arg(d->width())
                       .arg(d->height())
                       .arg(min.width())
                       .arg(min.height());
    }
    return out;
}

void saveShot(QWidget* w, const QString& name) {
    if (!qEnvironmentVariable("STRATA_UI_SCREENSHOTS").isEmpty())
        w->grab().save(qEnvironmentVariable("STRATA_UI_SCREENSHOTS") + QLatin1Char('/') + name);
}

// A field that takes Ctrl+E for itself, as every line edit does under X11's key scheme (Ctrl+E: end of line;
// the offscreen platform uses another scheme, so the line edits here do not).
class EndOfLineField : public QLineEdit {
public:
    using QLineEdit::QLineEdit;
    bool event(QEvent* e) override {
        if (e->type() == QEvent::ShortcutOverride &&
            static_cast<QKeyEvent*>(e)->keyCombination() == QKeyCombination(Qt::ControlModifier, Qt::Key_E)) {
            e->accept();
            return true;
        }
        return QLineEdit::event(e);
    }
};

QToolButton* toolButtonFor(QToolBar* bar, QAction* action) {
    return qobject_cast<QToolButton*>(bar->widgetForAction(action));
}

QAction* actionNamed(MainWindow& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text().remove(QLatin1Char('&')) == text) return a;
    return nullptr;
}

}  // namespace

class TestWorkbenchLayout : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_workbench_layout"));
        QSettings().clear();
    }

    void smallScreens_data() {
        QTest::addColumn<QSize>("screen");
        QTest::newRow("1280x720") << QSize(1280, 720);
        QTest::newRow("1024x700") << QSize(1024, 700);
    }

    // The window fits the screen (it would not go below 1337 px wide), every panel of every bottom tab lies
    // inside its dock or scrolls, no dock is squeezed below its minimum, and Start stays on the toolbar.
    void smallScreens() {
        QFETCH(QSize, screen);
        MainWindow w;
        w.newProject(fashionCnnTemplate());
        w.resize(screen);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTest::qWait(50);
        const QSize min = w.minimumSizeHint().expandedTo(w.minimumSize());
        QVERIFY2(min.width() <= screen.width() && min.height() <= screen.height(),
                 qPrintable(QStringLiteral("minimum %1x%2").arg(min.width()).arg(min.height())));
        QCOMPARE(w.size(), screen);
        auto* bar = w.findChild<QToolBar*>(QStringLiteral("mainToolBar"));
        QToolButton* start = toolButtonFor(bar, actionNamed(w, QStringLiteral("Start Training")));
        QVERIFY2(start && start->isVisible(), "Start is hidden in the toolbar's overflow menu");
        QVERIFY(bar->rect().contains(start->geometry()));
        for (const char* dock : {"datasetDock", "trainingSettingsDock", "predictDock", "optimizeDock", "runsDock",
                                 "sweepDock", "dashboardDock"}) {
            w.dockNamed(QString::fromLatin1(dock))->raise();
            QTest::qWait(30);
            const QStringList clipped = clippedWidgets(&w);
            QVERIFY2(clipped.isEmpty(), qPrintable(QString::fromLatin1(dock) + QStringLiteral(": ") +
                                                   clipped.mid(0, 6).join(QStringLiteral("; "))));
            const QStringList squeezed = docksUnderMinimum(w);
            QVERIFY2(squeezed.isEmpty(), qPrintable(squeezed.join(QStringLiteral("; "))));
        }
        // The Optimize panel fits across the window: a row of all its controls needed 1337 px, so at these sizes
        // it scrolled sideways and its charts and layers table were out of view.
        const int optimizeMin = w.optimizePanel()->minimumSizeHint().width();
        QVERIFY2(optimizeMin <= screen.width() - 40,
                 qPrintable(QStringLiteral("Optimize panel %1 px").arg(optimizeMin)));
        // The canvas keeps a useful share of the window, and the dashboard its six charts in view.
        QVERIFY2(w.view()->width() >= screen.width() / 3 && w.view()->height() >= screen.height() / 3,
                 qPrintable(QStringLiteral("canvas %1x%2").arg(w.view()->width()).arg(w.view()->height())));
        w.dockNamed(QStringLiteral("dashboardDock"))->raise();
        QTest::qWait(30);
        TrainingDashboard* dash = w.dashboard();
        QVERIFY2(dash->height() <= dash->parentWidget()->height(),
                 qPrintable(
                     QStringLiteral("dashboard %1 px in %2").arg(dash->height()).arg(dash->parentWidget()->height())));
        for (const char* chart : {"loss", "accuracy", "lr", "throughput", "utilization", "memory"})
            QVERIFY2(dash->chart(chart)->height() >= 85, chart);
        saveShot(&w, QStringLiteral("main-window-%1x%2.png").arg(screen.width()).arg(screen.height()));
    }

    // The Dataset panel docked at 1280 x 720: its form and its preview side by side, each wide and high enough
    // to read (in the right column it showed a few lines of each, 150 px wide).
    void datasetPanelUsableDocked() {
        MainWindow w;
        w.newProject(fashionCnnTemplate());
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.dockNamed(QStringLiteral("datasetDock"))->raise();
        QTest::qWait(50);
        auto* panel = w.findChild<DatasetPanel*>();
        auto* split = panel->findChild<QSplitter*>();
        QVERIFY(split && split->count() == 2);
        for (int i = 0; i < 2; ++i) {
            // What shows of it, not what its scroll area holds.
            const QSize shown = split->widget(i)->visibleRegion().boundingRect().size();
            QVERIFY2(shown.width() >= 380 && shown.height() >= 200,
                     qPrintable(QStringLiteral("part %1: %2x%3 shown").arg(i).arg(shown.width()).arg(shown.height())));
        }
        saveShot(&w, QStringLiteral("dataset-docked-1280x720.png"));
    }

    // Issue 34: scrolling the Training panel changed weight decay from 0 to 0.0002 and the run used it. A wheel
    // over a field without focus leaves it alone and goes on to the panel's scroll area; with the focus, the
    // wheel steps it. Combo boxes too; and a wheel never gives a field the focus.
    void wheelLeavesUnfocusedFieldsAlone() {
        MainWindow w;
        w.newProject(fashionCnnTemplate());
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QApplication::setActiveWindow(&w);
        w.dockNamed(QStringLiteral("trainingSettingsDock"))->raise();
        QTest::qWait(30);
        auto* decay = w.findChild<QDoubleSpinBox*>(QStringLiteral("weight_decay"));
        auto* optimizer = w.findChild<QComboBox*>(QStringLiteral("optimizer"));
        QVERIFY(decay && optimizer);
        QCOMPARE(decay->focusPolicy(), Qt::StrongFocus);
        QCOMPARE(optimizer->focusPolicy(), Qt::StrongFocus);
        w.view()->setFocus();
        auto wheel = [](QWidget* target) {
            QWheelEvent e(QPointF(5, 5), QPointF(target->mapToGlobal(QPoint(5, 5))), QPoint(), QPoint(0, 120),
                          Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(target, &e);
            return e.isAccepted();
        };
        const int optimizerIndex = optimizer->currentIndex();
        for (int i = 0; i < 3; ++i) {
            QVERIFY(!wheel(decay));  // not taken: it goes on to the scroll area
            QVERIFY(!wheel(decay->findChild<QLineEdit*>()));
            QVERIFY(!wheel(optimizer));
        }
        QCOMPARE(decay->value(), 0.0);
        QCOMPARE(optimizer->currentIndex(), optimizerIndex);
        QCOMPARE(w.document()->project().training.weightDecay, 0.0);
        QVERIFY(!decay->hasFocus());
        // Focused, the wheel steps the field as always.
        decay->setFocus();
        QVERIFY(decay->hasFocus());
        wheel(decay);
        QCOMPARE(decay->value(), decay->singleStep());
    }

    // Every focusable control shows the focus: with it, the pixels along the control's edge differ from
    // without it (Fusion draws nothing for a tree, a tool button or the canvas), for every control of every
    // dock at 1280 x 720.
    void everyFocusableControlShowsFocus() {
        MainWindow w;
        w.newProject(fashionCnnTemplate());
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QApplication::setActiveWindow(&w);
        QStringList unseen;
        int checked = 0;
        for (const char* dock : {"dashboardDock", "datasetDock", "trainingSettingsDock", "sweepDock"}) {
            w.dockNamed(QString::fromLatin1(dock))->raise();
            QTest::qWait(30);
            for (QWidget* c : w.findChildren<QWidget*>()) {
                if (!(c->focusPolicy() & Qt::TabFocus) || !c->isVisible() || !c->isEnabled() || c->focusProxy() ||
                    c->visibleRegion().isEmpty())
                    continue;
                const QRect edge(c->mapTo(&w, QPoint(0, 0)), c->size());
                if (!w.rect().contains(edge.center())) continue;
                w.view()->setFocus();  // away from c (the canvas is not in these docks)
                if (c == w.view()) w.palette()->setFocus();
                QApplication::processEvents();
                const QImage before = w.grab(edge).toImage();
                c->setFocus(Qt::TabFocusReason);
                QApplication::processEvents();
                if (!c->hasFocus()) continue;
                const QImage after = w.grab(edge).toImage();
                ++checked;
                // The outermost two pixels all round.
                int changed = 0;
                for (int x = 0; x < after.width(); ++x)
                    for (int y : {0, 1, after.height() - 2, after.height() - 1})
                        changed += before.pixel(x, y) != after.pixel(x, y);
                if (changed < after.width())
                    unseen << QStringLiteral("%1 '%2' (%3 of %4 edge pixels changed)")
                                  .arg(c->metaObject()->className(), c->objectName())
                                  .arg(changed)
                                  .arg(2 * after.width());
            }
        }
        QVERIFY2(checked > 40, qPrintable(QString::number(checked)));
        QVERIFY2(unseen.isEmpty(),
                 qPrintable(QString::number(unseen.size()) + QStringLiteral(" without a visible focus: ") +
                            unseen.mid(0, 10).join(QStringLiteral("; "))));
        QVERIFY(WorkbenchInput::instance()->ringedWidget());
        w.dockNamed(QStringLiteral("trainingSettingsDock"))->raise();
        w.findChild<QDoubleSpinBox*>(QStringLiteral("learning_rate"))->setFocus();
        QTest::qWait(30);
        saveShot(&w, QStringLiteral("focus-ring.png"));
    }

    // Start by its shortcut (F5) with the focus in a field, and from the toolbar's first button in a few Tabs,
    // then Space.
    void startByKeyboard() {
        MainWindow w;
        Project p = test::blobsMlpProject("keyboard");
        p.training.epochs = 50;
        w.newProject(p);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QApplication::setActiveWindow(&w);
        QSignalSpy started(w.dashboard(), &TrainingDashboard::trainingStarted);
        QSignalSpy finished(w.dashboard(), &TrainingDashboard::trainingFinished);
        w.dockNamed(QStringLiteral("trainingSettingsDock"))->raise();
        auto* seed = w.findChild<QLineEdit*>(QStringLiteral("seed"));
        seed->setFocus();
        QTest::keyClick(seed, Qt::Key_F5);
        QCOMPARE(started.count(), 1);
        w.dashboard()->stopTraining();
        QVERIFY(finished.wait(60000));

        auto* bar = w.findChild<QToolBar*>(QStringLiteral("mainToolBar"));
        QWidget* first = bar->widgetForAction(bar->actions().front());
        QToolButton* start = toolButtonFor(bar, actionNamed(w, QStringLiteral("Start Training")));
        first->setFocus(Qt::TabFocusReason);
        QVERIFY(first->hasFocus());
        int tabs = 0;
        while (!start->hasFocus() && tabs < 5) {
            QTest::keyClick(QApplication::focusWidget(), Qt::Key_Tab);
            ++tabs;
        }
        QVERIFY2(start->hasFocus(), qPrintable(QApplication::focusWidget()->metaObject()->className()));
        QTest::keyClick(start, Qt::Key_Space);
        QCOMPARE(started.count(), 2);
        w.dashboard()->stopTraining();
        QVERIFY(finished.wait(60000));
    }

    // Ctrl+E opens the export dialog with the focus anywhere: the canvas, a line edit (which reads Ctrl+E as
    // "end of line"), a spin box, a tree, a field of a floating dock.
    void exportShortcutFromAnyFocus() {
        MainWindow w;
        w.newProject(fashionCnnTemplate());
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QApplication::setActiveWindow(&w);
        w.dockNamed(QStringLiteral("datasetDock"))->raise();
        QTest::qWait(20);
        auto* claims = new EndOfLineField(&w);
        w.statusBar()->addPermanentWidget(claims);
        claims->show();
        QList<QWidget*> places{w.view(), w.findChild<QLineEdit*>(QStringLiteral("train_images")),
                               w.findChild<QSpinBox*>(QStringLiteral("train_limit")), w.palette()->tree(), claims};
        for (QWidget* place : places) {
            QVERIFY(place);
            if (w.exportDialog()) w.exportDialog()->hide();
            place->setFocus();
            QVERIFY2(place->hasFocus(), place->metaObject()->className());
            QTest::keyClick(place, Qt::Key_E, Qt::ControlModifier);
            QVERIFY2(w.exportDialog() && w.exportDialog()->isVisible(), place->metaObject()->className());
        }
        w.exportDialog()->hide();
        QDockWidget* settings = w.dockNamed(QStringLiteral("trainingSettingsDock"));
        settings->setFloating(true);
        settings->show();
        QApplication::setActiveWindow(settings);
        auto* dir = settings->findChild<QLineEdit*>(QStringLiteral("checkpoint_dir"));
        dir->setFocus();
        QTest::keyClick(dir, Qt::Key_E, Qt::ControlModifier);
        QVERIFY(w.exportDialog()->isVisible());
    }
};

QTEST_MAIN(TestWorkbenchLayout)
#include "test_workbench_layout.moc"
