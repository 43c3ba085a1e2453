// FieldError: see FieldError.h.
#include "ui/FieldError.h"

#include <QDoubleSpinBox>
#include <QLabel>
#include <QLocale>
#include <QSpinBox>
#include <QVBoxLayout>
#include <climits>

namespace strata::ui {

namespace {

const char* kLineProperty = "strataFieldErrorLine";
const char* kTextProperty = "strataFieldErrorText";
const char* kToolTipProperty = "strataFieldErrorToolTip";

QLabel* lineOf(const QWidget* editor) {
    return editor ? qobject_cast<QLabel*>(editor->property(kLineProperty).value<QObject*>()) : nullptr;
}

}  // namespace

QWidget* withFieldError(QWidget* field, QWidget* editor) {
    if (!editor) editor = field;
    auto* box = new QWidget(field->parentWidget());
    auto* layout = new QVBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    field->setParent(box);
    layout->addWidget(field);
    auto* line = new QLabel(box);
    line->setObjectName(QStringLiteral("error_") + editor->objectName());
    line->setWordWrap(true);
    line->setStyleSheet(QStringLiteral("QLabel { color: #b00020; }"));
    line->hide();
    layout->addWidget(line);
    editor->setProperty(kLineProperty, QVariant::fromValue(static_cast<QObject*>(line)));
    return box;
}

void setFieldError(QWidget* editor, const QString& text) {
    if (!editor || fieldError(editor) == text) return;
    editor->setProperty(kTextProperty, text);
    if (QLabel* line = lineOf(editor)) {
        line->setText(text);
        line->setVisible(!text.isEmpty());
        return;
    }
    // No line under it: the tool tip says it (its own text kept for when the error goes).
    if (!editor->property(kToolTipProperty).isValid()) editor->setProperty(kToolTipProperty, editor->toolTip());
    const QString own = editor->property(kToolTipProperty).toString();
    editor->setToolTip(text.isEmpty() ? own : text + (own.isEmpty() ? QString() : QStringLiteral("\n") + own));
}

QString fieldError(const QWidget* editor) { return editor ? editor->property(kTextProperty).toString() : QString(); }

QString notAppliedText(const QString& typed, const QString& allowed) {
    return QObject::tr("%1 is not applied: must be %2.").arg(typed, allowed);
}

QString numberText(double value) { return QLocale(QLocale::English).toString(value, 'g', 12).remove(QLatin1Char(',')); }

void acceptAnyNumber(QSpinBox* spin) { spin->setRange(INT_MIN, INT_MAX); }

void acceptAnyNumber(QDoubleSpinBox* spin) { spin->setRange(-1e12, 1e12); }

}  // namespace strata::ui
