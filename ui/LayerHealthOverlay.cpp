// LayerHealthOverlay: see LayerHealthOverlay.h.
#include "ui/LayerHealthOverlay.h"

#include <QGraphicsItem>
#include <QPainter>
#include <map>

#include "ui/GraphScene.h"
#include "ui/NodeItem.h"

namespace strata::ui {

namespace {

class HealthBadge : public QGraphicsItem {
public:
    static constexpr int kType = UserType + 41;
    static constexpr double kRadius = 9;
    HealthBadge(bool severe, const QString& tip, QGraphicsItem* parent) : QGraphicsItem(parent), m_severe(severe) {
        setToolTip(tip);
        setZValue(10);
        // The node's top-right corner: its position is the centre of its top edge.
        setPos(NodeItem::kWidth / 2 - kRadius - 4, -kRadius + 2);
    }
    int type() const override { return kType; }
    QRectF boundingRect() const override { return {-kRadius, -kRadius, 2 * kRadius, 2 * kRadius}; }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override {
        p->setRenderHint(QPainter::Antialiasing);
        p->setPen(QPen(Qt::white, 1.5));
        p->setBrush(m_severe ? QColor(205, 45, 35) : QColor(40, 100, 210));
        p->drawEllipse(boundingRect().adjusted(1, 1, -1, -1));
        QFont f = p->font();
        f.setBold(true);
        f.setPointSizeF(9);
        p->setFont(f);
        p->drawText(boundingRect(), Qt::AlignCenter, m_severe ? QStringLiteral("!") : QStringLiteral("v"));
    }

private:
    bool m_severe;
};

}  // namespace

void clearLayerHealth(GraphScene* scene) {
    for (NodeItem* item : scene->nodeItems())
        for (QGraphicsItem* child : item->childItems())
            if (child->type() == HealthBadge::kType) delete child;
}

void applyLayerHealth(GraphScene* scene, const std::vector<LayerHealth>& health) {
    clearLayerHealth(scene);
    // One badge per node: a node may have a gradient verdict and (a ReLU) a dead one; both texts join.
    std::map<int, std::pair<bool, QString>> byNode;
    for (const LayerHealth& h : health) {
        if (h.text.empty()) continue;
        auto& [severe, text] = byNode[h.node];
        severe = severe || h.dead || h.gradient == GradientHealth::Exploding;
        text += (text.isEmpty() ? QString() : QStringLiteral("\n")) + QString::fromStdString(h.text);
    }
    for (NodeItem* item : scene->nodeItems()) {
        const auto it = byNode.find(item->id());
        if (it != byNode.end()) new HealthBadge(it->second.first, it->second.second, item);
    }
}

std::vector<std::pair<int, QString>> layerHealthBadges(GraphScene* scene) {
    std::vector<std::pair<int, QString>> out;
    for (NodeItem* item : scene->nodeItems())
        for (QGraphicsItem* child : item->childItems())
            if (child->type() == HealthBadge::kType) out.emplace_back(item->id(), child->toolTip());
    return out;
}

}  // namespace strata::ui
