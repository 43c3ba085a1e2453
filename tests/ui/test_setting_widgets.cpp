// The dataset and training panels take their editors from the settings table (core/graph/Settings.h):
// every setting they edit has an editor named after its key with the table's range, choices,
// label and tooltip; editing it changes that setting in the document; and a value beyond what a
// spin box can show survives edits of other settings.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QTest>
#include <QUndoStack>
#include <climits>
#include <cmath>
#include <set>

#include "ui/DatasetPanel.h"
#include "ui/TrainingSettingsPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

int clampToInt(int64_t v) { return int(std::clamp<int64_t>(v, INT_MIN, INT_MAX)); }

// Checks every editor of `specs` in `panel` against the table; returns how many were checked.
template <class S>
int checkEditors(QWidget* panel, const std::vector<SettingSpec<S>>& specs, const std::set<std::string>& notOnPanel) {
    int checked = 0;
    for (const SettingSpec<S>& spec : specs) {
        const QString key = QString::fromStdString(spec.key);
        const QList<QWidget*> editors = panel->findChildren<QWidget*>(key);
        if (notOnPanel.count(spec.key)) {
            if (!editors.isEmpty()) qWarning("%s has an editor but is listed as not on the panel", spec.key.c_str());
            continue;
        }
        if (editors.isEmpty()) qWarning("no editor for %s", spec.dottedName().c_str());
        if (editors.isEmpty()) return -1;
        for (QWidget* w : editors) {
            const std::string what = spec.dottedName() + " (" + w->metaObject()->className() + ")";
            if (!w->toolTip().contains(QString::fromStdString(spec.help)) ||
                !w->toolTip().contains(QString::fromStdString(spec.dottedName()))) {
                qWarning("%s: tooltip '%s'", what.c_str(), qPrintable(w->toolTip()));
                return -1;
            }
            bool ok = false;
            switch (spec.kind) {
                case SettingKind::Int:
                case SettingKind::Int64: {
                    auto* spin = qobject_cast<QSpinBox*>(w);
                    ok = spin && spin->minimum() == clampToInt(spec.intMin) &&
                         spin->maximum() == clampToInt(spec.intMax);
                    if (spin && !ok) qWarning("%s: %d..%d", what.c_str(), spin->minimum(), spin->maximum());
                    break;
                }
                case SettingKind::Double:
                case SettingKind::Float: {
                    auto* spin = qobject_cast<QDoubleSpinBox*>(w);
                    if (!spin) break;
                    // An excluded max shows as the largest value below it at the editor's decimals.
                    const double below = spec.max - std::pow(10.0, -spin->decimals());
                    ok = spin->minimum() == spec.min &&
                         (spec.maxOpen ? spin->maximum() < spec.max && spin->maximum() >= below - 1e-12
                                       : spin->maximum() == spec.max);
                    if (!ok) qWarning("%s: %.17g..%.17g", what.c_str(), spin->minimum(), spin->maximum());
                    break;
                }
                case SettingKind::Bool: {
                    auto* check = qobject_cast<QCheckBox*>(w);
                    ok = check && check->text() == QString::fromStdString(spec.label);
                    break;
                }
                case SettingKind::Choice: {
                    auto* combo = qobject_cast<QComboBox*>(w);
                    ok = combo && combo->count() == int(spec.choices.size());
                    for (int i = 0; ok && i < combo->count(); ++i) {
                        const SettingChoice& c = spec.choices[size_t(i)];
                        ok = combo->itemData(i).toInt() == c.value &&
                             combo->itemText(i) == QString::fromStdString(c.label) &&
                             combo->itemData(i, Qt::ToolTipRole).toString() == QString::fromStdString(c.help);
                    }
                    break;
                }
                case SettingKind::UInt64:
                case SettingKind::String:
                case SettingKind::Path:
                case SettingKind::StringList:
                case SettingKind::IntList: ok = qobject_cast<QLineEdit*>(w) != nullptr; break;
            }
            if (!ok) {
                qWarning("%s does not match the settings table", what.c_str());
                return -1;
            }
            ++checked;
        }
    }
    return checked;
}

