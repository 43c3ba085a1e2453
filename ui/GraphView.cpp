// GraphView: the canvas widget.
#include "ui/GraphView.h"

#include <QDragEnterEvent>
#include <QDropEvent>
#include <QKeyEvent>
#include <QMimeData>
#include <QPainter>
#include <QScrollBar>
#include <QWheelEvent>
#include <cmath>
#include <utility>

#include "ui/GraphScene.h"
#include "ui/LayerPalette.h"
#include "ui/NodeItem.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {
constexpr double kMinZoom = 0.15;
constexpr double kMaxZoom = 3.0;
constexpr double kGrid = 20.0;
}  // namespace

GraphView::GraphView(GraphScene* scene, QWidget* parent) : QGraphicsView(scene, parent), m_scene(scene) {
    setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    setDragMode(QGraphicsView::RubberBandDrag);
    setRubberBandSelectionMode(Qt::IntersectsItemShape);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setResizeAnchor(QGraphicsView::AnchorViewCenter);
    setViewportUpdateMode(QGraphicsView::BoundingRectViewportUpdate);
    setAcceptDrops(true);
    setFocusPolicy(Qt::StrongFocus);
    // A generous scene rect so nodes can be dragged into empty space and the view can pan.
    setSceneRect(-4000, -4000, 8000, 8000);
    connect(scene, &GraphScene::statusMessage, this, &GraphView::statusMessage);
}

double GraphView::zoom() const { return transform().m11(); }

int GraphView::addLayerAt(const QString& type, const QPointF& scenePos) {
    QString error;
    if (type.startsWith(QLatin1String(LayerPalette::kBlockPrefix))) {
        // A block: fed by the one selected node, if any.
        const QList<int> selected = m_scene->selectedNodeIds();
        const QList<int> ids =
            m_scene->document()->insertBlock(type.mid(int(qstrlen(LayerPalette::kBlockPrefix))), scenePos,
                                             selected.size() == 1 ? selected[0] : -1, &error);
        if (ids.isEmpty()) {
            emit statusMessage(error);
            return -1;
        }
        m_scene->selectNodes(ids);
        return ids.front();
    }
    const int id = m_scene->document()->addNode(type, scenePos, strata::Json::object(), QString(), &error);
    if (id < 0) {
        emit statusMessage(error);
        return -1;
    }
    m_scene->selectNodes({id});
    return id;
}

int GraphView::addLayerAtCentre(const QString& type) {
    // Top centre of the node a little above the view centre, so the node sits in the middle.
    return addLayerAt(type, mapToScene(viewport()->rect().center()) - QPointF(0, 40));
}

void GraphView::scaleBy(double factor) {
    const double target = std::clamp(zoom() * factor, kMinZoom, kMaxZoom);
    const double f = target / zoom();
    if (std::abs(f - 1.0) > 1e-9) scale(f, f);
}

void GraphView::zoomIn() { scaleBy(1.25); }
void GraphView::zoomOut() { scaleBy(1 / 1.25); }
void GraphView::resetZoom() { setTransform(QTransform()); }

void GraphView::showReadable() {
    m_readable = true;
    zoomToFit();
}

void GraphView::zoomToFit() {
    if (!isVisible()) {
        m_fitPending = true;
        return;
    }
    m_fitPending = false;
    const bool readable = std::exchange(m_readable, false);
    QRectF bounds;
    for (NodeItem* item : m_scene->nodeItems()) bounds |= item->sceneBoundingRect();
    if (bounds.isEmpty()) return;
    bounds.adjust(-40, -40, 40, 40);
    fitInView(bounds, Qt::KeepAspectRatio);
    // Small graphs should not be blown up beyond a comfortable size.
    if (zoom() > 1.0) scaleBy(1.0 / zoom());
    if (zoom() < kMinZoom) scaleBy(kMinZoom / zoom());
    if (readable && zoom() < 1.0) {
        // 100%, from the top (the Input) of the graph down.
        scaleBy(1.0 / zoom());
        const double halfHeight = viewport()->height() / 2.0;
        centerOn(bounds.center().x(), bounds.top() + halfHeight);
        return;
    }
    centerOn(bounds.center());
}

void GraphView::showEvent(QShowEvent* event) {
    QGraphicsView::showEvent(event);
    if (m_fitPending) zoomToFit();
}

void GraphView::resizeEvent(QResizeEvent* event) {
    QGraphicsView::resizeEvent(event);
    if (m_fitPending) zoomToFit();
}

void GraphView::centreOnNode(int id) {
    if (NodeItem* item = m_scene->nodeItem(id)) {
        m_scene->selectNodes({id});
        centerOn(item);
    }
}

void GraphView::wheelEvent(QWheelEvent* event) {
    const double steps = event->angleDelta().y() / 120.0;
    if (steps != 0) scaleBy(std::pow(1.15, steps));
    event->accept();
}

void GraphView::setLockNote(const QString& note) {
    m_lockNote = note;
    setInteractive(note.isEmpty());
    setAcceptDrops(note.isEmpty());
    viewport()->setAcceptDrops(note.isEmpty());
    viewport()->update();
}

