// FieldError: the red line under a form field that says why what was typed there is not applied
// (issue 17: nothing typed is changed behind the user's back; the value stays as typed until it is
// fixed, and the line goes away with the error). The property panel, the settings panels, the export
// dialog and the Predict dock use it.
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QString>
#include <QStringList>
#include <QValidator>

class QWidget;

namespace strata::ui {

// Puts `field` (the editor, or a row holding it) in a new widget with a hidden error line under it and
// returns that widget, to be laid out in the field's place. The line belongs to `editor` (default: the
// field itself) and is named "error_" + the editor's objectName.
QWidget* withFieldError(QWidget* field, QWidget* editor = nullptr);
// Shows `text` under the editor; an empty text hides the line. An editor without a line keeps the text
// (fieldError returns it) and shows it as its tool tip's first line.
void setFieldError(QWidget* editor, const QString& text);
// The text shown under the editor; empty when none.
QString fieldError(const QWidget* editor);

// "0 is not applied: must be 1 to 16777216."
QString notAppliedText(const QString& typed, const QString& allowed);
QString numberText(double value);  // "0.5", "1e+12", "16777216": English, up to 12 digits

// Spin boxes that keep any number typed (a QSpinBox's own range would silently change it); the range
// is the caller's check, with the reason shown by setFieldError.
void acceptAnyNumber(QSpinBox* spin);
void acceptAnyNumber(QDoubleSpinBox* spin);

namespace detail {
// The typed text without the spin box's prefix and suffix, trimmed.
QString coreText(QString text, const QString& prefix, const QString& suffix);
// Acceptable when `core` is the zero word, Intermediate while it is being typed (a start of the word that
// is not a number's start), Invalid otherwise (the number check decides).
QValidator::State zeroWordState(const QString& core, const QString& word);
// A spin box's size hint for `texts` (each shown with its prefix and suffix) in an edit field `editHeight`
// high, as QAbstractSpinBox::sizeHint computes it for its minimum and maximum.
QSize spinSizeFor(const QAbstractSpinBox* spin, int editHeight, const QString& prefix, const QString& suffix,
                  const QStringList& texts);
}  // namespace detail

// Spin boxes that keep any number typed (acceptAnyNumber) and can show 0 as a word ("off", "all") between
// their prefix and suffix. QSpinBox's special value text would need 0 as the minimum, and a minimum stops a
// minus sign from being typed at all, where the user should see why -3 is refused. The word can be typed
// back (any case); it reads as 0. Base: QSpinBox (Value int) or QDoubleSpinBox (Value double).
template <class Base, class Value>
class NumberSpin : public Base {
public:
    explicit NumberSpin(QWidget* parent = nullptr) : Base(parent) { acceptAnyNumber(this); }
    void setZeroText(const QString& text) {
        m_zeroText = text;
        this->setSuffix(this->suffix());  // redraws the text (and resizes) without a change of value
    }
    QString zeroText() const { return m_zeroText; }
    // The box is as wide as the numbers from `lo` to `hi` need (any number can still be typed); without it,
    // as wide as the whole range a number may take.
    void setSizeRange(Value lo, Value hi) {
        m_sized = true;
        m_sizeLo = lo;
        m_sizeHi = hi;
        this->updateGeometry();
    }
    QSize sizeHint() const override {
        if (!m_sized) return Base::sizeHint();
        return detail::spinSizeFor(this, this->lineEdit()->sizeHint().height(), this->prefix(), this->suffix(),
                                   {textFromValue(m_sizeLo), textFromValue(m_sizeHi), m_zeroText});
    }
    QSize minimumSizeHint() const override { return m_sized ? sizeHint() : Base::minimumSizeHint(); }

protected:
    QString textFromValue(Value value) const override {
        return value == 0 && !m_zeroText.isEmpty() ? m_zeroText : Base::textFromValue(value);
    }
    Value valueFromText(const QString& text) const override {
        if (detail::zeroWordState(detail::coreText(text, this->prefix(), this->suffix()), m_zeroText) ==
            QValidator::Acceptable)
            return 0;
        return Base::valueFromText(text);
    }
    QValidator::State validate(QString& input, int& pos) const override {
        const QValidator::State word =
            detail::zeroWordState(detail::coreText(input, this->prefix(), this->suffix()), m_zeroText);
        return word != QValidator::Invalid ? word : Base::validate(input, pos);
    }

private:
    QString m_zeroText;
    bool m_sized = false;
    Value m_sizeLo = 0, m_sizeHi = 0;
};

using NumberSpinBox = NumberSpin<QSpinBox, int>;
using NumberDoubleSpinBox = NumberSpin<QDoubleSpinBox, double>;

}  // namespace strata::ui
