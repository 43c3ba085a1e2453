// FieldError: the red line under a form field that says why what was typed there is not applied
// (issue 17: nothing typed is changed behind the user's back; the value stays as typed until it is
// fixed, and the line goes away with the error). The property panel, the settings panels, the export
// dialog and the Predict dock use it.
#pragma once

#include <QString>

class QDoubleSpinBox;
class QSpinBox;
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

}  // namespace strata::ui