// Sets every spin box, combo and check box of `specs` to another value and checks the document.
template <class S>
void editEach(QWidget* panel, ProjectDocument& doc, const std::vector<SettingSpec<S>>& specs,
              const std::function<const S&()>& current) {
    for (const SettingSpec<S>& spec : specs) {
        QWidget* w = panel->findChild<QWidget*>(QString::fromStdString(spec.key));
        if (!w) continue;
        const int before = doc.undoStack()->count();
        Json expected;
        if (auto* spin = qobject_cast<QSpinBox*>(w)) {
            const int v = spin->value() == spin->maximum() ? spin->minimum() : spin->maximum();
            spin->setValue(v);
            expected = int64_t(v);
        } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
            const int i = combo->currentIndex() == combo->count() - 1 ? 0 : combo->count() - 1;
            combo->setCurrentIndex(i);
            expected = combo->itemData(i).toInt();
        } else if (auto* check = qobject_cast<QCheckBox*>(w)) {
            check->setChecked(!check->isChecked());
            expected = check->isChecked();
        } else if (auto* dspin = qobject_cast<QDoubleSpinBox*>(w)) {
            const double v =
                dspin->value() == dspin->minimum() ? dspin->minimum() + dspin->singleStep() : dspin->minimum();
            dspin->setValue(v);
            expected = spec.kind == SettingKind::Float ? double(float(dspin->value())) : dspin->value();
        } else {
            continue;
        }
        const Json got = spec.get(current());
        QVERIFY2(got == expected, (spec.dottedName() + ": " + got.dump() + ", expected " + expected.dump()).c_str());
        QVERIFY2(doc.undoStack()->count() == before + 1, spec.dottedName().c_str());
    }
}

}  // namespace

class TestSettingWidgets : public QObject {
    Q_OBJECT
private slots:
    void panelRangesAreTheTables() {
        ProjectDocument doc;
        doc.newProject(Project{});
        DatasetPanel dataset(&doc);
        TrainingSettingsPanel training(&doc);
        // Every dataset setting is on the dataset panel (train_path and validation_path three times: the csv,
        // text and image folder pages).
        const int d = checkEditors(&dataset, datasetSettingSpecs(), {});
        QCOMPARE(d, int(datasetSettingSpecs().size()) + 4);
        // The device is picked in the training dashboard's device list, not here.
        const int t = checkEditors(&training, trainingSettingSpecs(), {"device"});
        QCOMPARE(t, int(trainingSettingSpecs().size()) - 1);
        // The limits the panels used to set themselves, now the table's.
        QCOMPARE(dataset.findChild<QSpinBox*>("max_tokens")->maximum(), 1 << 20);
        QCOMPARE(training.findChild<QSpinBox*>("batch_size")->maximum(), 1 << 24);
    }

    void editorsWriteTheirSetting() {
        ProjectDocument doc;
        doc.newProject(Project{});
        DatasetPanel dataset(&doc);
        TrainingSettingsPanel training(&doc);
        editEach<DatasetSettings>(&dataset, doc, datasetSettingSpecs(),
                                  [&]() -> const DatasetSettings& { return doc.project().dataset; });
        editEach<TrainingSettings>(&training, doc, trainingSettingSpecs(),
                                   [&]() -> const TrainingSettings& { return doc.project().training; });
        QVERIFY(doc.undoStack()->count() > 20);
    }

    void valuesBeyondASpinBoxSurvive() {
        Project p;
        p.dataset.trainLimit = int64_t(5) << 30;  // more than a QSpinBox holds
        p.training.seed = UINT64_MAX;
        ProjectDocument doc;
        doc.newProject(p);
        DatasetPanel dataset(&doc);
        TrainingSettingsPanel training(&doc);
        QCOMPARE(dataset.findChild<QSpinBox*>("train_limit")->value(), INT_MAX);
        dataset.findChild<QSpinBox*>("crop_padding")->setValue(2);
        QCOMPARE(doc.project().dataset.cropPadding, 2);
        QCOMPARE(doc.project().dataset.trainLimit, int64_t(5) << 30);
        training.findChild<QSpinBox*>("epochs")->setValue(9);
        QCOMPARE(doc.project().training.epochs, 9);
        QCOMPARE(doc.project().training.seed, uint64_t(UINT64_MAX));
    }
};

QTEST_MAIN(TestSettingWidgets)
#include "test_setting_widgets.moc"
