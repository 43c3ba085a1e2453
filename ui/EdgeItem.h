// EdgeItem: one edge on the canvas, a curve from a node's output port to
// another node's input port, labelled with the tensor shape it carries
// ("[N, 32, 28, 28]"). Drawn in the error colour, with the validation
// message as tooltip, when the analysis reports a problem on its input port.
#pragma once

#include <QGraphicsPathItem>
#include <QString>

#include "core/graph/Graph.h"

namespace strata::ui {

class EdgeItem : public QGraphicsPathItem {
public:
    explicit EdgeItem(const strata::Edge& edge, QGraphicsItem* parent = nullptr);
    const strata::Edge& edge() const { return m_edge; }

    void setEnds(const QPointF& from, const QPointF& to);
    void setLabel(const QString& shapeText);
    QString label() const { return m_label; }
    // Empty: valid.
    void setProblem(const QString& message);
    bool hasError() const { return !m_problem.isEmpty(); }
    // Where the label is drawn (scene coordinates), for tests and hit checks.
    QRectF labelRect() const;

    QRectF boundingRect() const override;
    QPainterPath shape() const override;
    void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

    // The curve used for edges and for the connection being dragged.
    static QPainterPath curve(const QPointF& from, const QPointF& to);

private:
    void refreshPen();

    strata::Edge m_edge;
    QPointF m_from, m_to;
    QString m_label, m_problem;
};

}  // namespace strata::ui
