// Graph editor tests: build a graph with simulated gestures (palette drops,
// port-to-port drags, node drags, rubber band, Delete), check the shape
// labels on edges, undo and redo every kind of edit back to the start, load
// and save, bad files, and bad parameters reaching the problems list.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDropEvent>
#include <QGraphicsSceneMouseEvent>
#include <QLineEdit>
#include <QMimeData>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <QUndoStack>
#include <fstream>
#include <memory>

#include "core/train/MemoryEstimate.h"
#include "ui/EdgeItem.h"
#include "ui/FieldError.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/LayerPalette.h"
#include "ui/NodeItem.h"
#include "ui/ProblemsPanel.h"
#include "ui/PropertyPanel.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/Templates.h"

using namespace strata;
using namespace strata::ui;

namespace {

// One editor: document, scene, view, panels, shown offscreen.
struct Editor {
    ProjectDocument doc;
    GraphScene scene{&doc};
    QWidget window;
    GraphView* view;
    PropertyPanel* props;
    ProblemsPanel* problems;

    Editor() {
        view = new GraphView(&scene, &window);
        view->setGeometry(0, 0, 900, 800);
        props = new PropertyPanel(&doc, &scene, &window);
        props->setGeometry(900, 0, 300, 800);
        problems = new ProblemsPanel(&doc, &window);
        problems->setGeometry(0, 800, 1200, 150);
        window.resize(1200, 950);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        view->resetZoom();
        view->centerOn(0, 300);
    }

    QPoint toView(const QPointF& scenePos) const { return view->mapFromScene(scenePos); }

    int drop(const QString& type, const QPoint& viewPos) {
        QMimeData mime;
        mime.setData(QString::fromLatin1(LayerPalette::kMimeType), type.toUtf8());
        const int before = int(doc.graph().nodes().size());
        QDragEnterEvent enter(viewPos, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(view->viewport(), &enter);
        QDropEvent drop(QPointF(viewPos), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(view->viewport(), &drop);
        if (int(doc.graph().nodes().size()) != before + 1) return -1;
        return doc.graph().nodes().back()->id;  // ids grow, so the new node is last
    }

    void drag(const QPointF& fromScene, const QPointF& toScene) {
        const QPoint a = toView(fromScene), b = toView(toScene);
        QTest::mousePress(view->viewport(), Qt::LeftButton, Qt::NoModifier, a);
        QTest::mouseMove(view->viewport(), (a + b) / 2);
        QTest::mouseMove(view->viewport(), b);
        QTest::mouseRelease(view->viewport(), Qt::LeftButton, Qt::NoModifier, b);
    }

    void connectByMouse(int from, int to, const std::string& port = "in") {
        drag(scene.nodeItem(from)->outputPortPos(), scene.nodeItem(to)->inputPortPos(port));
    }

    QString label(int to, const std::string& port = "in") const {
        EdgeItem* e = scene.edgeItem({to, port});
        return e ? e->label() : QStringLiteral("<no edge>");
    }
};

void undoAll(QUndoStack* stack) {
    while (stack->canUndo()) stack->undo();
}

void redoAll(QUndoStack* stack) {
    while (stack->canRedo()) stack->redo();
}

}  // namespace

class TestGraphEditor : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void buildByGestures() {
        Editor ed;
        const Graph empty = ed.doc.graph();
        const int input = ed.drop(QStringLiteral("Input"), ed.toView({0, 0}));
        const int flatten = ed.drop(QStringLiteral("Flatten"), ed.toView({0, 200}));
        const int dense = ed.drop(QStringLiteral("Dense"), ed.toView({0, 400}));
        const int relu = ed.drop(QStringLiteral("ReLU"), ed.toView({0, 600}));
        QVERIFY(input > 0 && flatten > 0 && dense > 0 && relu > 0);
        QVERIFY(ed.doc.graph().node(dense)->type == std::string("Dense"));
        // Dropped where the mouse was (top centre of the node at the drop point).
        QVERIFY(std::abs(ed.doc.graph().node(flatten)->y - 200) < 2);
        QCOMPARE(ed.drop(QStringLiteral("NoSuchLayer"), ed.toView({300, 0})), -1);

