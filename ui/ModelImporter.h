// ModelImporter: File > Import Model's work, off the GUI thread. An ONNX file becomes a project and its
// weights' checkpoint (core/export/OnnxImport.h, as `strata-train import`) on a worker thread; progress comes
// back queued, for a progress dialog, and the outcome as one signal: the project written (with the nodes that
// could not be mapped, which the project leaves unconnected), or the error naming the file and the nodes.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>

namespace strata::ui {

class ModelImporter : public QObject {
    Q_OBJECT
public:
    struct Outcome {
        bool ok = false;
        QString projectPath;
        QString error;         // !ok: what failed, naming the file and the nodes
        QStringList issues;    // the nodes not mapped ("node 'x' (CumSum): ..."), ok or not
        QStringList absorbed;  // what the import folded away
        int layers = 0;
    };

    explicit ModelImporter(QObject* parent = nullptr);
    // Starts importing `onnxPath` into `projectPath` (overwritten); false when an import is already running.
    bool start(const QString& onnxPath, const QString& projectPath);
    bool running() const { return m_watcher->isRunning(); }
    // Blocks until the running import has ended (tests, closing the window).
    void wait() { m_watcher->waitForFinished(); }

signals:
    // Queued from the worker: a fraction 0..1 and what is being done.
    void progress(double fraction, const QString& stage);
    void finished(const strata::ui::ModelImporter::Outcome& outcome);

private:
    QFutureWatcher<Outcome>* m_watcher;
};

}  // namespace strata::ui
