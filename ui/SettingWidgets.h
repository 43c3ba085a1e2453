// SettingWidgets: editors for the dataset and training settings of core/graph/Settings.h.
// An editor takes its range, choices, label and tooltip from the settings table, so the panels
// cannot disagree with the project file or strata-train; each is named after its JSON key
// (objectName "batch_size"). The panels lay the editors out and add what is only presentation
// (suffixes, "off" for 0, decimals shown).
#pragma once

#include <QString>
#include <QWidget>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph/Settings.h"
#include "ui/FieldError.h"

class QDoubleSpinBox;
class QObject;
class QSpinBox;

namespace strata::ui {

// The table's label ("Batch size").
QString settingLabel(const SettingInfo& setting);
// "Samples per step. 1 to 16777216. training.batch_size, strata-train --batch N."
QString settingToolTip(const SettingInfo& setting);

// The editor for a setting, by kind: Int, Int64 -> QSpinBox; Double, Float -> QDoubleSpinBox with
// `decimals` digits; Bool -> QCheckBox with the label as its text; Choice -> QComboBox, one item per
// choice with the enum value as item data; UInt64, String, Path, lists -> QLineEdit (lists
// comma-separated). Spin boxes take any number typed (acceptAnyNumber): the table's range is checked
// by settingRefusal, so a value out of range is refused with a reason, never clamped (issue 17).
QWidget* createSettingEditor(const SettingInfo& setting, QWidget* parent, int decimals = 6);
// Shows 0 as `text` ("off", "all") in an editor made by createSettingEditor (NumberSpinBox); the word can
// be typed back. Any other number can still be typed, a negative one included, and is refused with the
// reason under the field when it is out of range.
void showZeroAs(QSpinBox* spin, const QString& text);
void showZeroAs(QDoubleSpinBox* spin, const QString& text);
// Why the editor's content is not applied ("0 is not applied: must be 1 to 16777216."); empty when
// it is acceptable: a number outside the table's range, a list or seed that does not parse, an empty
// text where the table needs one.
QString settingRefusal(const QWidget* editor, const SettingInfo& setting);
// Shows a value as SettingSpec::get gives it. Emits no change signals.
void showSettingValue(QWidget* editor, const SettingInfo& setting, const Json& value);
// The editor's value as SettingSpec::set takes it. `current` (the value before) is kept where the
// editor cannot say better: an int64 beyond what its QSpinBox holds, a seed or shape that does not parse.
Json settingEditorValue(const QWidget* editor, const SettingInfo& setting, const Json& current);
// Calls `edited` when the user finishes an edit (a spin box commits on Enter or focus loss, not per key).
void connectSettingEditor(QWidget* editor, QObject* context, const std::function<void()>& edited);

// The editors of one settings struct S, by key.
template <class S>
class SettingEditors {
public:
    explicit SettingEditors(const std::vector<SettingSpec<S>>& specs) : m_specs(specs) {}

    // Creates the editor of `key` (a key missing from the table throws: a programming error).
    template <class W>
    W* add(const std::string& key, QWidget* parent, int decimals = 6) {
        const SettingSpec<S>& spec = find(key);
        QWidget* w = createSettingEditor(spec, parent, decimals);
        m_editors.push_back({&spec, w});
        return static_cast<W*>(w);
    }
    // A refused value stays as typed (its editor is skipped) until the user fixes it.
    void show(const S& settings) const {
        for (const auto& e : m_editors)
            if (fieldError(e.widget).isEmpty()) showSettingValue(e.widget, *e.spec, e.spec->get(settings));
    }
    // Reads the editors into `settings`; an editor whose content is refused (settingRefusal) keeps the
    // setting as it was and shows why under it; an accepted one clears its line.
    void read(S& settings) const {
        for (const auto& e : m_editors) {
            const QString why = settingRefusal(e.widget, *e.spec);
            setFieldError(e.widget, why);
            if (why.isEmpty()) e.spec->set(settings, settingEditorValue(e.widget, *e.spec, e.spec->get(settings)));
        }
    }
    // Drops every refusal (a project opened, an undo): the editors show the settings again.
    void clearRefusals() const {
        for (const auto& e : m_editors) setFieldError(e.widget, QString());
    }
    // Enables each editor whose setting applies with these settings (SettingInfo::appliesWhen) and disables
    // the others. The workbench does not know whether a project will run under mpirun: data-parallel settings
    // count as applying.
    void enableApplicable(const DatasetSettings& dataset, const TrainingSettings& training) const {
        for (const auto& e : m_editors) e.widget->setEnabled(settingApplies(*e.spec, dataset, training, 0));
    }
    void connectAll(QObject* context, const std::function<void()>& edited) const {
        for (const auto& e : m_editors) connectSettingEditor(e.widget, context, edited);
    }
    const SettingSpec<S>& find(const std::string& key) const {
        for (const SettingSpec<S>& s : m_specs)
            if (s.key == key) return s;
        throw std::invalid_argument("no setting '" + key + "' in the settings table");
    }

private:
    struct Editor {
        const SettingSpec<S>* spec;
        QWidget* widget;
    };
    const std::vector<SettingSpec<S>>& m_specs;
    std::vector<Editor> m_editors;
};

}  // namespace strata::ui
