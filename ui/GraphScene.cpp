// GraphScene: the canvas model over the ProjectDocument's graph.
#include "ui/GraphScene.h"

#include <QApplication>
#include <QGraphicsSceneMouseEvent>
#include <QMimeData>
#include <map>

#include "core/io/JsonInput.h"
#include "core/layers/LayerRegistry.h"
#include "ui/EdgeItem.h"
#include "ui/NodeItem.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {

// "units=128", "kernel=[3,3]": the parameters worth showing on the node face. Defaults of
// booleans and of the weight initializer are left out; they rarely tell nodes apart.
QStringList keyParams(const strata::Node& node, const strata::GraphAnalysis& analysis) {
    QStringList out;
    const strata::LayerType* lt = strata::layerRegistry().find(node.type);
    auto normalized = analysis.params.find(node.id);
    const strata::Json& params = normalized != analysis.params.end() ? normalized->second : node.params;
    if (!lt) {
        if (params.is_object())
            for (auto it = params.begin(); it != params.end(); ++it)
                out << QString::fromStdString(it.key() + "=" + it.value().dump());
        return out;
    }
    for (const strata::ParamSpec& spec : lt->paramSpecs()) {
        const bool present = params.is_object() && params.contains(spec.name);
        const strata::Json value = present ? params.at(spec.name) : spec.defaultValue;
        if ((spec.kind == strata::ParamSpec::Kind::Bool || spec.name == "init") && value == spec.defaultValue) continue;
        std::string text = value.is_string() ? value.get<std::string>() : value.dump();
        out << QString::fromStdString(spec.name + "=" + text);
    }
    return out;
}

}  // namespace

GraphScene::GraphScene(ProjectDocument* doc, QObject* parent) : QGraphicsScene(parent), m_doc(doc) {
    setItemIndexMethod(QGraphicsScene::NoIndex);  // items move often and there are few of them
    // Every graph change is followed by analysisChanged (shapes and problems): one sync per edit.
    connect(doc, &ProjectDocument::analysisChanged, this, &GraphScene::sync);
    connect(doc, &ProjectDocument::projectReset, this, &GraphScene::rebuild);
    connect(doc, &ProjectDocument::nodeMoved, this, &GraphScene::onNodeMoved);
    rebuild();
}

QString GraphScene::edgeKey(const strata::PortRef& to) {
    return QString::number(to.node) + QLatin1Char(':') + QString::fromStdString(to.port);
}

EdgeItem* GraphScene::edgeItem(const strata::PortRef& to) const { return m_edges.value(edgeKey(to)); }

void GraphScene::rebuild() {
    m_drag.reset();
    m_dragPath = nullptr;
    clear();  // deletes every item
    m_nodes.clear();
    m_edges.clear();
    sync();
}

void GraphScene::sync() {
    m_syncing = true;
    const strata::Graph& g = m_doc->graph();
    const strata::GraphAnalysis& analysis = m_doc->analysis();

    // Nodes.
    QSet<int> alive;
    for (const strata::Node* n : g.nodes()) {
        alive.insert(n->id);
        NodeItem* item = m_nodes.value(n->id);
        if (!item) {
            item = new NodeItem(n->id);
            addItem(item);
            m_nodes.insert(n->id, item);
            connect(item, &NodeItem::moved, this, &GraphScene::updateEdgesOf);
        }
        NodeView view;
        view.type = QString::fromStdString(n->type);
        view.name = QString::fromStdString(n->name);
        if (const strata::LayerType* lt = strata::layerRegistry().find(n->type))
            view.category = QString::fromStdString(lt->category());
        view.keyParams = keyParams(*n, analysis);
        view.shapeText = m_doc->shapeText(n->id);
        view.parameterCount = m_doc->parameterCountOf(n->id);
        view.inputPorts = g.inputPorts(n->id);
        view.frozen = !n->trainable;
        QStringList portErrors;
        for (const strata::Problem& p : m_doc->problemsOf(n->id)) {
            view.problems << QString::fromStdString(p.message);
            if (!p.port.empty()) portErrors << QString::fromStdString(p.port);
        }
        item->setView(view);
        item->setPortErrors(portErrors);
        if (item->pos() != QPointF(n->x, n->y)) item->setPos(n->x, n->y);
    }
    for (auto it = m_nodes.begin(); it != m_nodes.end();) {
        if (!alive.contains(it.key())) {
            delete it.value();
            it = m_nodes.erase(it);
        } else {
            ++it;
        }
    }

    // Edges: keyed by their input port, which takes at most one edge.
    QSet<QString> liveEdges;
    for (const strata::Edge& e : g.edges()) {
        const QString key = edgeKey(e.to);
        liveEdges.insert(key);
        EdgeItem* item = m_edges.value(key);
        if (item && !(item->edge() == e)) {
            delete item;
            item = nullptr;
        }
        if (!item) {
            item = new EdgeItem(e);
            addItem(item);
            m_edges.insert(key, item);
        }
        item->setLabel(m_doc->shapeText(e.from.node));
        QString problem;
        for (const strata::Problem& p : m_doc->problemsOf(e.to.node))
            if (p.port == e.to.port) problem = QString::fromStdString(p.message);
        item->setProblem(problem);
        updateEdgeGeometry(item);
    }
    for (auto it = m_edges.begin(); it != m_edges.end();) {
        if (!liveEdges.contains(it.key())) {
            delete it.value();
            it = m_edges.erase(it);
        } else {
            ++it;
        }
    }
    m_syncing = false;
}

