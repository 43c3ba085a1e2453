// ModelImporter (ModelImporter.h): the import runs in QtConcurrent's pool; the GUI thread only hears of it.
#include "ui/ModelImporter.h"

#include <QMetaObject>
#include <QPointer>

#include <QtConcurrent/QtConcurrentRun>

#include "core/export/OnnxImport.h"

namespace strata::ui {

ModelImporter::ModelImporter(QObject* parent) : QObject(parent), m_watcher(new QFutureWatcher<Outcome>(this)) {
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] { emit finished(m_watcher->result()); });
}

bool ModelImporter::start(const QString& onnxPath, const QString& projectPath) {
    if (m_watcher->isRunning()) return false;
    const std::string onnx = onnxPath.toStdString(), project = projectPath.toStdString();
    QPointer<ModelImporter> self(this);
    m_watcher->setFuture(QtConcurrent::run([self, onnx, project, projectPath] {
        Outcome o;
        o.projectPath = projectPath;
        strata::OnnxImportOptions options;
        // The workbench always builds what it can: the nodes it could not map are listed, and the layers after
        // them wait unconnected in the editor, where the user can see and fix them.
        options.partial = true;
        options.progress = [self](double f, const std::string& stage) {
            if (!self) return;
            QMetaObject::invokeMethod(
                self.data(),
                [self, f, s = QString::fromStdString(stage)] {
                    if (self) emit self->progress(f, s);
                },
                Qt::QueuedConnection);
        };
        try {
            strata::OnnxImport imported = strata::importOnnxFile(onnx, options);
            strata::writeImportedProject(imported, project);
            for (const strata::OnnxImportIssue& i : imported.unmapped) o.issues << QString::fromStdString(i.text());
            for (const std::string& a : imported.absorbed) o.absorbed << QString::fromStdString(a);
            o.layers = static_cast<int>(imported.project.graph.nodes().size());
            o.ok = true;
        } catch (const strata::OnnxImportError& e) {
            o.error = QString::fromStdString(e.what());
            for (const strata::OnnxImportIssue& i : e.issues()) o.issues << QString::fromStdString(i.text());
        } catch (const std::exception& e) {
            o.error = QString::fromStdString(e.what());
        }
        return o;
    }));
    return true;
}

}  // namespace strata::ui
