// NodeItem: one graph node on the canvas. It draws what the document says
// about the node (type, name, key parameters, parameter count, output shape,
// error state, frozen weights) and knows where its ports are; it owns no graph state.
// Input ports sit on the top edge, the output port at the bottom centre.
// The item's position is the node's (x, y): the centre of its top edge.
#pragma once

#include <QGraphicsObject>
#include <QString>
#include <QStringList>
#include <optional>
#include <string>
#include <vector>

namespace strata::ui {

struct NodeView {
    QString type, name, category;
    QStringList keyParams;       // "units=128", ...
    QString shapeText;           // "[N, 32, 28, 28]" or "?"
    qint64 parameterCount = -1;  // -1: unknown
    std::vector<std::string> inputPorts;
    QStringList problems;  // empty: valid
    bool frozen = false;   // Node::trainable false: drawn iced (hatched body, grey header, "frozen" in it)
};

struct PortHit {
    bool output = false;
    std::string port;  // "out" for the output
};

class NodeItem : public QGraphicsObject {
    Q_OBJECT
public:
    static constexpr double kWidth = 200.0;
    static constexpr double kPortRadius = 6.0;

    explicit NodeItem(int id, QGraphicsItem* parent = nullptr);
    int id() const { return m_id; }

    void setView(const NodeView& view);
    const NodeView& view() const { return m_view; }
    bool hasError() const { return !m_view.problems.isEmpty(); }
    // Ports with a problem of their own (drawn in the error colour).
    void setPortErrors(const QStringList& ports);
    // The Profile action's result for this node (ui/ProfileOverlay): the body is tinted by the node's share
    // of the step time (0..1) and the figures (HTML) join the tooltip. A negative share clears it.
    void setProfile(double share, const QString& figures);
    double profileShare() const { return m_profileShare; }

    // Scene positions of the ports.
    QPointF inputPortPos(const std::string& port) const;
    QPointF outputPortPos() const;
    // The port within grabbing distance of a scene point, if any.
    std::optional<PortHit> portAt(const QPointF& scenePos) const;

    QRectF boundingRect() const override;
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

signals:
    // Emitted while the item moves (drag), so edges can follow.
    void moved(int id);

protected:
    QVariant itemChange(GraphicsItemChange change, const QVariant& value) override;

private:
    QRectF bodyRect() const;
    QPointF inputPortLocal(size_t index) const;
    void updateToolTip();

    int m_id;
    NodeView m_view;
    QStringList m_portErrors;
    double m_profileShare = -1;
    QString m_profileFigures;
    double m_height = 96.0;
};

// Colours shared by the canvas items.
QColor categoryColor(const QString& category);
QColor errorColor();
QColor frozenColor();  // the header of a frozen node

}  // namespace strata::ui
