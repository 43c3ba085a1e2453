// FieldError: the red line under a form field that says why what was typed there is not applied
// (issue 17: nothing typed is changed behind the user's back; the value stays as typed until it is
// fixed, and the line goes away with the error). The property panel, the settings panels, the export
// dialog and the Predict dock use it.
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QString>

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

// Spin boxes that keep any number typed (acceptAnyNumber) and can show 0 as a word ("off", "all") between
// their prefix and suffix. QSpinBox's special value text would need 0 as the minimum, and a minimum stops a
// minus sign from being typed at all, where the user should see why -3 is refused. The word can be typed
// back (any case); it reads as 0.
class NumberSpinBox : public QSpinBox {
    Q_OBJECT
public:
    explicit NumberSpinBox(QWidget* parent = nullptr);
    void setZeroText(const QString& text);
    QString zeroText() const { return m_zeroText; }
    // The box is as wide as the numbers from `lo` to `hi` need (any number can still be typed); without it,
    // as wide as the whole int range.
    void setSizeRange(int lo, int hi);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    QString textFromValue(int value) const override;
    int valueFromText(const QString& text) const override;
    QValidator::State validate(QString& input, int& pos) const override;

private:
    QString m_zeroText;
    bool m_sized = false;
    int m_sizeLo = 0, m_sizeHi = 0;
};

class NumberDoubleSpinBox : public QDoubleSpinBox {
    Q_OBJECT
public:
    explicit NumberDoubleSpinBox(QWidget* parent = nullptr);
    void setZeroText(const QString& text);
    QString zeroText() const { return m_zeroText; }
    void setSizeRange(double lo, double hi);  // as NumberSpinBox's
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    QString textFromValue(double value) const override;
    double valueFromText(const QString& text) const override;
    QValidator::State validate(QString& input, int& pos) const override;

private:
    QString m_zeroText;
    bool m_sized = false;
    double m_sizeLo = 0, m_sizeHi = 0;
};

}  // namespace strata::ui
