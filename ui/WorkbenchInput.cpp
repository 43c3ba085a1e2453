// WorkbenchInput: see WorkbenchInput.h.
#include "ui/WorkbenchInput.h"

#include <QAbstractSpinBox>
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QKeyEvent>
#include <QPainter>
#include <QWidget>

namespace strata::ui {

// A ring along the inside edge of the focused widget: a child of it, on top of its own children, so that no
// sibling or parent clips it (QFocusFrame, outside the widget, vanished where a panel had no margin).
class FocusRing : public QWidget {
public:
    explicit FocusRing(QWidget* target) : QWidget(nullptr) {
        setObjectName(QStringLiteral("strataFocusRing"));
        setAttribute(Qt::WA_TransparentForMouseEvents);
        setAttribute(Qt::WA_NoSystemBackground);
        setAttribute(Qt::WA_NoChildEventsForParent);  // no layout, splitter or toolbar adopts it
        setFocusPolicy(Qt::NoFocus);
        follow(target);
    }
    QWidget* target() const { return m_target; }
    void follow(QWidget* target) {
        if (m_target) m_target->removeEventFilter(this);
        m_target = target;
        if (!target) {
            hide();
            return;
        }
        setParent(target);
        target->installEventFilter(this);
        place();
        show();
    }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (watched == m_target && (event->type() == QEvent::Resize || event->type() == QEvent::ChildAdded ||
                                    event->type() == QEvent::LayoutRequest))
            place();
        return false;
    }
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.setPen(QPen(palette().color(QPalette::Highlight), 2));
        p.drawRect(QRectF(rect()).adjusted(1, 1, -1, -1));
    }

private:
    void place() {
        setGeometry(m_target->rect());
        raise();
    }
    QPointer<QWidget> m_target;
};

namespace {

// The field a wheel or focus event is about: a spin box or choice box, or the line edit inside one.
QWidget* valueField(QObject* object) {
    auto* w = qobject_cast<QWidget*>(object);
    for (int depth = 0; w && depth < 2; ++depth, w = w->parentWidget())
        if (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)) return w;
    return nullptr;
}

}  // namespace

WorkbenchInput::WorkbenchInput(QObject* parent) : QObject(parent) {
    qApp->installEventFilter(this);
    connect(qApp, &QApplication::focusChanged, this, [this](QWidget*, QWidget* now) { focusChanged(now); });
}

WorkbenchInput* WorkbenchInput::instance() {
    static QPointer<WorkbenchInput> one;
    if (!one) one = new WorkbenchInput(qApp);
    return one;
}

void WorkbenchInput::addGlobalShortcuts(const QList<QAction*>& actions) {
    m_global.removeAll(nullptr);
    for (QAction* a : actions) m_global << a;
}

QWidget* WorkbenchInput::ringedWidget() const { return m_ring && m_ring->isVisible() ? m_ring->target() : nullptr; }

void WorkbenchInput::focusChanged(QWidget* now) {
    // The ring goes on the field, not on the line edit inside a spin box.
    if (QWidget* field = valueField(now)) now = field;
    if (!now || now->isWindow()) {
        if (m_ring) m_ring->follow(nullptr);
        return;
    }
    if (!m_ring)
        m_ring = new FocusRing(now);  // owned by the focused widget (and deleted with it)
    else
        m_ring->follow(now);
}

bool WorkbenchInput::eventFilter(QObject* watched, QEvent* event) {
    switch (event->type()) {
        case QEvent::Polish:
            // A wheel must not give a field the focus (Qt::WheelFocus, the default of spin and choice boxes):
            // it would then step the value under a pointer that was only passing over it.
            if (auto* w = qobject_cast<QWidget*>(watched);
                w && (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)) &&
                w->focusPolicy() == Qt::WheelFocus)
                w->setFocusPolicy(Qt::StrongFocus);
            break;
        case QEvent::Wheel:
            if (QWidget* field = valueField(watched); field && !field->hasFocus()) {
                event->ignore();  // on to the parent: the scroll area scrolls
                return true;
            }
            break;
        case QEvent::ShortcutOverride: {
            // Not delivered, so not accepted by the field: the shortcut fires.
            const QKeySequence pressed(static_cast<QKeyEvent*>(event)->keyCombination());
            for (const QPointer<QAction>& a : std::as_const(m_global))
                if (a && a->isEnabled() && a->shortcuts().contains(pressed)) return true;
            break;
        }
        default: break;
    }
    return QObject::eventFilter(watched, event);
}

}  // namespace strata::ui
