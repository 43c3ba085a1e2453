// NodeItem: one graph node on the canvas.
#include "ui/NodeItem.h"

#include <QFontMetricsF>
#include <QGraphicsScene>
#include <QLocale>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <algorithm>
#include <cmath>

namespace strata::ui {

namespace {

constexpr double kHeader = 20.0;
constexpr double kLine = 15.0;
constexpr double kPad = 4.0;
constexpr double kGrab = 11.0;  // how close a press must be to a port centre
constexpr int kMaxParamLines = 1;

QString countText(qint64 n) {
    if (n <= 0) return QString();  // unknown, or a layer without weights
    if (n >= 1000000) return QObject::tr("%1M params").arg(double(n) / 1e6, 0, 'f', 2);
    return QObject::tr("%1 params").arg(QLocale(QLocale::English).toString(n));
}

}  // namespace

QColor errorColor() { return QColor(0xd6, 0x3b, 0x3b); }

QColor frozenColor() { return QColor(0x6f, 0x86, 0x9c); }

QColor categoryColor(const QString& category) {
    static const QList<QPair<QString, QColor>> known = {
        {"Input", QColor(0x3f, 0x8f, 0x5a)},          {"Core", QColor(0x3a, 0x6e, 0xa5)},
        {"Convolution", QColor(0x7a, 0x4f, 0xa8)},    {"Pooling", QColor(0x2f, 0x8c, 0x8c)},
        {"Activation", QColor(0xc0, 0x7a, 0x22)},     {"Normalization", QColor(0x8a, 0x6d, 0x3b)},
        {"Regularization", QColor(0x6b, 0x75, 0x80)}, {"Merge", QColor(0xa5, 0x4a, 0x6e)},
        {"Text", QColor(0x4a, 0x7d, 0x2e)},           {"Sequence", QColor(0x4a, 0x7d, 0x2e)},
    };
    for (const auto& [name, color] : known)
        if (category.compare(name, Qt::CaseInsensitive) == 0) return color;
    // Unknown categories still get a stable, distinct colour.
    return QColor::fromHsv(int(qHash(category) % 360), 120, 150);
}

NodeItem::NodeItem(int id, QGraphicsItem* parent) : QGraphicsObject(parent), m_id(id) {
    setFlags(ItemIsMovable | ItemIsSelectable | ItemSendsGeometryChanges);
    setAcceptHoverEvents(true);
    setZValue(1);
}

void NodeItem::setView(const NodeView& view) {
    const bool resize = view.keyParams.size() != m_view.keyParams.size() || view.inputPorts != m_view.inputPorts;
    if (resize) prepareGeometryChange();
    m_view = view;
    const int lines = std::min<int>(kMaxParamLines, int(m_view.keyParams.size()));
    // The bottom pad keeps the shape text clear of the output port circle.
    m_height = kHeader + kPad + kLine /*name*/ + lines * kLine + kLine /*shape*/ + kPad + kPortRadius;
    updateToolTip();
    update();
}

void NodeItem::setProfile(double share, const QString& figures) {
    m_profileShare = share;
    m_profileFigures = share < 0 ? QString() : figures;
    updateToolTip();
    update();
}

void NodeItem::setPortErrors(const QStringList& ports) {
    if (ports == m_portErrors) return;
    m_portErrors = ports;
    update();
}

QRectF NodeItem::bodyRect() const { return QRectF(-kWidth / 2, 0, kWidth, m_height); }

QRectF NodeItem::boundingRect() const {
    // Room for the ports, their labels above the top edge and the selection outline.
    return bodyRect().adjusted(-kPortRadius - 2, -kPortRadius - 16, kPortRadius + 2, kPortRadius + 2);
}

QPointF NodeItem::inputPortLocal(size_t index) const {
    const size_t n = m_view.inputPorts.size();
    const double x = -kWidth / 2 + kWidth * (double(index) + 1) / double(n + 1);
    return QPointF(x, 0);
}

QPointF NodeItem::inputPortPos(const std::string& port) const {
    for (size_t i = 0; i < m_view.inputPorts.size(); ++i)
        if (m_view.inputPorts[i] == port) return mapToScene(inputPortLocal(i));
    return mapToScene(QPointF(0, 0));
}

QPointF NodeItem::outputPortPos() const { return mapToScene(QPointF(0, m_height)); }

std::optional<PortHit> NodeItem::portAt(const QPointF& scenePos) const {
    const QPointF p = mapFromScene(scenePos);
    auto near = [&](const QPointF& c) { return std::hypot(p.x() - c.x(), p.y() - c.y()) <= kGrab; };
    if (near(QPointF(0, m_height))) return PortHit{true, "out"};
    for (size_t i = 0; i < m_view.inputPorts.size(); ++i)
        if (near(inputPortLocal(i))) return PortHit{false, m_view.inputPorts[i]};
    return std::nullopt;
}

void NodeItem::updateToolTip() {
    QString tip = QStringLiteral("<b>%1</b> (%2)").arg(m_view.name.toHtmlEscaped(), m_view.type.toHtmlEscaped());
    if (!m_view.shapeText.isEmpty()) tip += QStringLiteral("<br>output %1").arg(m_view.shapeText.toHtmlEscaped());
    if (m_view.frozen) tip += tr("<br>frozen: its weights are not trained");
    for (const QString& p : m_view.problems)
        tip += QStringLiteral("<br><span style='color:#d63b3b'>%1</span>").arg(p.toHtmlEscaped());
    if (!m_profileFigures.isEmpty()) tip += QStringLiteral("<hr>") + m_profileFigures;
    setToolTip(tip);
}

void NodeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget*) {
    painter->setRenderHint(QPainter::Antialiasing);
    const QRectF body = bodyRect();
    const QColor accent = categoryColor(m_view.category);
    const bool selected = option->state & QStyle::State_Selected;
    const bool error = hasError();

    // Body and header band.
    QPainterPath outline;
    outline.addRoundedRect(body, 6, 6);
    QColor fill(0xfb, 0xfb, 0xfc);
    if (m_profileShare >= 0) {
        // White to red by time share; the square root keeps a layer with a few percent visible.
        const double t = std::sqrt(std::clamp(m_profileShare, 0.0, 1.0));
        fill = QColor::fromRgbF(1.0, 1.0 - 0.62 * t, 1.0 - 0.70 * t);
    }
    if (m_view.frozen && m_profileShare < 0) fill = frozenColor().lighter(185);
    painter->fillPath(outline, fill);
    // Frozen weights: a hatched body and a grey-blue header, so a frozen backbone reads at a glance.
    if (m_view.frozen) painter->fillPath(outline, QBrush(frozenColor().lighter(150), Qt::BDiagPattern));
    painter->save();
    painter->setClipPath(outline);
    painter->fillRect(QRectF(body.left(), body.top(), body.width(), kHeader),
                      error ? errorColor() : (m_view.frozen ? frozenColor() : accent));
    painter->restore();

    QPen border(error ? errorColor() : (selected ? QColor(0x1e, 0x90, 0xff) : QColor(0x9a, 0xa0, 0xa8)));
    border.setWidthF(selected || error ? 2.2 : 1.0);
    if (selected && error) border.setStyle(Qt::DashLine);
    painter->setPen(border);
    painter->setBrush(Qt::NoBrush);
    painter->drawPath(outline);

    QFont base = painter->font();
    base.setPointSizeF(8.5);
    QFont bold = base;
    bold.setBold(true);
    QFont small = base;
    small.setPointSizeF(7.5);
    QFont mono = QFont(QStringLiteral("DejaVu Sans Mono"));
    mono.setStyleHint(QFont::Monospace);
    mono.setPointSizeF(8.0);

    const double textLeft = body.left() + kPad + 2;
    const double textWidth = body.width() - 2 * kPad - 4;

    // Header: type on the left, parameter count on the right.
    painter->setPen(Qt::white);
    painter->setFont(bold);
    const QRectF headerText(textLeft, body.top(), textWidth, kHeader);
    // A long type name ("MultiHeadSelfAttention") is elided before the count instead of running under it.
    QString count = countText(m_view.parameterCount);
    if (m_view.frozen) count = count.isEmpty() ? tr("frozen") : tr("frozen \u00b7 %1").arg(count);
    const double countWidth = count.isEmpty() ? 0.0 : QFontMetricsF(small).horizontalAdvance(count) + 6;
    painter->drawText(headerText, Qt::AlignLeft | Qt::AlignVCenter,
                      QFontMetricsF(bold).elidedText(m_view.type, Qt::ElideRight, textWidth - countWidth));
    painter->setFont(small);
    painter->drawText(headerText, Qt::AlignRight | Qt::AlignVCenter, count);

    double y = body.top() + kHeader + kPad;
    painter->setPen(QColor(0x20, 0x24, 0x2a));
    painter->setFont(bold);
    painter->drawText(QRectF(textLeft, y, textWidth, kLine), Qt::AlignLeft | Qt::AlignVCenter,
                      QFontMetricsF(bold).elidedText(m_view.name, Qt::ElideRight, textWidth));
    y += kLine;

    painter->setFont(base);
    painter->setPen(QColor(0x50, 0x56, 0x60));
    const QFontMetricsF fm(base);
    for (int i = 0; i < std::min<int>(kMaxParamLines, int(m_view.keyParams.size())); ++i) {
        QString line = m_view.keyParams[i];
        // The last line gathers the rest, elided.
        if (i == kMaxParamLines - 1 && m_view.keyParams.size() > kMaxParamLines)
            line = m_view.keyParams.mid(i).join(QStringLiteral(", "));
        painter->drawText(QRectF(textLeft, y, textWidth, kLine), Qt::AlignLeft | Qt::AlignVCenter,
                          fm.elidedText(line, Qt::ElideRight, textWidth));
        y += kLine;
    }

    painter->setFont(mono);
    painter->setPen(error ? errorColor() : QColor(0x1f, 0x4e, 0x79));
    painter->drawText(
        QRectF(textLeft, y, textWidth, kLine), Qt::AlignLeft | Qt::AlignVCenter,
        QFontMetricsF(mono).elidedText(QStringLiteral("\u2192 ") + m_view.shapeText, Qt::ElideRight, textWidth));

    // Ports.
    painter->setFont(small);
    for (size_t i = 0; i < m_view.inputPorts.size(); ++i) {
        const QPointF c = inputPortLocal(i);
        const bool bad = m_portErrors.contains(QString::fromStdString(m_view.inputPorts[i]));
        painter->setPen(QPen(bad ? errorColor() : QColor(0x44, 0x4a, 0x55), 1.4));
        painter->setBrush(bad ? errorColor().lighter(150) : QColor(0xff, 0xff, 0xff));
        painter->drawEllipse(c, kPortRadius, kPortRadius);
        if (m_view.inputPorts.size() > 1) {
            painter->setPen(QColor(0x50, 0x56, 0x60));
            painter->drawText(QRectF(c.x() + kPortRadius + 1, c.y() - kPortRadius - 14, 40, 12),
                              Qt::AlignLeft | Qt::AlignVCenter, QString::fromStdString(m_view.inputPorts[i]));
        }
    }
    painter->setPen(QPen(QColor(0x44, 0x4a, 0x55), 1.4));
    painter->setBrush(accent);
    painter->drawEllipse(QPointF(0, m_height), kPortRadius, kPortRadius);
}

QVariant NodeItem::itemChange(GraphicsItemChange change, const QVariant& value) {
    if (change == ItemPositionHasChanged) emit moved(m_id);
    return QGraphicsObject::itemChange(change, value);
}

}  // namespace strata::ui
