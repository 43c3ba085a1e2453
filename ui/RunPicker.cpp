// RunPicker: see RunPicker.h.
#include "ui/RunPicker.h"

#include <QStandardItemModel>

#include "ui/base/ProjectDocument.h"

namespace strata::ui {

namespace {
constexpr qint64 kOther = -2;  // the "another file" entry's data
constexpr qint64 kNoRun = -3;  // the placeholder when the project has no run
}  // namespace

RunPicker::RunPicker(ProjectDocument* doc, bool otherItem, QWidget* parent)
    : QComboBox(parent), m_doc(doc), m_otherItem(otherItem) {
    setObjectName(QStringLiteral("runPicker"));
    setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    setMinimumContentsLength(24);
    setToolTip(tr("The run of this project whose weights are used"));
    connect(this, &QComboBox::activated, this, &RunPicker::onActivated);
    // Another project: its runs, from its newest. A run started or ended: the same project's runs again.
    connect(doc, &ProjectDocument::identityChanged, this, [this] { refresh(true); });
    connect(doc, &ProjectDocument::runsChanged, this, [this] { refresh(false); });
    // The project's checkpoint folder is offered when it holds weights no recorded run wrote: list again when
    // the setting changes (not on every other edit).
    connect(doc, &ProjectDocument::settingsChanged, this, [this] {
        if (m_doc->project().training.checkpointDir != m_checkpointDir) refresh(false);
    });
    refresh(true);
}

std::optional<ProjectRun> RunPicker::chosen() const {
    const QVariant data = currentData();
    if (!data.isValid()) return std::nullopt;
    const std::optional<ProjectRun> run = runWithId(m_runs, data.toLongLong());
    if (!run || !run->usable()) return std::nullopt;
    return run;
}

bool RunPicker::otherSelected() const { return m_otherItem && currentData().toLongLong() == kOther; }

void RunPicker::refresh(bool resetChoice) {
    const std::optional<ProjectRun> before = chosen();
    const bool wasOther = otherSelected();
    if (resetChoice) m_userChoice = -1;
    m_runs = projectRuns(*m_doc);
    m_checkpointDir = m_doc->project().training.checkpointDir;
    m_whyNone.clear();
    const std::optional<ProjectRun> latest = latestUsableRun(m_runs, *m_doc, &m_whyNone);
    m_filling = true;
    clear();
    auto* items = qobject_cast<QStandardItemModel*>(model());
    for (const ProjectRun& r : std::as_const(m_runs)) {
        addItem(r.label(), r.id);
        const int row = count() - 1;
        setItemData(row, r.usable() ? r.checkpoint : r.unavailable, Qt::ToolTipRole);
        if (!r.usable() && items) items->item(row)->setEnabled(false);
    }
    if (m_runs.isEmpty()) {
        addItem(tr("(no run of this project yet)"), kNoRun);
        if (items) items->item(0)->setEnabled(false);
    }
    if (m_otherItem) addItem(tr("Another checkpoint or model file"), kOther);
    // The user's pick while it has weights, else the newest run with weights.
    int index = -1;
    if (m_userChoice >= 0)
        if (const auto r = runWithId(m_runs, m_userChoice); r && r->usable()) index = findData(m_userChoice);
    if (index < 0 && wasOther && !resetChoice) index = findData(kOther);
    if (index < 0 && latest) index = findData(latest->id);
    if (index < 0) index = m_runs.isEmpty() ? 0 : findData(m_runs.front().id);
    setCurrentIndex(index);
    m_filling = false;
    const std::optional<ProjectRun> after = chosen();
    if (resetChoice || before.has_value() != after.has_value() || (before && after && before->id != after->id) ||
        (before && after && before->checkpoint != after->checkpoint))
        emit runChosen();
}

bool RunPicker::choose(qint64 id) {
    const std::optional<ProjectRun> r = runWithId(m_runs, id);
    if (!r || !r->usable()) return false;
    m_userChoice = id;
    setCurrentIndex(findData(id));
    emit runChosen();
    return true;
}

void RunPicker::chooseOther() {
    if (!m_otherItem) return;
    m_filling = true;
    setCurrentIndex(findData(kOther));
    m_filling = false;
}

void RunPicker::onActivated(int index) {
    if (m_filling) return;
    const qint64 id = itemData(index).toLongLong();
    if (id == kOther) {
        emit otherChosen();
        return;
    }
    if (id == kNoRun) return;
    m_userChoice = id;
    emit runChosen();
}

}  // namespace strata::ui
