// The dataset and training panels take their editors from the settings table (core/graph/Settings.h):
// every setting they edit has an editor named after its key with the table's range, choices,
// label and tooltip; editing it changes that setting in the document; a value beyond what a
// spin box can show survives edits of other settings; and a value outside the table's range is
// kept as typed, not applied, and explained under its field until it is fixed (issue 17). The training
// panel enables an editor exactly when the table says its setting applies (issue 36).
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
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
                // The table's range is what the editor accepts: its ends are taken, a value beyond either
                // end (that the box can hold) is refused with the range in the reason.
                case SettingKind::Int:
                case SettingKind::Int64: {
                    auto* spin = qobject_cast<QSpinBox*>(w);
                    if (!spin) break;
                    const QSignalBlocker block(spin);
                    const int was = spin->value();
                    auto refused = [&](int64_t v) {
                        spin->setValue(int(v));
                        return !settingRefusal(spin, spec).isEmpty();
                    };
                    const int64_t lo = std::max<int64_t>(spec.intMin, spin->minimum());
                    ok = !refused(lo) && !refused(clampToInt(spec.intMax)) &&
                         (lo - 1 < spin->minimum() || refused(lo - 1)) &&
                         (spec.intMax >= INT_MAX || refused(spec.intMax + 1));
                    if (ok && spec.intMax < INT_MAX) {
                        // "must be 0 to 4096", or "must be 0 (all cores) to 4096" where 0 shows as a word.
                        refused(spec.intMax + 1);
                        const QString range = QString::fromStdString(spec.rangeText());
                        const QString why = settingRefusal(spin, spec);
                        ok = why.contains(range) ||
                             (range.startsWith("0 ") && why.contains(" (") && why.endsWith(range.mid(1) + "."));
                    }
                    if (!ok) qWarning("%s: range not %s", what.c_str(), spec.rangeText().c_str());
                    spin->setValue(was);
                    break;
                }
                case SettingKind::Double:
                case SettingKind::Float: {
                    auto* spin = qobject_cast<QDoubleSpinBox*>(w);
                    if (!spin) break;
                    const QSignalBlocker block(spin);
                    const double was = spin->value(), step = std::pow(10.0, -spin->decimals());
                    auto refused = [&](double v) {
                        spin->setValue(v);
                        return !settingRefusal(spin, spec).isEmpty();
                    };
                    const bool bounded = spec.max < 1e12;
                    ok = !refused(std::max(spec.min, spin->minimum())) &&
                         (spec.min - step < spin->minimum() || refused(spec.min - step)) &&
                         (!bounded || (spec.maxOpen ? refused(spec.max) && !refused(spec.max - step)
                                                    : !refused(spec.max) && refused(spec.max + step)));
                    if (!ok) qWarning("%s: range not %s", what.c_str(), spec.rangeText().c_str());
                    spin->setValue(was);
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
            // The ends of the table's range (spin boxes take any number; the range is checked on commit).
            const int lo = std::max(spin->minimum(), clampToInt(spec.intMin)), hi = clampToInt(spec.intMax);
            const int v = spin->value() == hi ? lo : hi;
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
            const double lo = std::max(dspin->minimum(), spec.min);
            const double v = dspin->value() == lo ? lo + dspin->singleStep() : lo;
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
        auto* maxTokens = dataset.findChild<QSpinBox*>("max_tokens");
        maxTokens->setValue((1 << 20) + 1);
        QVERIFY(!settingRefusal(maxTokens, datasetSetting("max_tokens")).isEmpty());
        auto* batch = training.findChild<QSpinBox*>("batch_size");
        batch->setValue(1 << 24);
        QVERIFY(settingRefusal(batch, trainingSetting("batch_size")).isEmpty());
        batch->setValue((1 << 24) + 1);
        QVERIFY(!settingRefusal(batch, trainingSetting("batch_size")).isEmpty());
    }

    // Batch 0, units -5, 999999999999: nothing typed is changed behind the user's back. The value stays in
    // the box as typed, the setting keeps its value, the line under the box says why; fixing the value
    // applies it and the line goes.
    void outOfRangeIsKeptAndExplained() {
        ProjectDocument doc;
        doc.newProject(Project{});
        TrainingSettingsPanel training(&doc);
        DatasetPanel dataset(&doc);
        training.show();
        const int64_t batchBefore = doc.project().training.batchSize;
        auto* batch = training.findChild<QSpinBox*>("batch_size");
        auto* line = training.findChild<QLabel*>("error_batch_size");
        QVERIFY(batch && line);
        QVERIFY(line->isHidden());
        batch->setValue(0);
        QCOMPARE(doc.project().training.batchSize, batchBefore);
        QCOMPARE(batch->value(), 0);
        QCOMPARE(fieldError(batch), QStringLiteral("0 is not applied: must be 1 to 16777216."));
        QVERIFY(line->isVisible());
        QCOMPARE(line->text(), fieldError(batch));
        // A negative number is taken as typed too (a spin box bounded at 1 would drop the minus sign).
        batch->setValue(-5);
        QCOMPARE(batch->value(), -5);
        QVERIFY(fieldError(batch).startsWith(QStringLiteral("-5 is not applied")));
        // Another edit re-syncs the panel from the document; the refused value stays as typed.
        training.findChild<QSpinBox*>("epochs")->setValue(7);
        QCOMPARE(doc.project().training.epochs, 7);
        QCOMPARE(batch->value(), -5);
        QVERIFY(line->isVisible());
        // Fixed: applied, and the line goes.
        batch->setValue(32);
        QCOMPARE(doc.project().training.batchSize, int64_t(32));
        QVERIFY(fieldError(batch).isEmpty());
        QVERIFY(line->isHidden());

        // A number the table excludes at its top end (validation split below 1), and a list that does not parse.
        auto* split = dataset.findChild<QDoubleSpinBox*>("validation_split");
        const double splitBefore = doc.project().dataset.validationSplit;
        split->setValue(1.0);
        QCOMPARE(doc.project().dataset.validationSplit, splitBefore);
        QVERIFY(fieldError(split).contains(QStringLiteral("excluding 1")));
        auto* shape = dataset.findChild<QLineEdit*>("synthetic_shape");
        const std::vector<int64_t> shapeBefore = doc.project().dataset.syntheticShape;
        shape->setText(QStringLiteral("4, x"));
        emit shape->editingFinished();
        QCOMPARE(doc.project().dataset.syntheticShape, shapeBefore);
        QVERIFY(fieldError(shape).startsWith(QStringLiteral("'4, x' is not applied")));
        QCOMPARE(shape->text(), QStringLiteral("4, x"));
        shape->setText(QStringLiteral("4"));
        emit shape->editingFinished();
        QVERIFY(fieldError(shape).isEmpty());
        QCOMPARE(doc.project().dataset.syntheticShape, std::vector<int64_t>{4});
        // Another project: the refusals of the last one go.
        split->setValue(2.0);
        QVERIFY(!fieldError(split).isEmpty());
        doc.newProject(Project{});
        QVERIFY(fieldError(split).isEmpty());
        QCOMPARE(split->value(), Project{}.dataset.validationSplit);
    }

    // Fields where 0 means "off" or "all" show the word, take it typed back, and take a minus sign typed on
    // the keyboard so that -2 is refused with the reason (a minimum of 0 used to swallow the sign).
    void zeroWordsAndMinusSign() {
        ProjectDocument doc;
        doc.newProject(Project{});
        TrainingSettingsPanel training(&doc);
        DatasetPanel dataset(&doc);
        training.show();
        dataset.show();
        auto type = [](QAbstractSpinBox* spin, const QString& text) {
            spin->setFocus();
            spin->selectAll();
            QTest::keyClicks(spin, text);
            QTest::keyClick(spin, Qt::Key_Return);
        };
        auto* patience = training.findChild<QSpinBox*>("early_stopping_patience");
        QVERIFY(patience);
        patience->setValue(0);
        QCOMPARE(doc.project().training.earlyStoppingPatience, 0);
        QCOMPARE(patience->text(), QStringLiteral("off"));
        type(patience, QStringLiteral("-2"));
        QCOMPARE(patience->value(), -2);
        QCOMPARE(doc.project().training.earlyStoppingPatience, 0);
        QVERIFY2(fieldError(patience).startsWith(QStringLiteral("-2 is not applied: must be 0 (off) to ")),
                 qPrintable(fieldError(patience)));
        type(patience, QStringLiteral("3"));
        QCOMPARE(doc.project().training.earlyStoppingPatience, 3);
        QVERIFY(fieldError(patience).isEmpty());
        type(patience, QStringLiteral("Off"));  // the word, in any case, is 0
        QCOMPARE(patience->value(), 0);
        QCOMPARE(doc.project().training.earlyStoppingPatience, 0);
        QCOMPARE(patience->text(), QStringLiteral("off"));

        auto* threads = training.findChild<QSpinBox*>("threads");
        QCOMPARE(threads->text(), QStringLiteral("all cores"));
        type(threads, QStringLiteral("-1"));
        QCOMPARE(fieldError(threads), QStringLiteral("-1 is not applied: must be 0 (all cores) to 4096."));
        type(threads, QStringLiteral("2"));
        QCOMPARE(doc.project().training.threads, 2);

        auto* clip = training.findChild<QDoubleSpinBox*>("clip_norm");
        clip->setValue(0);
        QCOMPARE(clip->text(), QStringLiteral("off"));
        type(clip, QStringLiteral("-0.5"));
        QCOMPARE(clip->value(), -0.5);
        QVERIFY2(fieldError(clip).startsWith(QStringLiteral("-0.5 is not applied: must be 0 (off) to ")),
                 qPrintable(fieldError(clip)));
        type(clip, QStringLiteral("1.5"));
        QCOMPARE(doc.project().training.clipNorm, 1.5);

        auto* limit = dataset.findChild<QSpinBox*>("train_limit");
        limit->setValue(0);
        QCOMPARE(limit->text(), QStringLiteral("all"));
        type(limit, QStringLiteral("-10"));
        QCOMPARE(limit->value(), -10);
        QVERIFY(fieldError(limit).startsWith(QStringLiteral("-10 is not applied: must be 0 (all) to ")));
        type(limit, QStringLiteral("all"));
        QVERIFY(fieldError(limit).isEmpty());
        QCOMPARE(doc.project().dataset.trainLimit, int64_t(0));
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

    // Momentum with SGD only, the Adam betas with Adam, the decay with a step schedule...: for each value of
    // every setting a condition looks at, each editor is enabled exactly when the table says its setting
    // applies (the panel holds no rule of its own).
    void trainingPanelEnablesByTheTable() {
        std::vector<Project> variants{Project{}};
        std::set<std::string> looked;
        for (const auto& spec : trainingSettingSpecs())
            for (const SettingCondition& c : spec.appliesWhen)
                if (!c.key.empty()) looked.insert(c.key);
        QVERIFY(looked.count("optimizer") && looked.count("schedule") && looked.count("dist_mode"));
        for (const std::string& key : looked) {
            const SettingSpec<TrainingSettings>& other = trainingSetting(key);
            std::vector<Json> values;
            for (const SettingChoice& c : other.choices) values.push_back(c.value);
            if (other.isInteger()) values = {0, 3};
            for (const Json& v : values) {
                Project p;
                other.set(p.training, v);
                variants.push_back(p);
            }
        }
        ProjectDocument doc;
        doc.newProject(Project{});
        TrainingSettingsPanel training(&doc);
        int disabled = 0;
        for (const Project& p : variants) {
            doc.setTrainingSettings(p.training);
            for (const auto& spec : trainingSettingSpecs()) {
                QWidget* w = training.findChild<QWidget*>(QString::fromStdString(spec.key));
                if (!w) continue;
                const bool applies = settingApplies(spec, p.dataset, p.training, 0);
                QVERIFY2(w->isEnabled() == applies, (spec.dottedName() + (applies ? " disabled" : " enabled") +
                                                     " with " + projectToJson(p)["training"].dump())
                                                        .c_str());
                disabled += applies ? 0 : 1;
            }
        }
        QVERIFY(disabled > 20);
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
