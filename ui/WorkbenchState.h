// WorkbenchState: what the workbench shows, as JSON, so that a script driving the real GUI (tools/gui-review.sh,
// under Xvfb with xdotool) can assert on it rather than only take screenshots: the project (file, id, window
// title), the dashboard (state, run shown, points), the export dialog, the Predict and Optimize docks (which
// run each uses, what they say), the Runs view, an open message box, and the screen position of the controls
// such a script clicks (so a layout change does not make it click beside them). `strata --state-file FILE`
// writes it (StateWriter) whenever it changes.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QString>

class QTimer;

namespace strata::ui {

class MainWindow;

QJsonObject workbenchState(const MainWindow& window);

// Writes workbenchState(window) to `path` (replacing it atomically) every `intervalMs` when it changed.
class StateWriter : public QObject {
    Q_OBJECT
public:
    StateWriter(MainWindow* window, const QString& path, int intervalMs = 200);
    // Writes now if the state changed; false when the file could not be written.
    bool write();

private:
    const MainWindow* m_window;
    QString m_path;
    QByteArray m_last;
    QTimer* m_timer;
};

}  // namespace strata::ui
