// EdgeItem: one edge on the canvas with its shape label.
#include "ui/EdgeItem.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPathStroker>
#include <cmath>

#include "ui/NodeItem.h"

namespace strata::ui {

namespace {

QFont labelFont() {
    QFont f(QStringLiteral("DejaVu Sans Mono"));
    f.setStyleHint(QFont::Monospace);
    f.setPointSizeF(7.5);
    return f;
}

const QColor kEdgeColor(0x5a, 0x63, 0x70);

}  // namespace

EdgeItem::EdgeItem(const strata::Edge& edge, QGraphicsItem* parent) : QGraphicsPathItem(parent), m_edge(edge) {
    setZValue(0);
    refreshPen();
}

QPainterPath EdgeItem::curve(const QPointF& from, const QPointF& to) {
    QPainterPath path(from);
    // Vertical tangents at both ports; the bend grows with the distance so long skips stay smooth.
    const double dy = std::max(40.0, std::abs(to.y() - from.y()) * 0.5);
    path.cubicTo(from + QPointF(0, dy), to - QPointF(0, dy), to);
    return path;
}

void EdgeItem::setEnds(const QPointF& from, const QPointF& to) {
    if (from == m_from && to == m_to && !path().isEmpty()) return;
    prepareGeometryChange();
    m_from = from;
    m_to = to;
    setPath(curve(from, to));
}

void EdgeItem::setLabel(const QString& shapeText) {
    if (shapeText == m_label) return;
    prepareGeometryChange();
    m_label = shapeText;
    update();
}

void EdgeItem::setProblem(const QString& message) {
    if (message == m_problem) return;
    m_problem = message;
    setToolTip(message.isEmpty() ? m_label : message);
    refreshPen();
    update();
}

void EdgeItem::refreshPen() {
    QPen pen(hasError() ? errorColor() : kEdgeColor, hasError() ? 2.2 : 1.6);
    pen.setCapStyle(Qt::RoundCap);
    setPen(pen);
    if (!hasError()) setToolTip(m_label);
}

QRectF EdgeItem::labelRect() const {
    if (m_label.isEmpty()) return QRectF();
    const QFontMetricsF fm(labelFont());
    const QSizeF size(fm.horizontalAdvance(m_label) + 10, fm.height() + 4);
    const QPointF mid = path().pointAtPercent(0.5);
    // Nodes stacked closely leave no room between them: put the label beside the node column,
    // level with the gap, instead of over the ports.
    const double gap = m_to.y() - m_from.y();
    if (gap < size.height() + 2 * NodeItem::kPortRadius + 8 && std::abs(m_to.x() - m_from.x()) < NodeItem::kWidth) {
        const double left = std::max(m_from.x(), m_to.x()) + NodeItem::kWidth / 2 + 6;
        return QRectF(QPointF(left, mid.y() - size.height() / 2), size);
    }
    return QRectF(mid - QPointF(size.width() / 2, size.height() / 2), size);
}

QRectF EdgeItem::boundingRect() const {
    return QGraphicsPathItem::boundingRect().united(labelRect()).adjusted(-4, -4, 4, 4);
}

QPainterPath EdgeItem::shape() const {
    QPainterPathStroker stroker;
    stroker.setWidth(8);
    QPainterPath s = stroker.createStroke(path());
    if (!m_label.isEmpty()) s.addRect(labelRect());
    return s;
}

void EdgeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setPen(pen());
    painter->setBrush(Qt::NoBrush);
    painter->drawPath(path());

    // Arrow head at the input port.
    const QPointF tip = m_to - QPointF(0, NodeItem::kPortRadius);
    QPolygonF head;
    head << tip << tip + QPointF(-4.5, -8) << tip + QPointF(4.5, -8);
    painter->setBrush(pen().color());
    painter->drawPolygon(head);

    if (m_label.isEmpty()) return;
    const QRectF r = labelRect();
    painter->setPen(QPen(hasError() ? errorColor() : QColor(0xc4, 0xca, 0xd2), 1));
    painter->setBrush(hasError() ? QColor(0xfd, 0xec, 0xec) : QColor(0xff, 0xff, 0xff, 235));
    painter->drawRoundedRect(r, 4, 4);
    painter->setFont(labelFont());
    painter->setPen(hasError() ? errorColor() : QColor(0x1f, 0x4e, 0x79));
    painter->drawText(r, Qt::AlignCenter, m_label);
}

}  // namespace strata::ui