        ed.connectByMouse(input, flatten);
        ed.connectByMouse(flatten, dense);
        ed.connectByMouse(dense, relu);
        QCOMPARE(int(ed.doc.graph().edges().size()), 3);
        QCOMPARE(ed.label(flatten), QStringLiteral("[N, 1, 28, 28]"));
        QCOMPARE(ed.label(dense), QStringLiteral("[N, 784]"));
        QCOMPARE(ed.label(relu), QStringLiteral("[N, 128]"));
        QVERIFY(ed.doc.analysis().ok());
        QVERIFY(!ed.scene.nodeItem(dense)->hasError());
        QCOMPARE(ed.scene.nodeItem(dense)->view().parameterCount, qint64(784 * 128 + 128));
        QCOMPARE(ed.scene.nodeItem(relu)->view().shapeText, QStringLiteral("[N, 128]"));

        // Labels follow edits: a different Input shape relabels every edge downstream.
        QVERIFY(ed.doc.setParam(input, QStringLiteral("shape"), Json::array({3, 8, 8})));
        QCOMPARE(ed.label(flatten), QStringLiteral("[N, 3, 8, 8]"));
        QCOMPARE(ed.label(dense), QStringLiteral("[N, 192]"));
        ed.doc.undoStack()->undo();
        QCOMPARE(ed.label(dense), QStringLiteral("[N, 784]"));

        // A cycle is refused with a message and changes nothing.
        QSignalSpy status(&ed.scene, &GraphScene::statusMessage);
        const Graph beforeCycle = ed.doc.graph();
        const int commands = ed.doc.undoStack()->count();
        ed.connectByMouse(relu, flatten);
        QVERIFY(ed.doc.graph() == beforeCycle);
        QCOMPARE(ed.doc.undoStack()->count(), commands);
        QCOMPARE(status.count(), 1);
        QVERIFY(status.front().front().toString().contains(QStringLiteral("cycle")));

        // Dragging a connected input away from its port and dropping it on empty canvas disconnects it.
        ed.drag(ed.scene.nodeItem(relu)->inputPortPos("in"), {400, 700});
        QVERIFY(!ed.doc.graph().edgeInto({relu, "in"}));
        QVERIFY(!ed.doc.analysis().ok());
        QVERIFY(ed.scene.nodeItem(relu)->hasError());
        ed.doc.undoStack()->undo();
        QVERIFY(ed.doc.graph().edgeInto({relu, "in"}));

        // Moving a node with the mouse is one undo command and the edges follow.
        const QPointF bodyOfDense = ed.scene.nodeItem(dense)->pos() + QPointF(0, 40);
        const int before = ed.doc.undoStack()->index();
        ed.drag(bodyOfDense, bodyOfDense + QPointF(120, 0));
        QCOMPARE(ed.doc.undoStack()->index(), before + 1);
        QVERIFY(std::abs(ed.doc.graph().node(dense)->x - 120) < 2);
        const QPointF edgeEnd = ed.scene.edgeItem({dense, "in"})->path().currentPosition();
        QVERIFY((edgeEnd - ed.scene.nodeItem(dense)->inputPortPos("in")).manhattanLength() < 0.5);

        // Rubber band over the two upper nodes selects exactly those.
        ed.view->setFocus();
        ed.drag({-300, -60}, {300, 260});
        QCOMPARE(ed.scene.selectedNodeIds(), (QList<int>{input, flatten}));

        // Copy and paste them: two new nodes, their inner edge, unique names.
        std::unique_ptr<QMimeData> clip(ed.scene.copySelection());
        QVERIFY(clip);
        QVERIFY(ed.scene.pasteFrom(clip.get()));
        QCOMPARE(int(ed.doc.graph().nodes().size()), 6);
        const QList<int> pasted = ed.scene.selectedNodeIds();
        QCOMPARE(pasted.size(), 2);
        QVERIFY(ed.doc.graph().edgeInto({pasted[1], "in"}));
        QVERIFY(ed.doc.graph().edgeInto({pasted[1], "in"})->from.node == pasted[0]);
        QVERIFY(ed.doc.graph().node(pasted[0])->name != ed.doc.graph().node(input)->name);
        QCOMPARE(ed.label(pasted[1]), QStringLiteral("[N, 1, 28, 28]"));

        // Delete key removes the selection with its edges.
        QTest::keyClick(ed.view->viewport(), Qt::Key_Delete);
        QCOMPARE(int(ed.doc.graph().nodes().size()), 4);
        QCOMPARE(int(ed.doc.graph().edges().size()), 3);
        QCOMPARE(ed.scene.nodeItems().size(), 4);

