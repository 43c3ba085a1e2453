// LayerPalette: grouped, searchable list of layer types.
#include "ui/LayerPalette.h"

#include <QHeaderView>
#include <QLineEdit>
#include <QMimeData>
#include <QPainter>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "core/layers/LayerRegistry.h"
#include "ui/NodeItem.h"
#include "ui/base/Templates.h"

namespace strata::ui {

namespace {

constexpr int kTypeRole = Qt::UserRole + 1;

// A tree whose type entries drag as kMimeType.
class PaletteTree : public QTreeWidget {
public:
    using QTreeWidget::QTreeWidget;

protected:
    QStringList mimeTypes() const override { return {QString::fromLatin1(LayerPalette::kMimeType)}; }
    QMimeData* mimeData(const QList<QTreeWidgetItem*>& items) const override {
        for (QTreeWidgetItem* item : items) {
            const QString type = item->data(0, kTypeRole).toString();
            if (type.isEmpty()) continue;
            auto* mime = new QMimeData;
            mime->setData(QString::fromLatin1(LayerPalette::kMimeType), type.toUtf8());
            mime->setText(type);
            return mime;
        }
        return nullptr;
    }
};

QIcon categoryIcon(const QString& category) {
    QPixmap pm(12, 12);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    p.setBrush(categoryColor(category));
    p.setPen(Qt::NoPen);
    p.drawRoundedRect(QRectF(1, 1, 10, 10), 2, 2);
    return QIcon(pm);
}

}  // namespace

LayerPalette::LayerPalette(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_filter = new QLineEdit(this);
    m_filter->setPlaceholderText(tr("Search layers"));
    m_filter->setClearButtonEnabled(true);
    m_filter->setObjectName(QStringLiteral("paletteFilter"));
    m_tree = new PaletteTree(this);
    m_tree->setObjectName(QStringLiteral("paletteTree"));
    m_tree->setHeaderHidden(true);
    m_tree->setDragEnabled(true);
    m_tree->setDragDropMode(QAbstractItemView::DragOnly);
    m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
    m_tree->setRootIsDecorated(true);
    layout->addWidget(m_filter);
    layout->addWidget(m_tree);
    populate();
    connect(m_filter, &QLineEdit::textChanged, this, &LayerPalette::setFilter);
    connect(m_tree, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
        const QString type = item->data(0, kTypeRole).toString();
        if (!type.isEmpty()) emit layerActivated(type);
    });
}

void LayerPalette::populate() {
    m_tree->clear();
    QMap<QString, QTreeWidgetItem*> groups;  // registry order inside a group; groups in first-seen order
    QStringList order;
    for (const auto& type : strata::layerRegistry().all()) {
        const QString category = QString::fromStdString(type->category());
        QTreeWidgetItem* group = groups.value(category);
        if (!group) {
            group = new QTreeWidgetItem(m_tree, {category});
            group->setFlags(Qt::ItemIsEnabled);
            QFont f = group->font(0);
            f.setBold(true);
            group->setFont(0, f);
            group->setIcon(0, categoryIcon(category));
            groups.insert(category, group);
        }
        auto* item = new QTreeWidgetItem(group, {QString::fromStdString(type->name())});
        item->setData(0, kTypeRole, QString::fromStdString(type->name()));
        item->setToolTip(0, QString::fromStdString(type->description()));
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsDragEnabled);
    }
    auto* blocks = new QTreeWidgetItem(m_tree, {tr("Blocks")});
    blocks->setFlags(Qt::ItemIsEnabled);
    QFont f = blocks->font(0);
    f.setBold(true);
    blocks->setFont(0, f);
    blocks->setIcon(0, categoryIcon(QStringLiteral("Blocks")));
    for (const BlockTemplate& b : blockTemplates()) {
        auto* item = new QTreeWidgetItem(blocks, {b.title});
        item->setData(0, kTypeRole, QString::fromLatin1(kBlockPrefix) + b.id);
        item->setToolTip(0, b.description);
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsDragEnabled);
    }
    m_tree->expandAll();
}

void LayerPalette::setFilter(const QString& text) {
    const QString needle = text.trimmed();
    for (int g = 0; g < m_tree->topLevelItemCount(); ++g) {
        QTreeWidgetItem* group = m_tree->topLevelItem(g);
        const bool groupMatches = !needle.isEmpty() && group->text(0).contains(needle, Qt::CaseInsensitive);
        int shown = 0;
        for (int i = 0; i < group->childCount(); ++i) {
            QTreeWidgetItem* item = group->child(i);
            const bool match = needle.isEmpty() || groupMatches ||
                               item->text(0).contains(needle, Qt::CaseInsensitive) ||
                               item->toolTip(0).contains(needle, Qt::CaseInsensitive);
            item->setHidden(!match);
            shown += match ? 1 : 0;
        }
        group->setHidden(shown == 0);
    }
}

QStringList LayerPalette::visibleTypes() const {
    QStringList out;
    for (int g = 0; g < m_tree->topLevelItemCount(); ++g) {
        QTreeWidgetItem* group = m_tree->topLevelItem(g);
        if (group->isHidden()) continue;
        for (int i = 0; i < group->childCount(); ++i)
            if (!group->child(i)->isHidden()) out << group->child(i)->data(0, kTypeRole).toString();
    }
    return out;
}

}  // namespace strata::ui