QString GraphView::emptyHint() const {
    return m_scene->nodeItems().isEmpty()
               ? tr("Drag layers here from the Layers list, or start from File > New from Template.")
               : QString();
}

void GraphView::drawForeground(QPainter* painter, const QRectF& rect) {
    QGraphicsView::drawForeground(painter, rect);
    if (const QString hint = emptyHint(); !hint.isEmpty()) {
        painter->save();
        painter->resetTransform();
        QFont font = painter->font();
        font.setPointSizeF(font.pointSizeF() * 1.3);
        painter->setFont(font);
        painter->setPen(QColor(0x6b, 0x72, 0x80));
        painter->drawText(viewport()->rect().adjusted(40, 0, -40, 0), Qt::AlignCenter | Qt::TextWordWrap, hint);
        painter->restore();
    }
    if (m_lockNote.isEmpty()) return;
    // In viewport pixels, at the top of the canvas, whatever the zoom.
    painter->save();
    painter->resetTransform();
    QFont font = painter->font();
    font.setPointSizeF(font.pointSizeF() * 1.1);
    font.setBold(true);
    painter->setFont(font);
    const QRect area = viewport()->rect().adjusted(12, 10, -12, 0);
    const QRect box = painter->fontMetrics()
                          .boundingRect(area, Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap, m_lockNote)
                          .adjusted(-12, -6, 12, 6);
    painter->setPen(QColor(0x8a, 0x5a, 0x00));
    painter->setBrush(QColor(0xff, 0xf4, 0xd6, 235));
    painter->drawRoundedRect(box, 6, 6);
    painter->drawText(box.adjusted(12, 6, -12, -6), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap, m_lockNote);
    painter->restore();
}

void GraphView::keyPressEvent(QKeyEvent* event) {
    if (!m_lockNote.isEmpty() && (event->key() == Qt::Key_Delete || event->key() == Qt::Key_Backspace)) {
        emit statusMessage(m_lockNote);
        event->accept();
        return;
    }
    if (event->key() == Qt::Key_Delete || event->key() == Qt::Key_Backspace) {
        m_scene->deleteSelection();
        event->accept();
        return;
    }
    QGraphicsView::keyPressEvent(event);
}

void GraphView::mousePressEvent(QMouseEvent* event) {
    if (event->button() == Qt::MiddleButton) {
        m_panning = true;
        m_panStart = event->pos();
        viewport()->setCursor(Qt::ClosedHandCursor);
        event->accept();
        return;
    }
    QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseMoveEvent(QMouseEvent* event) {
    if (m_panning) {
        const QPoint delta = event->pos() - m_panStart;
        m_panStart = event->pos();
        horizontalScrollBar()->setValue(horizontalScrollBar()->value() - delta.x());
        verticalScrollBar()->setValue(verticalScrollBar()->value() - delta.y());
        event->accept();
        return;
    }
    QGraphicsView::mouseMoveEvent(event);
}

void GraphView::mouseReleaseEvent(QMouseEvent* event) {
    if (m_panning && event->button() == Qt::MiddleButton) {
        m_panning = false;
        viewport()->unsetCursor();
        event->accept();
        return;
    }
    QGraphicsView::mouseReleaseEvent(event);
}

void GraphView::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasFormat(QString::fromLatin1(LayerPalette::kMimeType)))
        event->acceptProposedAction();
    else
        QGraphicsView::dragEnterEvent(event);
}

void GraphView::dragMoveEvent(QDragMoveEvent* event) {
    if (event->mimeData()->hasFormat(QString::fromLatin1(LayerPalette::kMimeType)))
        event->acceptProposedAction();
    else
        QGraphicsView::dragMoveEvent(event);
}

void GraphView::dropEvent(QDropEvent* event) {
    const QMimeData* mime = event->mimeData();
    if (!mime->hasFormat(QString::fromLatin1(LayerPalette::kMimeType))) {
        QGraphicsView::dropEvent(event);
        return;
    }
    const QString type = QString::fromUtf8(mime->data(QString::fromLatin1(LayerPalette::kMimeType)));
    if (addLayerAt(type, mapToScene(event->position().toPoint())) >= 0)
        event->acceptProposedAction();
    else
        event->ignore();
    setFocus();
}

void GraphView::drawBackground(QPainter* painter, const QRectF& rect) {
    painter->fillRect(rect, QColor(0xf2, 0xf4, 0xf7));
    if (zoom() < 0.4) return;  // a dense grid at low zoom is noise
    const double left = std::floor(rect.left() / kGrid) * kGrid;
    const double top = std::floor(rect.top() / kGrid) * kGrid;
    QVector<QPointF> dots;
    for (double x = left; x < rect.right(); x += kGrid)
        for (double y = top; y < rect.bottom(); y += kGrid) dots.append(QPointF(x, y));
    painter->setPen(QPen(QColor(0xc8, 0xcd, 0xd4), 1.5 / zoom()));
    painter->drawPoints(dots.data(), int(dots.size()));
}

}  // namespace strata::ui