        const Graph built = ed.doc.graph();
        undoAll(ed.doc.undoStack());
        QVERIFY(ed.doc.graph() == empty);
        QVERIFY(ed.scene.nodeItems().isEmpty());
        QVERIFY(ed.scene.edgeItems().isEmpty());
        redoAll(ed.doc.undoStack());
        QVERIFY(ed.doc.graph() == built);
        QCOMPARE(ed.scene.edgeItems().size(), 3);
        QCOMPARE(ed.label(relu), QStringLiteral("[N, 128]"));
    }

    void reconnectByDraggingAnInput() {
        Editor ed;
        ed.doc.newProject(residualTemplate());
        const Graph& g = ed.doc.graph();
        const int add = g.nodeByName("block1_add")->id;
        const int stem = g.nodeByName("stem_relu")->id;
        QCOMPARE(g.edgeInto({add, "in1"})->from.node, stem);
        QCOMPARE(ed.label(add, "in0"), QStringLiteral("[N, 16, 28, 28]"));
        ed.view->centerOn(ed.scene.nodeItem(add));
        const Graph before = g;
        // Pick the skip edge up at in1 and drop it on in0: in0 is fed by the stem now, in1 by nothing.
        ed.drag(ed.scene.nodeItem(add)->inputPortPos("in1"), ed.scene.nodeItem(add)->inputPortPos("in0"));
        QCOMPARE(g.edgeInto({add, "in0"})->from.node, stem);
        QVERIFY(!g.edgeInto({add, "in1"}));
        QVERIFY(!ed.doc.analysis().ok());
        QVERIFY(ed.scene.nodeItem(add)->hasError());
        ed.doc.undoStack()->undo();
        QVERIFY(ed.doc.graph() == before);
    }

    void undoRedoEveryKindOfEdit() {
        ProjectDocument doc;
        doc.newProject(fashionCnnTemplate());
        QVERIFY2(doc.analysis().ok(),
                 doc.analysis().problems.empty() ? "" : doc.analysis().problems[0].message.c_str());
        QVERIFY(!doc.isModified());
        const Project initial = doc.project();
        std::vector<Project> states{doc.project()};
        auto step = [&](bool changed) {
            QVERIFY(changed);
            states.push_back(doc.project());
        };
        const Graph& g = doc.graph();
        const int conv1 = g.nodeByName("conv1")->id;
        const int relu1 = g.nodeByName("relu1")->id;
        const int pool1 = g.nodeByName("pool1")->id;

        const int extra = doc.addNode(QStringLiteral("Dropout"), {300, 100});
        step(extra > 0);
        step(doc.connectPorts({relu1, "out"}, {extra, "in"}));
        step(doc.disconnectPort({extra, "in"}));
        step(doc.connectPorts({conv1, "out"}, {extra, "in"}));
        step(doc.moveEdge({extra, "in"}, {pool1, "in"}));  // pool1 now fed by conv1 directly
        step(doc.setParam(conv1, QStringLiteral("filters"), 8));
        step(doc.rename(conv1, QStringLiteral("first_conv")));

        // Two consecutive moves of the same node merge into one command.
        const int count = doc.undoStack()->count();
        doc.moveNodes({{extra, QPointF(320, 100)}});
        doc.moveNodes({{extra, QPointF(340, 120)}});
        QCOMPARE(doc.undoStack()->count(), count + 1);
        step(g.node(extra)->x == 340);
        // A move of another set does not merge.
        doc.moveNodes({{extra, QPointF(340, 140)}, {conv1, QPointF(10, 150)}});
        step(doc.undoStack()->count() == count + 2);

        step(!doc.paste({*g.node(conv1), *g.node(relu1)}, {g.edgeInto({relu1, "in"}).value()}, {500, 0}).isEmpty());
        step(doc.removeNodes({extra, relu1}));
        doc.autoLayout();
        step(doc.undoStack()->count() == count + 5);
        auto ds = doc.project().dataset;
        ds.trainLimit = 1000;
        doc.setDatasetSettings(ds);
        step(doc.project().dataset.trainLimit == 1000);
        auto ts = doc.project().training;
        ts.learningRate = 0.5;
        doc.setTrainingSettings(ts);
        step(doc.project().training.learningRate == 0.5);
        QVERIFY(doc.isModified());

        // Undo one step at a time: each lands exactly on the state before that edit.
        QUndoStack* stack = doc.undoStack();
        QCOMPARE(stack->count(), int(states.size()) - 1);
        for (int i = int(states.size()) - 2; i >= 0; --i) {
            stack->undo();
            QVERIFY2(doc.project() == states[size_t(i)],
                     qPrintable(QStringLiteral("after undoing to state %1").arg(i)));
        }
        QVERIFY(doc.project() == initial);
        QVERIFY(doc.graph() == initial.graph);
        QVERIFY(!doc.isModified());
        for (size_t i = 1; i < states.size(); ++i) {
            stack->redo();
            QVERIFY2(doc.project() == states[i], qPrintable(QStringLiteral("after redoing to state %1").arg(i)));
        }
    }

