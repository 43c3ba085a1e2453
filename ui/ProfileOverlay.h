// ProfileOverlay: shows a per-layer profile (core/train/Profile) on the graph canvas: each profiled node is
// tinted by its share of the step's compute and its tooltip lists forward and backward time, FLOPs, bytes,
// achieved GFLOP/s and GB/s and where that sits against the device roofline. The Train menu's Profile Layers
// action runs the profile off the GUI thread and calls applyProfile with the report.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <memory>

#include "core/train/Profile.h"

namespace strata::ui {

class GraphScene;

// The tooltip figures of one layer (HTML).
QString profileFigures(const LayerProfile& layer, const Roofline& roofline);
// The step split in one line: "step 12.3 ms: compute 90%, data wait 2%, overhead 8%".
QString profileSummary(const ProfileReport& report);
// Tints and annotates every node of the report that the scene shows; clears the others.
void applyProfile(GraphScene* scene, const ProfileReport& report);
void clearProfile(GraphScene* scene);

// Runs profileProject on a worker thread (QtConcurrent) on the project's device: a few training steps, so
// seconds, never on the GUI thread. One profile at a time.
class ProfileRunner : public QObject {
    Q_OBJECT
public:
    explicit ProfileRunner(QObject* parent = nullptr);
    ~ProfileRunner() override;
    bool isRunning() const { return m_watcher.isRunning(); }
    // False when one is running already.
    bool start(const Project& project, const QString& projectPath, int steps = 10);
    const ProfileReport& report() const { return m_report; }
    // Blocks until the running profile ends (tests, shutdown).
    void wait() { m_watcher.waitForFinished(); }

signals:
    void finished();
    void failed(const QString& message);

private:
    struct Outcome {
        ProfileReport report;
        QString error;
    };
    QFutureWatcher<Outcome> m_watcher;
    ProfileReport m_report;
};

}  // namespace strata::ui
