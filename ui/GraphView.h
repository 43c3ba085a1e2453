// GraphView: the canvas widget. Wheel zoom around the cursor, zoom to fit,
// rubber-band selection, panning with the middle button, and drops of layer
// types from the LayerPalette (mime type LayerPalette::kMimeType).
#pragma once

#include <QGraphicsView>

namespace strata::ui {

class GraphScene;

class GraphView : public QGraphicsView {
    Q_OBJECT
public:
    explicit GraphView(GraphScene* scene, QWidget* parent = nullptr);
    GraphScene* graphScene() const { return m_scene; }

    // Adds a node of `type` with its top centre at a scene point; returns its id or -1.
    int addLayerAt(const QString& type, const QPointF& scenePos);
    int addLayerAtCentre(const QString& type);
    double zoom() const;
    // A note drawn over the canvas while the graph is locked (a training run); the canvas takes no edits
    // then (no selection, drags or drops). Empty: unlocked.
    void setLockNote(const QString& note);
    QString lockNote() const { return m_lockNote; }
    // What an empty canvas says ("Drag layers here ..."); empty when the graph has nodes.
    QString emptyHint() const;

public slots:
    void zoomIn();
    void zoomOut();
    void zoomToFit();
    // The view a project opens with: the whole graph when it fits at 100%, else 100% (node text at its
    // full size) from the top of the graph; never zoomed out below readable text.
    void showReadable();
    void resetZoom();
    void centreOnNode(int id);

signals:
    void statusMessage(const QString& text);

protected:
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragMoveEvent(QDragMoveEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void drawBackground(QPainter* painter, const QRectF& rect) override;
    void drawForeground(QPainter* painter, const QRectF& rect) override;
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    QString m_lockNote;
    void scaleBy(double factor);

    GraphScene* m_scene;
    bool m_panning = false;
    bool m_fitPending = false;  // zoomToFit asked for before the view had its size
    bool m_readable = false;    // the pending fit is showReadable's
    QPoint m_panStart;
};

}  // namespace strata::ui
