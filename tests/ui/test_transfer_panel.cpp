// Transfer learning in the editor (issue 37): the property panel's Trainable box freezes a node as one undoable
// edit, the canvas draws the frozen node its own way, and the head's Replace head row sets the last Dense's
// classes and new name, undoable too.
#include <QCheckBox>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStyleOptionGraphicsItem>
#include <QTest>
#include <QUndoStack>

#include "ui/GraphScene.h"
#include "ui/NodeItem.h"
#include "ui/PropertyPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

// Input [8] -> Dense 16 (hidden) -> ReLU -> Dense 4 (fc) on synthetic data in 6 classes.
Project smallProject() {
    Project p;
    p.name = "transfer";
    const int in = p.graph.addNode("Input", "input", Json{{"shape", {8}}});
    const int hidden = p.graph.addNode("Dense", "hidden", Json{{"units", 16}}, 0, 120);
    const int relu = p.graph.addNode("ReLU", "relu", Json::object(), 0, 240);
    const int fc = p.graph.addNode("Dense", "fc", Json{{"units", 4}}, 0, 360);
    p.graph.connect(in, hidden);
    p.graph.connect(hidden, relu);
    p.graph.connect(relu, fc);
    p.dataset.kind = DatasetKind::Synthetic;
    p.dataset.syntheticClasses = 6;
    return p;
}

}  // namespace

class TestTransferPanel : public QObject {
    Q_OBJECT
private slots:
    void trainableBoxIsAnUndoableEdit() {
        ProjectDocument doc;
        doc.newProject(smallProject());
        GraphScene scene(&doc);
        PropertyPanel panel(&doc, &scene);
        const int hidden = doc.graph().nodeByName("hidden")->id;
        scene.selectNodes({hidden});
        QCOMPARE(panel.nodeId(), hidden);
        QVERIFY(panel.trainableBox()->isChecked());
        QVERIFY(!scene.nodeItem(hidden)->view().frozen);
        const int commands = doc.undoStack()->count();

        panel.trainableBox()->setChecked(false);
        QVERIFY(!doc.graph().node(hidden)->trainable);
        QCOMPARE(doc.undoStack()->count(), commands + 1);
        QCOMPARE(doc.undoStack()->undoText(), QStringLiteral("Freeze hidden"));
        QVERIFY(scene.nodeItem(hidden)->view().frozen);
        QVERIFY(scene.nodeItem(hidden)->toolTip().contains(QStringLiteral("frozen")));

        doc.undoStack()->undo();
        QVERIFY(doc.graph().node(hidden)->trainable);
        QVERIFY(panel.trainableBox()->isChecked());
        QVERIFY(!scene.nodeItem(hidden)->view().frozen);
        doc.undoStack()->redo();
        QVERIFY(!doc.graph().node(hidden)->trainable);
        QVERIFY(!panel.trainableBox()->isChecked());

        // The same value again is no edit.
        QVERIFY(!doc.setTrainable(hidden, false));
        QCOMPARE(doc.undoStack()->count(), commands + 1);
    }

    void frozenNodeIsDrawnApart() {
        ProjectDocument doc;
        doc.newProject(smallProject());
        GraphScene scene(&doc);
        const int hidden = doc.graph().nodeByName("hidden")->id;
        NodeItem* item = scene.nodeItem(hidden);
        auto paint = [&] {
            QImage img(int(item->boundingRect().width()) + 2, int(item->boundingRect().height()) + 2,
                       QImage::Format_ARGB32);
            img.fill(Qt::white);
            QPainter p(&img);
            p.translate(-item->boundingRect().topLeft() + QPointF(1, 1));
            QStyleOptionGraphicsItem option;
            item->paint(&p, &option, nullptr);
            return img;
        };
        const QImage trainable = paint();
        doc.setTrainable(hidden, false);
        const QImage frozen = paint();
        QVERIFY(trainable != frozen);
        // The header band takes the frozen colour: hundreds of its pixels, none before.
        auto count = [](const QImage& img) {
            int n = 0;
            for (int y = 0; y < img.height(); ++y)
                for (int x = 0; x < img.width(); ++x)
                    n += (img.pixel(x, y) & 0xffffff) == (frozenColor().rgb() & 0xffffff);
            return n;
        };
        QCOMPARE(count(trainable), 0);
        QVERIFY2(count(frozen) > 500, QByteArray::number(count(frozen)).constData());
    }

    void replaceHeadSetsClassesAndIsUndoable() {
        ProjectDocument doc;
        doc.newProject(smallProject());
        GraphScene scene(&doc);
        PropertyPanel panel(&doc, &scene);
        const int hidden = doc.graph().nodeByName("hidden")->id, fc = doc.graph().nodeByName("fc")->id;
        // Only the head (the last Dense) offers it.
        scene.selectNodes({hidden});
        QVERIFY(!panel.replaceHeadButton()->isVisibleTo(&panel));
        scene.selectNodes({fc});
        QVERIFY(panel.replaceHeadButton()->isVisibleTo(&panel));
        QCOMPARE(panel.headClassesBox()->value(), 6);  // the synthetic data set's classes
        const strata::Graph original = doc.graph();

        panel.replaceHeadButton()->click();
        QCOMPARE(doc.graph().node(fc)->name, std::string("fc_new"));
        QCOMPARE(doc.graph().node(fc)->params["units"].get<int>(), 6);
        QCOMPARE(doc.undoStack()->undoText(), QStringLiteral("Replace head fc (6 classes)"));
        doc.undoStack()->undo();
        QVERIFY(doc.graph() == original);
    }
};

QTEST_MAIN(TestTransferPanel)
#include "test_transfer_panel.moc"
