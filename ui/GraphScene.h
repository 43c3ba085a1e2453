// GraphScene: the canvas model. It observes the one Graph in a
// ProjectDocument and keeps a NodeItem per node and an EdgeItem per edge in
// step with it. User gestures (dragging ports, moving nodes, delete, paste)
// become ProjectDocument edits; the scene never changes the graph itself.
#pragma once

#include <QGraphicsScene>
#include <QHash>
#include <QList>
#include <QPointer>
#include <optional>

#include "core/graph/Graph.h"

class QMimeData;

namespace strata::ui {

class EdgeItem;
class NodeItem;
class ProjectDocument;

class GraphScene : public QGraphicsScene {
    Q_OBJECT
public:
    static constexpr const char* kNodesMimeType = "application/x-strata-nodes";

    explicit GraphScene(ProjectDocument* doc, QObject* parent = nullptr);
    ProjectDocument* document() const { return m_doc; }

    NodeItem* nodeItem(int id) const { return m_nodes.value(id); }
    // The edge feeding an input port.
    EdgeItem* edgeItem(const strata::PortRef& to) const;
    QList<EdgeItem*> edgeItems() const { return m_edges.values(); }
    QList<NodeItem*> nodeItems() const { return m_nodes.values(); }

    QList<int> selectedNodeIds() const;
    void selectNodes(const QList<int>& ids);

    // Edit operations (Edit menu, keys).
    void deleteSelection();
    // The selection and the edges among it, as mime data (kNodesMimeType plus JSON text).
    QMimeData* copySelection() const;
    // Adds the nodes in `mime` (offset so they do not cover the originals) and selects them.
    bool pasteFrom(const QMimeData* mime);

signals:
    // A gesture that did not become an edit, and why ("would make a cycle").
    void statusMessage(const QString& text);

protected:
    void mousePressEvent(QGraphicsSceneMouseEvent* event) override;
    void mouseMoveEvent(QGraphicsSceneMouseEvent* event) override;
    void mouseReleaseEvent(QGraphicsSceneMouseEvent* event) override;

private:
    struct PortDrag {
        strata::PortRef anchor;                   // the port the drag started from
        bool fromOutput = true;                   // anchor is an output port
        std::optional<strata::PortRef> detached;  // input port whose edge is being moved
    };
    struct PortAt {
        int node;
        bool output;
        std::string port;
    };

    void rebuild();
    void sync();
    void onNodeMoved(int id);
    void updateEdgesOf(int id);
    void updateEdgeGeometry(EdgeItem* edge);
    std::optional<PortAt> portAt(const QPointF& scenePos) const;
    void commitMoves();
    static QString edgeKey(const strata::PortRef& to);

    ProjectDocument* m_doc;
    QHash<int, NodeItem*> m_nodes;
    QHash<QString, EdgeItem*> m_edges;  // key: "<to node>:<to port>"
    std::optional<PortDrag> m_drag;
    // Where the left button went down, on the screen, and whether the mouse has since moved far enough
    // for a drag: a click only selects, even when the view scrolls or resizes under a still mouse (the
    // property panel appearing) and the press's scene position shifts.
    QPoint m_pressScreenPos;
    bool m_moveStarted = false;
    QGraphicsPathItem* m_dragPath = nullptr;
    bool m_syncing = false;
    mutable int m_pasteCount = 0;
};

}  // namespace strata::ui
