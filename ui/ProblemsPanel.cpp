// ProblemsPanel: the analysis problems of the open graph.
#include "ui/ProblemsPanel.h"

#include <QHeaderView>
#include <QLabel>
#include <QStyle>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {
constexpr int kNodeRole = Qt::UserRole + 1;
}

ProblemsPanel::ProblemsPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_summary = new QLabel(this);
    m_list = new QTreeWidget(this);
    m_list->setObjectName(QStringLiteral("problemsList"));
    m_list->setColumnCount(2);
    m_list->setHeaderLabels({tr("Node"), tr("Problem")});
    m_list->setRootIsDecorated(false);
    m_list->setWordWrap(true);
    m_list->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_list->header()->setStretchLastSection(true);
    layout->addWidget(m_summary);
    layout->addWidget(m_list);
    connect(doc, &ProjectDocument::analysisChanged, this, &ProblemsPanel::refresh);
    connect(m_list, &QTreeWidget::itemActivated, this,
            [this](QTreeWidgetItem* item) { emit problemActivated(item->data(0, kNodeRole).toInt()); });
    refresh();
}

int ProblemsPanel::problemCount() const { return m_list->topLevelItemCount(); }

QString ProblemsPanel::messageAt(int row) const {
    QTreeWidgetItem* item = m_list->topLevelItem(row);
    return item ? item->text(1) : QString();
}

void ProblemsPanel::refresh() {
    m_list->clear();
    const auto& problems = m_doc->analysis().problems;
    const QIcon icon = style()->standardIcon(QStyle::SP_MessageBoxCritical);
    for (const strata::Problem& p : problems) {
        const strata::Node* node = m_doc->graph().node(p.node);
        QString where = node ? QString::fromStdString(node->name) : tr("(graph)");
        if (node && !p.port.empty()) where += QLatin1Char('.') + QString::fromStdString(p.port);
        auto* item = new QTreeWidgetItem(m_list, {where, QString::fromStdString(p.message)});
        item->setIcon(0, icon);
        item->setData(0, kNodeRole, p.node);
        item->setToolTip(1, QString::fromStdString(p.message));
    }
    m_summary->setText(problems.empty()
                           ? tr("No problems: the graph is valid.")
                           : tr("%n problem(s): double-click one to show its node.", nullptr, int(problems.size())));
}

}  // namespace strata::ui
