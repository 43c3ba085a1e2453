// FieldError: see FieldError.h.
#include "ui/FieldError.h"

#include <QDoubleSpinBox>
#include <QLabel>
#include <QLocale>
#include <QSpinBox>
#include <QStyle>
#include <QStyleOptionSpinBox>
#include <QVBoxLayout>
#include <QValidator>
#include <algorithm>
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

namespace detail {

QString coreText(QString text, const QString& prefix, const QString& suffix) {
    if (!prefix.isEmpty() && text.startsWith(prefix)) text.remove(0, prefix.size());
    if (!suffix.isEmpty() && text.endsWith(suffix)) text.chop(suffix.size());
    return text.trimmed();
}

QValidator::State zeroWordState(const QString& core, const QString& word) {
    if (word.isEmpty() || core.isEmpty()) return QValidator::Invalid;
    if (core.compare(word, Qt::CaseInsensitive) == 0) return QValidator::Acceptable;
    const QChar c = core.front();
    if (c.isDigit() || c == QLatin1Char('-') || c == QLatin1Char('+') || c == QLatin1Char('.'))
        return QValidator::Invalid;
    return word.startsWith(core, Qt::CaseInsensitive) ? QValidator::Intermediate : QValidator::Invalid;
}

QSize spinSizeFor(const QAbstractSpinBox* spin, int editHeight, const QString& prefix, const QString& suffix,
                  const QStringList& texts) {
    const QFontMetrics fm(spin->fontMetrics());
    int w = 0;
    for (QString t : texts) {
        t.truncate(18);
        w = std::max(w, fm.horizontalAdvance(t + prefix + suffix + QLatin1Char(' ')));
    }
    QStyleOptionSpinBox opt;
    opt.initFrom(spin);
    opt.buttonSymbols = spin->buttonSymbols();
    opt.frame = spin->hasFrame();
    opt.subControls =
        QStyle::SC_SpinBoxFrame | QStyle::SC_SpinBoxEditField | QStyle::SC_SpinBoxUp | QStyle::SC_SpinBoxDown;
    return spin->style()->sizeFromContents(QStyle::CT_SpinBox, &opt, QSize(w + 2, editHeight), spin);
}

}  // namespace detail

}  // namespace strata::ui