void GraphScene::onNodeMoved(int id) {
    const strata::Node* n = m_doc->graph().node(id);
    NodeItem* item = m_nodes.value(id);
    if (n && item && item->pos() != QPointF(n->x, n->y)) item->setPos(n->x, n->y);
}

void GraphScene::updateEdgesOf(int id) {
    for (EdgeItem* e : std::as_const(m_edges))
        if (e->edge().from.node == id || e->edge().to.node == id) updateEdgeGeometry(e);
}

void GraphScene::updateEdgeGeometry(EdgeItem* edge) {
    NodeItem* from = m_nodes.value(edge->edge().from.node);
    NodeItem* to = m_nodes.value(edge->edge().to.node);
    if (from && to) edge->setEnds(from->outputPortPos(), to->inputPortPos(edge->edge().to.port));
}

QList<int> GraphScene::selectedNodeIds() const {
    QList<int> ids;
    for (QGraphicsItem* item : selectedItems())
        if (auto* node = dynamic_cast<NodeItem*>(item)) ids << node->id();
    std::sort(ids.begin(), ids.end());
    return ids;
}

void GraphScene::selectNodes(const QList<int>& ids) {
    clearSelection();
    for (int id : ids)
        if (NodeItem* item = m_nodes.value(id)) item->setSelected(true);
}

void GraphScene::deleteSelection() {
    const QList<int> ids = selectedNodeIds();
    if (!ids.isEmpty()) m_doc->removeNodes(ids);
}

QMimeData* GraphScene::copySelection() const {
    const QList<int> ids = selectedNodeIds();
    if (ids.isEmpty()) return nullptr;
    const strata::Graph& g = m_doc->graph();
    strata::Json nodes = strata::Json::array();
    strata::Json edges = strata::Json::array();
    for (int id : ids) {
        const strata::Node* n = g.node(id);
        nodes.push_back(
            {{"id", n->id}, {"type", n->type}, {"name", n->name}, {"params", n->params}, {"x", n->x}, {"y", n->y}});
    }
    for (const strata::Edge& e : g.edges())
        if (ids.contains(e.from.node) && ids.contains(e.to.node))
            edges.push_back({{"from", e.from.node}, {"to", e.to.node}, {"port", e.to.port}});
    const strata::Json doc = {{"nodes", nodes}, {"edges", edges}};
    auto* mime = new QMimeData;
    const QByteArray bytes = QByteArray::fromStdString(doc.dump(2));
    mime->setData(QString::fromLatin1(kNodesMimeType), bytes);
    mime->setText(QString::fromUtf8(bytes));
    m_pasteCount = 0;
    return mime;
}

bool GraphScene::pasteFrom(const QMimeData* mime) {
    if (!mime || !mime->hasFormat(QString::fromLatin1(kNodesMimeType))) return false;
    std::vector<strata::Node> nodes;
    std::vector<strata::Edge> edges;
    try {
        const strata::Json doc = strata::parseJson<strata::Json>(
            mime->data(QString::fromLatin1(kNodesMimeType)).toStdString(), "the clipboard");
        for (const strata::Json& n : doc.at("nodes")) {
            strata::Node node;
            node.id = n.at("id").get<int>();
            node.type = n.at("type").get<std::string>();
            node.name = n.at("name").get<std::string>();
            node.params = n.at("params");
            node.x = n.at("x").get<double>();
            node.y = n.at("y").get<double>();
            nodes.push_back(std::move(node));
        }
        for (const strata::Json& e : doc.at("edges"))
            edges.push_back(
                {{e.at("from").get<int>(), "out"}, {e.at("to").get<int>(), e.at("port").get<std::string>()}});
    } catch (const std::exception& e) {
        emit statusMessage(tr("The clipboard does not hold Strata nodes: %1").arg(QString::fromUtf8(e.what())));
        return false;
    }
    ++m_pasteCount;
    const double shift = 40.0 * m_pasteCount;
    const QList<int> created = m_doc->paste(nodes, edges, QPointF(shift, shift));
    selectNodes(created);
    return !created.isEmpty();
}