    void setParamsThatDropPortsUndoesEdges() {
        ProjectDocument doc;
        doc.newProject(residualTemplate());
        const int add = doc.graph().nodeByName("block1_add")->id;
        const Graph before = doc.graph();
        QVERIFY(doc.setParam(add, QStringLiteral("inputs"), 3));
        QCOMPARE(doc.graph().inputPorts(add).size(), size_t(3));
        QVERIFY(doc.setParam(add, QStringLiteral("inputs"), 2));
        doc.undoStack()->undo();
        doc.undoStack()->undo();
        QVERIFY(doc.graph() == before);
    }

    void loadAndSaveRoundTrip() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("net.strata"));
        ProjectDocument doc;
        doc.newProject(residualTemplate());
        doc.addNode(QStringLiteral("Dropout"), {400, 400});
        QVERIFY(doc.isModified());
        QSignalSpy fileSpy(&doc, &ProjectDocument::fileChanged);
        QString error;
        QVERIFY2(doc.save(path, &error), qPrintable(error));
        QVERIFY(!doc.isModified());
        QVERIFY(fileSpy.count() >= 1);
        QCOMPARE(doc.filePath(), QFileInfo(path).absoluteFilePath());
        QCOMPARE(doc.displayName(), QStringLiteral("net.strata"));

