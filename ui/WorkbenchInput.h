// WorkbenchInput: the workbench's input rules, kept in one event filter on the application (issue 34):
// - the mouse wheel over a spin box or a choice box that does not have the focus scrolls the panel under it
//   and leaves the value alone (weight decay went from 0 to 0.0002 while scrolling the Training panel, and
//   the run used it); a click or Tab gives the field the focus, and then the wheel steps it;
// - the workbench's own shortcuts (Ctrl+E, F5, ...) work with the focus anywhere, also in a field that would
//   take the key for itself (a line edit reads Ctrl+E as "end of line");
// - the control that has the keyboard focus always shows it: a ring drawn over its edge (FocusRing), in the
//   palette's highlight colour, whatever the style draws or leaves out (tree views, the canvas, tool buttons).
#pragma once

#include <QList>
#include <QObject>
#include <QPointer>

class QAction;
class QWidget;

namespace strata::ui {

class FocusRing;

class WorkbenchInput : public QObject {
    Q_OBJECT
public:
    // The application's one instance, installed on first use.
    static WorkbenchInput* instance();

    // Shortcuts that win over a focused field's own use of the key (the action must be enabled).
    void addGlobalShortcuts(const QList<QAction*>& actions);
    // The widget the ring is drawn on now (the focus widget, or the spin box or choice box around it); null
    // when none.
    QWidget* ringedWidget() const;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    explicit WorkbenchInput(QObject* parent);
    void focusChanged(QWidget* now);

    QList<QPointer<QAction>> m_global;
    QPointer<FocusRing> m_ring;
};

}  // namespace strata::ui