std::optional<GraphScene::PortAt> GraphScene::portAt(const QPointF& scenePos) const {
    const QRectF probe(scenePos - QPointF(14, 14), QSizeF(28, 28));
    for (QGraphicsItem* item : items(probe))
        if (auto* node = dynamic_cast<NodeItem*>(item))
            if (auto hit = node->portAt(scenePos)) return PortAt{node->id(), hit->output, hit->port};
    return std::nullopt;
}

void GraphScene::mousePressEvent(QGraphicsSceneMouseEvent* event) {
    if (event->button() == Qt::LeftButton) {
        m_pressScreenPos = event->screenPos();
        m_moveStarted = false;
        if (auto hit = portAt(event->scenePos())) {
            PortDrag drag;
            QPointF start;
            if (hit->output) {
                drag.anchor = {hit->node, "out"};
                drag.fromOutput = true;
                start = m_nodes.value(hit->node)->outputPortPos();
            } else if (auto edge = m_doc->graph().edgeInto({hit->node, hit->port})) {
                // Dragging a connected input picks the edge up: drop it on another input to
                // reconnect, or on empty canvas to disconnect.
                drag.anchor = edge->from;
                drag.fromOutput = true;
                drag.detached = edge->to;
                start = m_nodes.value(edge->from.node)->outputPortPos();
                if (EdgeItem* item = edgeItem(edge->to)) item->setVisible(false);
            } else {
                drag.anchor = {hit->node, hit->port};
                drag.fromOutput = false;
                start = m_nodes.value(hit->node)->inputPortPos(hit->port);
            }
            m_drag = drag;
            m_dragPath = addPath(
                drag.fromOutput ? EdgeItem::curve(start, event->scenePos()) : EdgeItem::curve(event->scenePos(), start),
                QPen(QColor(0x1e, 0x90, 0xff), 1.8, Qt::DashLine));
            m_dragPath->setZValue(2);
            m_dragPath->setData(0, start);
            event->accept();
            return;
        }
    }
    QGraphicsScene::mousePressEvent(event);
}

void GraphScene::mouseMoveEvent(QGraphicsSceneMouseEvent* event) {
    if (m_drag && m_dragPath) {
        const QPointF start = m_dragPath->data(0).toPointF();
        m_dragPath->setPath(m_drag->fromOutput ? EdgeItem::curve(start, event->scenePos())
                                               : EdgeItem::curve(event->scenePos(), start));
        event->accept();
        return;
    }
    if ((event->buttons() & Qt::LeftButton) && !m_moveStarted) {
        if ((event->screenPos() - m_pressScreenPos).manhattanLength() < QApplication::startDragDistance()) {
            event->accept();  // not a drag yet: nothing moves
            return;
        }
        m_moveStarted = true;
    }
    QGraphicsScene::mouseMoveEvent(event);
}

void GraphScene::mouseReleaseEvent(QGraphicsSceneMouseEvent* event) {
    if (!m_drag) {
        QGraphicsScene::mouseReleaseEvent(event);
        if (event->button() == Qt::LeftButton) commitMoves();
        return;
    }
    const PortDrag drag = *m_drag;
    m_drag.reset();
    delete m_dragPath;
    m_dragPath = nullptr;
    if (drag.detached)
        if (EdgeItem* item = edgeItem(*drag.detached)) item->setVisible(true);

    const auto target = portAt(event->scenePos());
    QString error;
    bool ok = true;
    if (drag.fromOutput) {
        if (target && !target->output) {
            const strata::PortRef to{target->node, target->port};
            if (drag.detached && *drag.detached == to)
                ok = true;  // dropped back where it was
            else if (drag.detached)
                ok = m_doc->moveEdge(*drag.detached, to, &error);
            else
                ok = m_doc->connectPorts(drag.anchor, to, &error);
        } else if (drag.detached && !target) {
            m_doc->disconnectPort(*drag.detached);
        }
    } else if (target && target->output) {
        ok = m_doc->connectPorts({target->node, "out"}, drag.anchor, &error);
    }
    if (!ok && !error.isEmpty()) emit statusMessage(error);
    event->accept();
}

void GraphScene::commitMoves() {
    QMap<int, QPointF> moved;
    for (NodeItem* item : std::as_const(m_nodes)) {
        const strata::Node* n = m_doc->graph().node(item->id());
        if (n && item->pos() != QPointF(n->x, n->y)) moved.insert(item->id(), item->pos());
    }
    if (!moved.isEmpty()) m_doc->moveNodes(moved);
}

}  // namespace strata::ui