        ProjectDocument other;
        QSignalSpy reset(&other, &ProjectDocument::projectReset);
        QVERIFY2(other.load(path, &error), qPrintable(error));
        QCOMPARE(reset.count(), 1);
        QVERIFY(other.project() == doc.project());
        QVERIFY(!other.isModified());
        QCOMPARE(other.undoStack()->count(), 0);
        QCOMPARE(other.analysis().problems.size(), doc.analysis().problems.size());
        other.undoStack()->clear();
        other.rename(other.graph().nodes().front()->id, QStringLiteral("renamed"));
        QVERIFY(other.isModified());
        other.undoStack()->undo();
        QVERIFY(!other.isModified());
    }

    void badFileChangesNothing() {
        QTemporaryDir dir;
        ProjectDocument doc;
        doc.newProject(mlpTemplate());
        doc.addNode(QStringLiteral("ReLU"), {0, 900});
        const Project before = doc.project();
        const int commands = doc.undoStack()->count();

        // A node whose type is unknown: the message names the JSON path.
        Json j = projectToJson(fashionCnnTemplate());
        j["graph"]["nodes"][2]["type"] = "Conv9D";
        const QString bad = dir.filePath(QStringLiteral("bad.strata"));
        std::ofstream(bad.toStdString()) << j.dump(2);
        QSignalSpy reset(&doc, &ProjectDocument::projectReset);
        QString error;
        QVERIFY(!doc.load(bad, &error));
        QVERIFY2(error.contains(QStringLiteral("/graph/nodes/2")), qPrintable(error));
        QVERIFY2(error.contains(QStringLiteral("Conv9D")), qPrintable(error));
        QVERIFY(doc.project() == before);
        QCOMPARE(doc.undoStack()->count(), commands);
        QVERIFY(doc.filePath().isEmpty());
        QCOMPARE(reset.count(), 0);

        // Truncated JSON.
        const QString truncated = dir.filePath(QStringLiteral("cut.strata"));
        const std::string text = projectToJson(fashionCnnTemplate()).dump(2);
        std::ofstream(truncated.toStdString()) << text.substr(0, text.size() / 2);
        error.clear();
        QVERIFY(!doc.load(truncated, &error));
        QVERIFY(!error.isEmpty());
        QVERIFY(doc.project() == before);

        // Missing file.
        error.clear();
        QVERIFY(!doc.load(dir.filePath(QStringLiteral("nope.strata")), &error));
        QVERIFY(!error.isEmpty());
        QVERIFY(doc.project() == before);
    }

    void badParameterShowsInProblemsAndNode() {
        Editor ed;
        ed.doc.newProject(mlpTemplate());
        const int fc1 = ed.doc.graph().nodeByName("fc1")->id;
        const int image = ed.doc.graph().nodeByName("image")->id;
        QVERIFY(ed.doc.analysis().ok());
        QCOMPARE(ed.problems->problemCount(), 0);

        // Through the property panel: select the Input, type a shape with a zero dimension.
        ed.scene.selectNodes({image});
        QCOMPARE(ed.props->nodeId(), image);
        auto* shapeEdit = qobject_cast<QLineEdit*>(ed.props->editor(QStringLiteral("shape")));
        QVERIFY(shapeEdit);
        QCOMPARE(shapeEdit->text(), QStringLiteral("1, 28, 28"));
        // Out of the allowed range: refused by the panel, nothing pushed.
        const int commands = ed.doc.undoStack()->count();
        shapeEdit->setText(QStringLiteral("1, 0, 28"));
        emit shapeEdit->editingFinished();
        QCOMPARE(ed.doc.undoStack()->count(), commands);
        // Valid for Input, wrong for Dense without a Flatten: select fc1 and feed it a 2-D shape by removing flatten.
        shapeEdit->setText(QStringLiteral("[784]"));
        emit shapeEdit->editingFinished();
        QVERIFY(ed.doc.graph().node(image)->params.at("shape") == Json::array({784}));
        QCOMPARE(ed.label(fc1), QStringLiteral("[N, 784]"));

        // Dense units through the panel's spin box: one command per change.
        ed.scene.selectNodes({fc1});
        auto* units = qobject_cast<QSpinBox*>(ed.props->editor(QStringLiteral("units")));
        QVERIFY(units);
        QCOMPARE(units->value(), 256);
        // Issue 17: an out-of-range value is neither clamped nor applied; it stays as typed, and the line
        // under the box says why until it is fixed.
        units->setValue(-5);
        QCOMPARE(units->value(), -5);
        QVERIFY(ed.doc.graph().node(fc1)->params.at("units") == Json(256));
        QVERIFY2(ed.props->fieldErrorText("units").contains("-5 is not applied: units must be 1 to 1,048,576"),
                 qPrintable(ed.props->fieldErrorText("units")));
        QVERIFY(ed.doc.rename(image, "pixels"));  // another edit refreshes the panel: the typed value stays
        QCOMPARE(units->value(), -5);
        units->setValue(64);
        QVERIFY(ed.props->fieldErrorText("units").isEmpty());
        QVERIFY(ed.doc.graph().node(fc1)->params.at("units") == Json(64));
        QCOMPARE(ed.props->shapeText(), QStringLiteral("[N, 64]"));
        QCOMPARE(ed.props->parameterCountText(), QStringLiteral("50,240"));

        // units 0 cannot be typed into the spin box; a file or script can set it: the node turns red,
        // the problems list names the parameter, and double-clicking it selects the node.
        QVERIFY(ed.doc.setParam(fc1, QStringLiteral("units"), 0));
        QVERIFY(ed.scene.nodeItem(fc1)->hasError());
        QVERIFY(ed.problems->problemCount() >= 1);
        bool named = false;
        for (int i = 0; i < ed.problems->problemCount(); ++i)
            named |= ed.problems->messageAt(i).contains(QStringLiteral("units"));
        QVERIFY(named);
        QVERIFY(ed.scene.nodeItem(fc1)->toolTip().contains(QStringLiteral("units")));
        ed.scene.clearSelection();
        QSignalSpy activated(ed.problems, &ProblemsPanel::problemActivated);
        QObject::connect(ed.problems, &ProblemsPanel::problemActivated, ed.view, &GraphView::centreOnNode);
        QTreeWidget* list = ed.problems->list();
        const QRect rect = list->visualItemRect(list->topLevelItem(0));
        QTest::mouseClick(list->viewport(), Qt::LeftButton, Qt::NoModifier, rect.center());
        QTest::mouseDClick(list->viewport(), Qt::LeftButton, Qt::NoModifier, rect.center());
        QCOMPARE(activated.count(), 1);
        QCOMPARE(activated.front().front().toInt(), fc1);
        QCOMPARE(ed.scene.selectedNodeIds(), QList<int>{fc1});
        QVERIFY(ed.view->viewport()->rect().contains(ed.toView(ed.scene.nodeItem(fc1)->sceneBoundingRect().center())));

        // A shape error: Dense fed a 3-D tensor. The edge into it is in the error colour.
        ed.doc.undoStack()->undo();
        QVERIFY(ed.doc.analysis().ok());
        ed.doc.setParam(image, QStringLiteral("shape"), Json::array({1, 28, 28}));
        const int flatten = ed.doc.graph().nodeByName("flatten")->id;
        QVERIFY(ed.doc.removeNodes({flatten}));
        QVERIFY(ed.doc.connectPorts({image, "out"}, {fc1, "in"}));
        QVERIFY(ed.scene.edgeItem({fc1, "in"})->hasError());
        QVERIFY(ed.scene.edgeItem({fc1, "in"})->toolTip().contains(QStringLiteral("Flatten")));
        QVERIFY(ed.scene.nodeItem(fc1)->hasError());
    }

    void kernelLargerThanInputThroughThePanel() {
        Editor ed;
        ed.doc.newProject(fashionCnnTemplate());
        const int conv1 = ed.doc.graph().nodeByName("conv1")->id;
        ed.scene.selectNodes({conv1});
        auto* kernel = qobject_cast<QLineEdit*>(ed.props->editor(QStringLiteral("kernel")));
        QVERIFY(kernel);
        QCOMPARE(kernel->text(), QStringLiteral("3, 3"));
        // 40x40 is inside the kernel's allowed range (1 to 63) but larger than the padded 28x28 input.
        kernel->setText(QStringLiteral("40, 40"));
        emit kernel->editingFinished();
        QVERIFY(ed.doc.graph().node(conv1)->params.at("kernel") == Json::array({40, 40}));
        QVERIFY(!ed.doc.analysis().ok());
        QVERIFY(ed.scene.nodeItem(conv1)->hasError());
        QVERIFY(ed.problems->problemCount() >= 1);
        QVERIFY2(ed.problems->messageAt(0).contains(QStringLiteral("conv1")), qPrintable(ed.problems->messageAt(0)));
        QCOMPARE(ed.scene.nodeItem(conv1)->view().shapeText, QStringLiteral("?"));
        // Undo restores the valid graph and clears the problem list.
        ed.doc.undoStack()->undo();
        QVERIFY(ed.doc.analysis().ok());
        QCOMPARE(ed.problems->problemCount(), 0);
        QCOMPARE(kernel->text(), QStringLiteral("3, 3"));
        QVERIFY(!ed.scene.nodeItem(conv1)->hasError());
    }

    // Issue 17: a click selects and never moves a node, even when the view shifts under a still mouse
    // between press and release (the property panel appearing resized the canvas: the node jumped by the
    // shift). A drag past the drag distance still moves it.
    void clickNeverMovesANode() {
        Editor ed;
        ed.doc.newProject(mlpTemplate());
        const Node* node = ed.doc.graph().nodes().back();
        const int id = node->id;
        const QPointF before(node->x, node->y);
        NodeItem* item = ed.scene.nodeItem(id);
        const QPointF grab = item->sceneBoundingRect().center();
        auto send = [&](QEvent::Type type, const QPointF& scenePos, const QPoint& screenPos, Qt::MouseButtons buttons) {
            QGraphicsSceneMouseEvent e(type);
            e.setScenePos(scenePos);
            e.setScreenPos(screenPos);
            e.setButton(type == QEvent::GraphicsSceneMouseMove ? Qt::NoButton : Qt::LeftButton);
            e.setButtons(buttons);
            e.setButtonDownScenePos(Qt::LeftButton, grab);
            e.setButtonDownScreenPos(Qt::LeftButton, QPoint(500, 400));
            e.setLastScenePos(grab);
            QApplication::sendEvent(&ed.scene, &e);
        };
        // The mouse stays at one screen point; its scene position moves by (250, 40).
        send(QEvent::GraphicsSceneMousePress, grab, QPoint(500, 400), Qt::LeftButton);
        send(QEvent::GraphicsSceneMouseMove, grab + QPointF(250, 40), QPoint(500, 400), Qt::LeftButton);
        send(QEvent::GraphicsSceneMouseRelease, grab + QPointF(250, 40), QPoint(500, 400), Qt::NoButton);
        QVERIFY(item->isSelected());
        QCOMPARE(item->pos(), before);
        QCOMPARE(QPointF(ed.doc.graph().node(id)->x, ed.doc.graph().node(id)->y), before);
        // A real drag moves it.
        send(QEvent::GraphicsSceneMousePress, grab, QPoint(500, 400), Qt::LeftButton);
        send(QEvent::GraphicsSceneMouseMove, grab + QPointF(60, 0), QPoint(560, 400), Qt::LeftButton);
        send(QEvent::GraphicsSceneMouseRelease, grab + QPointF(60, 0), QPoint(560, 400), Qt::NoButton);
        QCOMPARE(ed.doc.graph().node(id)->x, before.x() + 60);
    }

    void memoryEstimateAndTotals() {
        Editor ed;
        ed.doc.newProject(mlpTemplate());
        // The training run's predicted peak on the project's device (MemoryEstimate, checked against measured
        // peaks in test_memory_estimate), with the device's memory and the largest batch that fits.
        ed.props->batchSizeBox()->setValue(1000);
        const MemoryEstimate e = estimateTrainingMemory(ed.doc.graph(), ed.doc.project().training, 1000);
        const QString need = QStringLiteral("%1 MiB").arg(double(e.totalOn(true)) / 1024 / 1024, 0, 'f', 1);
        QVERIFY2(ed.props->memoryText().contains("fits on cpu: " + need + " of "), qPrintable(ed.props->memoryText()));
        QVERIFY2(ed.props->memoryText().contains("largest batch that fits: "), qPrintable(ed.props->memoryText()));
        // Issue 17: Dense 999999 after the 784 pixels, at the largest batch the box allows (terabytes of
        // activations), fits no machine: the panel says so in numbers.
        ed.props->batchSizeBox()->setValue(int(trainingSetting("batch_size").intMax));
        const Node* dense = nullptr;
        for (const Node* n : ed.doc.graph().nodes())
            if (n->type == "Dense" && !dense) dense = n;
        QVERIFY(ed.doc.setParam(dense->id, "units", 999999));
        QVERIFY2(ed.props->memoryText().contains("does not fit on cpu"), qPrintable(ed.props->memoryText()));
        QVERIFY2(ed.props->memoryText().contains("GiB"), qPrintable(ed.props->memoryText()));
        ed.doc.undoStack()->undo();
        // A batch out of range stays as typed and is refused with the reason; no estimate until it is fixed.
        ed.props->batchSizeBox()->setValue(0);
        QCOMPARE(ed.props->batchSizeBox()->value(), 0);
        QCOMPARE(fieldError(ed.props->batchSizeBox()), QStringLiteral("0 is not applied: must be 1 to 16777216."));
        QVERIFY2(ed.props->memoryText().contains("unknown until the batch size is valid"),
                 qPrintable(ed.props->memoryText()));
        ed.props->batchSizeBox()->setValue(64);
        QVERIFY(fieldError(ed.props->batchSizeBox()).isEmpty());
        QVERIFY2(ed.props->memoryText().contains("fits on cpu"), qPrintable(ed.props->memoryText()));
        // Several devices (data parallel): each holds its share of the batch, and the largest batch that fits
        // is a share per device.
        TrainingSettings two = ed.doc.project().training;
        two.device = "cpu,cpu";
        ed.doc.setTrainingSettings(two);
        ed.props->batchSizeBox()->setValue(1000);
        const MemoryEstimate share = estimateTrainingMemory(ed.doc.graph(), ed.doc.project().training, 500);
        const QString shareNeed = QStringLiteral("%1 MiB").arg(double(share.totalOn(true)) / 1024 / 1024, 0, 'f', 1);
        QVERIFY2(ed.props->memoryText().contains("fits on each of 2 devices (batch 500 each): " + shareNeed + " of "),
                 qPrintable(ed.props->memoryText()));
        const QRegularExpressionMatch largest =
            QRegularExpression("largest batch that fits: (\\d+)").match(ed.props->memoryText());
        QVERIFY2(largest.hasMatch(), qPrintable(ed.props->memoryText()));
        QVERIFY(largest.captured(1).toLongLong() >= 1000);
        QCOMPARE(largest.captured(1).toLongLong() % 2, 0);
        QCOMPARE(ed.props->totalParametersText(), QStringLiteral("203,530"));
        qint64 sum = 0;
        for (const Node* n : ed.doc.graph().nodes()) sum += std::max<qint64>(0, ed.doc.parameterCountOf(n->id));
        QCOMPARE(sum, qint64(ed.doc.analysis().parameterCount));
    }

    // The palette's Transformer encoder block: dropped below the selected sequence layer, it arrives wired to it
    // (its width taken from the sequence, its attention masked by the token ids) as one undoable edit.
    void transformerBlockFromThePalette() {
        Editor ed;
        Graph g;
        const int tokens = g.addNode("Input", "tokens", {{"shape", {12}}}, 0, 0);
        const int embed = g.addNode("Embedding", "embed", {{"vocab", 50}, {"dim", 16}}, 0, 110);
        g.connect(tokens, embed);
        const int positions = g.addNode("PositionalEmbedding", "positions", Json::object(), 0, 220);
        g.connect(embed, positions);
        Project p;
        p.graph = g;
        ed.doc.newProject(p);
        const Graph before = ed.doc.graph();
        ed.scene.selectNodes({positions});
        QMimeData mime;
        mime.setData(QString::fromLatin1(LayerPalette::kMimeType), QByteArray("block:transformer_encoder"));
        const QPoint at = ed.toView({0, 330});
        QDragEnterEvent enter(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(ed.view->viewport(), &enter);
        QDropEvent drop(QPointF(at), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(ed.view->viewport(), &drop);
        const Graph& after = ed.doc.graph();
        QCOMPARE(after.nodes().size(), before.nodes().size() + 8);
        QVERIFY2(ed.doc.analysis().ok(),
                 ed.doc.analysis().problems.empty() ? "" : ed.doc.analysis().problems[0].message.c_str());
        const Node* attention = after.nodeByName("block1_attention");
        QVERIFY(attention);
        QCOMPARE(attention->params.at("masked").get<bool>(), true);
        QCOMPARE(after.edgeInto({attention->id, "mask"})->from.node, tokens);
        QCOMPARE(after.edgeInto({attention->id, "in"})->from.node, positions);
        QCOMPARE(after.nodeByName("block1_ff2")->params.at("units").get<int>(), 16);
        QCOMPARE(*ed.doc.analysis().shapeOf(after.nodeByName("block1_norm2")->id), (Shape{12, 16}));
        // A second block takes the next prefix; one undo removes a whole block.
        ed.scene.selectNodes({after.nodeByName("block1_norm2")->id});
        const QPoint at2 = ed.toView({300, 330});
        QDragEnterEvent enter2(at2, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(ed.view->viewport(), &enter2);
        QDropEvent again(QPointF(at2), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(ed.view->viewport(), &again);
        QCOMPARE(ed.doc.graph().nodes().size(), before.nodes().size() + 16);
        QVERIFY(ed.doc.graph().nodeByName("block2_norm2"));
        QVERIFY(ed.doc.analysis().ok());
        ed.doc.undoStack()->undo();
        QVERIFY(!ed.doc.graph().nodeByName("block2_attention"));
        ed.doc.undoStack()->undo();
        QVERIFY(ed.doc.graph() == before);
    }

    void paletteFilterAndZoom() {
        LayerPalette palette;
        const QStringList all = palette.visibleTypes();
        QVERIFY(all.contains(QStringLiteral("Conv2D")));
        QVERIFY(all.contains(QStringLiteral("Dense")));
        // Issue 37's image layers, from the registry like every type.
        for (const char* t : {"ConvTranspose2D", "Upsample2D", "Clip", "HardSwish"})
            QVERIFY2(all.contains(QString::fromLatin1(t)), t);
        palette.filterEdit()->setText(QStringLiteral("pool"));
        const QStringList pools = palette.visibleTypes();
        QVERIFY(pools.contains(QStringLiteral("MaxPool2D")));
        QVERIFY(!pools.contains(QStringLiteral("Dense")));
        palette.filterEdit()->clear();
        QCOMPARE(palette.visibleTypes(), all);

        Editor ed;
        ed.doc.newProject(lenet5Template());
        const double z = ed.view->zoom();
        QWheelEvent wheel(QPointF(200, 200), ed.view->viewport()->mapToGlobal(QPointF(200, 200)), QPoint(),
                          QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(ed.view->viewport(), &wheel);
        QVERIFY(ed.view->zoom() > z * 1.1);
        ed.view->zoomToFit();
        for (NodeItem* item : ed.scene.nodeItems())
            QVERIFY(ed.view->viewport()->rect().contains(ed.toView(item->sceneBoundingRect().center())));

        // Auto-layout: one command; every edge points downward afterwards.
        ed.doc.moveNodes({{ed.doc.graph().nodes()[3]->id, QPointF(900, -500)}});
        const int count = ed.doc.undoStack()->count();
        ed.doc.autoLayout();
        QCOMPARE(ed.doc.undoStack()->count(), count + 1);
        for (const Edge& e : ed.doc.graph().edges())
            QVERIFY(ed.doc.graph().node(e.to.node)->y > ed.doc.graph().node(e.from.node)->y);
    }
};

QTEST_MAIN(TestGraphEditor)
#include "test_graph_editor.moc"
