// SettingWidgets: see SettingWidgets.h.
#include "ui/SettingWidgets.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QSpinBox>
#include <QStringList>
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <stdexcept>

namespace strata::ui {

namespace {

int clampToInt(int64_t v) { return int(std::clamp<int64_t>(v, INT_MIN, INT_MAX)); }

// "1, 28, 28" or "1x28x28" -> [1, 28, 28]; null when an entry is not an integer in range or the count is wrong.
Json parseIntList(const SettingInfo& s, const QString& text) {
    Json out = Json::array();
    const QStringList parts =
        QString(text).replace(QLatin1Char('x'), QLatin1Char(',')).split(QLatin1Char(','), Qt::SkipEmptyParts);
    for (const QString& p : parts) {
        bool ok = false;
        const qint64 v = p.trimmed().toLongLong(&ok);
        if (!ok || v < s.intMin || v > s.intMax) return nullptr;
        out.push_back(int64_t(v));
    }
    if (out.size() < s.minItems || out.size() > s.maxItems) return nullptr;
    return out;
}

}  // namespace

QString settingLabel(const SettingInfo& setting) { return QString::fromStdString(setting.label); }

QString settingToolTip(const SettingInfo& setting) {
    QString tip = QString::fromStdString(setting.help);
    // Limits that only exclude absurd values read better as a lower bound.
    const bool unbounded =
        (setting.isNumber() && setting.max >= double(FLT_MAX)) || (setting.isInteger() && setting.intMax >= INT_MAX);
    if (setting.kind != SettingKind::Choice) {
        if (unbounded)
            tip += QStringLiteral(" At least %1.")
                       .arg(setting.isNumber() ? QString::number(setting.min) : QString::number(setting.intMin));
        else if (!setting.rangeText().empty() && setting.kind != SettingKind::UInt64)
            tip += QStringLiteral(" %1.").arg(QString::fromStdString(setting.rangeText()));
    }
    QString where = QString::fromStdString(setting.dottedName());
    if (!setting.flag.empty())
        where +=
            QStringLiteral(", strata-train %1")
                .arg(QString::fromStdString(setting.flag + (setting.flagValue.empty() ? "" : " " + setting.flagValue)));
    return tip + QStringLiteral(" (%1)").arg(where);
}

QWidget* createSettingEditor(const SettingInfo& setting, QWidget* parent, int decimals) {
    QWidget* editor = nullptr;
    switch (setting.kind) {
        case SettingKind::Int:
        case SettingKind::Int64: {
            auto* spin = new NumberSpinBox(parent);  // any number typed: the range is settingRefusal's check
            spin->setSizeRange(clampToInt(setting.intMin), clampToInt(std::min<int64_t>(setting.intMax, 99999999)));
            spin->setKeyboardTracking(false);  // one undo command per finished edit, not per keystroke
            editor = spin;
            break;
        }
        case SettingKind::Double:
        case SettingKind::Float: {
            auto* spin = new NumberDoubleSpinBox(parent);
            spin->setDecimals(decimals);
            spin->setSizeRange(setting.min, std::min(setting.max, 99999999.0));
            spin->setKeyboardTracking(false);
            editor = spin;
            break;
        }
        case SettingKind::Bool: editor = new QCheckBox(settingLabel(setting), parent); break;
        case SettingKind::Choice: {
            auto* combo = new QComboBox(parent);
            for (const SettingChoice& c : setting.choices) {
                combo->addItem(QString::fromStdString(c.label), c.value);
                if (!c.help.empty())
                    combo->setItemData(combo->count() - 1, QString::fromStdString(c.help), Qt::ToolTipRole);
            }
            editor = combo;
            break;
        }
        case SettingKind::UInt64: {
            auto* edit = new QLineEdit(parent);
            edit->setValidator(
                new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9]{1,20}")), edit));
            editor = edit;
            break;
        }
        case SettingKind::String:
        case SettingKind::Path:
        case SettingKind::StringList:
        case SettingKind::IntList: editor = new QLineEdit(parent); break;
    }
    editor->setObjectName(QString::fromStdString(setting.key));
    editor->setToolTip(settingToolTip(setting));
    return editor;
}

void showZeroAs(QSpinBox* spin, const QString& text) {
    auto* number = dynamic_cast<NumberSpinBox*>(spin);
    if (!number) throw std::logic_error("showZeroAs: the editor was not made by createSettingEditor");
    number->setZeroText(text);
}

void showZeroAs(QDoubleSpinBox* spin, const QString& text) {
    auto* number = dynamic_cast<NumberDoubleSpinBox*>(spin);
    if (!number) throw std::logic_error("showZeroAs: the editor was not made by createSettingEditor");
    number->setZeroText(text);
}

QString settingRefusal(const QWidget* editor, const SettingInfo& setting) {
    QString allowed = QString::fromStdString(setting.rangeText());
    // "must be 0 (off) to 1000": the word the field shows for 0 is part of what is allowed.
    QString zeroWord;
    if (const auto* number = dynamic_cast<const NumberSpinBox*>(editor)) zeroWord = number->zeroText();
    if (const auto* number = dynamic_cast<const NumberDoubleSpinBox*>(editor)) zeroWord = number->zeroText();
    if (!zeroWord.isEmpty() && allowed.startsWith(QStringLiteral("0 ")))
        allowed = QStringLiteral("0 (%1)").arg(zeroWord) + allowed.mid(1);
    if (const auto* spin = qobject_cast<const QSpinBox*>(editor)) {
        const int v = spin->value();
        if (v >= setting.intMin && v <= setting.intMax) return {};
        return notAppliedText(QString::number(v), allowed);
    }
    if (const auto* dspin = qobject_cast<const QDoubleSpinBox*>(editor)) {
        const double v = dspin->value();
        if (v >= setting.min && (setting.maxOpen ? v < setting.max : v <= setting.max)) return {};
        return notAppliedText(numberText(v), allowed);
    }
    const auto* edit = qobject_cast<const QLineEdit*>(editor);
    if (!edit) return {};
    const QString text = edit->text().trimmed();
    const QString quoted = QStringLiteral("'%1'").arg(text.size() > 40 ? text.left(40) + QStringLiteral("...") : text);
    switch (setting.kind) {
        case SettingKind::UInt64: {
            bool ok = false;
            text.toULongLong(&ok);
            return ok ? QString() : notAppliedText(quoted, QObject::tr("a whole number from 0 to %1").arg(UINT64_MAX));
        }
        case SettingKind::IntList:
            return parseIntList(setting, text).is_null() ? notAppliedText(quoted, allowed) : QString();
        case SettingKind::String:
        case SettingKind::Path:
            return setting.nonEmpty && text.isEmpty() ? QObject::tr("An empty value is not applied: enter one.")
                                                      : QString();
        default: return {};
    }
}

void showSettingValue(QWidget* editor, const SettingInfo& setting, const Json& value) {
    if (auto* spin = qobject_cast<QSpinBox*>(editor)) {
        spin->setValue(clampToInt(value.get<int64_t>()));
    } else if (auto* dspin = qobject_cast<QDoubleSpinBox*>(editor)) {
        dspin->setValue(value.get<double>());
    } else if (auto* check = qobject_cast<QCheckBox*>(editor)) {
        check->setChecked(value.get<bool>());
    } else if (auto* combo = qobject_cast<QComboBox*>(editor)) {
        combo->setCurrentIndex(std::max(0, combo->findData(value.get<int>())));
    } else if (auto* edit = qobject_cast<QLineEdit*>(editor)) {
        QStringList parts;
        switch (setting.kind) {
            case SettingKind::UInt64: edit->setText(QString::number(qulonglong(value.get<uint64_t>()))); return;
            case SettingKind::StringList:
                for (const Json& v : value) parts << QString::fromStdString(v.get<std::string>());
                edit->setText(parts.join(QStringLiteral(", ")));
                return;
            case SettingKind::IntList:
                for (const Json& v : value) parts << QString::number(v.get<int64_t>());
                edit->setText(parts.join(QLatin1Char(',')));
                return;
            default: edit->setText(QString::fromStdString(value.get<std::string>())); return;
        }
    }
}

Json settingEditorValue(const QWidget* editor, const SettingInfo& setting, const Json& current) {
    if (auto* spin = qobject_cast<const QSpinBox*>(editor)) {
        // A value beyond what the spin box holds shows as its limit; unless edited, it stays.
        const int64_t now = current.get<int64_t>();
        if (clampToInt(now) != now && spin->value() == clampToInt(now)) return current;
        return Json(int64_t(spin->value()));
    }
    if (auto* dspin = qobject_cast<const QDoubleSpinBox*>(editor)) return Json(dspin->value());
    if (auto* check = qobject_cast<const QCheckBox*>(editor)) return Json(check->isChecked());
    if (auto* combo = qobject_cast<const QComboBox*>(editor)) return Json(combo->currentData().toInt());
    const auto* edit = qobject_cast<const QLineEdit*>(editor);
    if (!edit) return current;
    const QString text = edit->text().trimmed();
    switch (setting.kind) {
        case SettingKind::UInt64: {
            bool ok = false;
            const qulonglong v = text.toULongLong(&ok);
            return ok ? Json(uint64_t(v)) : current;
        }
        case SettingKind::StringList: {
            Json list = Json::array();
            for (const QString& n : text.split(QLatin1Char(','), Qt::SkipEmptyParts))
                if (!n.trimmed().isEmpty()) list.push_back(n.trimmed().toStdString());
            return list;
        }
        case SettingKind::IntList: {
            const Json list = parseIntList(setting, text);
            return list.is_null() ? current : list;
        }
        default:
            if (setting.nonEmpty && text.isEmpty()) return current;
            return Json(text.toStdString());
    }
}

void connectSettingEditor(QWidget* editor, QObject* context, const std::function<void()>& edited) {
    if (auto* spin = qobject_cast<QSpinBox*>(editor))
        QObject::connect(spin, &QSpinBox::valueChanged, context, [edited] { edited(); });
    else if (auto* dspin = qobject_cast<QDoubleSpinBox*>(editor))
        QObject::connect(dspin, &QDoubleSpinBox::valueChanged, context, [edited] { edited(); });
    else if (auto* check = qobject_cast<QCheckBox*>(editor))
        QObject::connect(check, &QCheckBox::toggled, context, [edited] { edited(); });
    else if (auto* combo = qobject_cast<QComboBox*>(editor))
        QObject::connect(combo, &QComboBox::currentIndexChanged, context, [edited] { edited(); });
    else if (auto* edit = qobject_cast<QLineEdit*>(editor))
        QObject::connect(edit, &QLineEdit::editingFinished, context, [edited] { edited(); });
}

}  // namespace strata::ui
