// ProblemsPanel: see ProblemsPanel.h.
#include "ui/ProblemsPanel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QStyle>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "ui/DataChecker.h"
#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {
constexpr int kNodeRole = Qt::UserRole + 1;
enum Column { ColNode = 0, ColProblem, ColFix };

// "set its units to 10" -> "Set units to 10": the button's label.
QString fixLabel(const DataFix& fix) {
    return QObject::tr("Set %1 to %2")
        .arg(QString::fromStdString(fix.param),
             QString::fromStdString(fix.value.is_array() ? Shape(fix.value.get<std::vector<int64_t>>()).toString()
                                                         : fix.value.dump()));
}
}  // namespace

ProblemsPanel::ProblemsPanel(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* top = new QHBoxLayout;
    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("problemsSummary"));
    m_summary->setWordWrap(true);
    m_check = new QPushButton(tr("Check"), this);
    m_check->setObjectName(QStringLiteral("checkData"));
    m_check->setToolTip(
        tr("Read the data set and compare its sample shape, classes and vocabulary with the graph "
           "(Start does it too)"));
    m_check->hide();  // until there is a checker
    top->addWidget(m_summary, 1);
    top->addWidget(m_check, 0, Qt::AlignTop);
    m_list = new QTreeWidget(this);
    m_list->setObjectName(QStringLiteral("problemsList"));
    m_list->setColumnCount(3);
    m_list->setHeaderLabels({tr("Node"), tr("Problem"), tr("Fix")});
    m_list->setRootIsDecorated(false);
    m_list->setWordWrap(true);
    m_list->header()->setSectionResizeMode(ColNode, QHeaderView::ResizeToContents);
    m_list->header()->setSectionResizeMode(ColProblem, QHeaderView::Stretch);
    m_list->header()->setSectionResizeMode(ColFix, QHeaderView::ResizeToContents);
    m_list->header()->setStretchLastSection(false);
    layout->addLayout(top);
    layout->addWidget(m_list);
    connect(doc, &ProjectDocument::analysisChanged, this, &ProblemsPanel::refresh);
    connect(m_list, &QTreeWidget::itemActivated, this,
            [this](QTreeWidgetItem* item) { emit problemActivated(item->data(0, kNodeRole).toInt()); });
    refresh();
}

void ProblemsPanel::setDataChecker(DataChecker* checker) {
    m_checker = checker;
    m_check->setVisible(checker != nullptr);
    if (checker) {
        connect(checker, &DataChecker::checked, this, &ProblemsPanel::refresh);
        connect(m_check, &QPushButton::clicked, checker, &DataChecker::check);
    }
    refresh();
}

int ProblemsPanel::problemCount() const { return m_list->topLevelItemCount(); }

QString ProblemsPanel::messageAt(int row) const {
    QTreeWidgetItem* item = m_list->topLevelItem(row);
    return item ? item->text(ColProblem) : QString();
}

QString ProblemsPanel::summaryText() const { return m_summary->text(); }

QPushButton* ProblemsPanel::fixButton(int row) const {
    QTreeWidgetItem* item = m_list->topLevelItem(row);
    return item ? qobject_cast<QPushButton*>(m_list->itemWidget(item, ColFix)) : nullptr;
}

void ProblemsPanel::refresh() {
    m_list->clear();
    const auto& problems = m_doc->analysis().problems;
    auto add = [this](int nodeId, const QString& where, const QString& message, const QIcon& icon) {
        auto* item = new QTreeWidgetItem(m_list, {where, message});
        item->setIcon(ColNode, icon);
        item->setData(ColNode, kNodeRole, nodeId);
        item->setToolTip(ColProblem, message);
        return item;
    };
    const QIcon error = style()->standardIcon(QStyle::SP_MessageBoxCritical);
    for (const strata::Problem& p : problems) {
        const strata::Node* node = m_doc->graph().node(p.node);
        QString where = node ? QString::fromStdString(node->name) : tr("(graph)");
        if (node && !p.port.empty()) where += QLatin1Char('.') + QString::fromStdString(p.port);
        add(p.node, where, QString::fromStdString(p.message), error);
    }
    const DataChecker::State data = m_checker ? m_checker->state() : DataChecker::State::Unchecked;
    const QIcon warning = style()->standardIcon(QStyle::SP_MessageBoxWarning);
    if (data == DataChecker::State::DataError)
        add(-1, tr("(data)"), tr("the data cannot be read: %1").arg(m_checker->dataError()), error);
    if (m_checker)
        for (const DataMismatch& m : m_checker->mismatches()) {
            const strata::Node* node = m_doc->graph().node(m.node);
            QTreeWidgetItem* item = add(m.node, node ? QString::fromStdString(node->name) : tr("(graph)"),
                                        QString::fromStdString(m.message), warning);
            if (!m.fix.available()) continue;
            auto* fix = new QPushButton(fixLabel(m.fix), m_list);
            fix->setToolTip(tr("%1 (one edit; Undo takes it back)").arg(QString::fromStdString(m.fix.text)));
            const DataFix f = m.fix;
            // Queued: the edit rebuilds this list, button included, which must not happen inside its own click.
            connect(fix, &QPushButton::clicked, this, [this, f] {
                QMetaObject::invokeMethod(
                    this, [this, f] { m_doc->setParam(f.node, QString::fromStdString(f.param), f.value); },
                    Qt::QueuedConnection);
            });
            m_list->setItemWidget(item, ColFix, fix);
        }
    const int count = m_list->topLevelItemCount();
    QString summary;
    if (count > 0)
        summary =
            tr("%n problem(s): double-click one to show its node.", nullptr, count) +
            (m_checker && !m_checker->mismatches().empty()
                 ? QLatin1Char(' ') + tr("The data does not fit the graph: each Fix is one edit (Undo takes it back).")
                 : QString());
    else if (!m_checker)
        summary = tr("No problems: the graph is valid.");
    else if (data == DataChecker::State::Checked)
        summary = tr("No problems: the graph is valid and fits its data (%1).").arg(m_checker->factsText());
    else if (data == DataChecker::State::Reading)
        summary = tr("No problems in the graph; checking it against the data...");
    else
        summary = tr("No problems in the graph; the data is not checked yet (Check).");
    if (count > 0 && data == DataChecker::State::Reading) summary += QLatin1Char(' ') + tr("Checking the data...");
    m_summary->setText(summary);
}

}  // namespace strata::ui
