// LayerPalette: the layer types of the registry, grouped by category and
// filtered by a search field. Dragging an entry onto the canvas carries the
// type name as kMimeType; double-clicking (or Enter) asks for the type to be
// added at the view centre (layerActivated). The last group, "Blocks", holds
// wired groups of layers (a Transformer encoder block) as "block:<id>".
#pragma once

#include <QWidget>

class QLineEdit;
class QTreeWidget;
class QTreeWidgetItem;

namespace strata::ui {

class LayerPalette : public QWidget {
    Q_OBJECT
public:
    static constexpr const char* kMimeType = "application/x-strata-layer";
    // The "Blocks" group's entries carry "block:<id>" (Templates.h's blockTemplates) instead of a type name.
    static constexpr const char* kBlockPrefix = "block:";

    explicit LayerPalette(QWidget* parent = nullptr);
    QLineEdit* filterEdit() const { return m_filter; }
    QTreeWidget* tree() const { return m_tree; }
    // Type names visible under the current filter, in palette order.
    QStringList visibleTypes() const;

public slots:
    void setFilter(const QString& text);

signals:
    void layerActivated(const QString& type);

private:
    void populate();

    QLineEdit* m_filter;
    QTreeWidget* m_tree;
};

}  // namespace strata::ui
