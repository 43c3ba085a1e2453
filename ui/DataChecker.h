// DataChecker: the workbench's Check, the project's data against its graph (core/train/DataCheck). The data's
// facts (sample shape, classes, text vocabulary) are read on a worker thread when the data settings change
// (or on Check), then the graph is compared with them at once after every edit, so the Problems panel's list
// is never about the graph as it was. Start asks it first (startVerdict): a run whose data does not fit its
// graph is refused with the whole list before it starts, not recorded as a failed run.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <memory>
#include <optional>
#include <vector>

#include "core/graph/Project.h"
#include "core/train/DataCheck.h"

class QTimer;

namespace strata::ui {

class ProjectDocument;

class DataChecker : public QObject {
    Q_OBJECT
public:
    enum class State { Unchecked, Reading, Checked, DataError };

    explicit DataChecker(ProjectDocument* doc, QObject* parent = nullptr);
    ~DataChecker() override;

    State state() const { return m_state; }
    // The mismatches of the graph as it is now with the data as last read (Checked); empty otherwise.
    const std::vector<DataMismatch>& mismatches() const { return m_mismatches; }
    // DataError: why the data could not be read.
    QString dataError() const { return m_dataError; }
    // Checked: "Fashion-MNIST ...: [1, 28, 28], 10 classes" (what the graph was compared with).
    QString factsText() const;

    // Reads the data again (Check), then compares. The answer comes with checked().
    void check();
    // How long the settings must stay still before the data is read by itself (default 500 ms; 0: only on
    // check() and Start).
    void setAutoCheckDelayMs(int ms) { m_autoDelayMs = ms; }

    // What Start does now: go (both empty), wait for the data (`waiting` says so; startTraining is called again,
    // through startRequested, when the answer is in), or refuse (`refusal`: every mismatch, or the data's error).
    struct Verdict {
        QString refusal, waiting;
    };
    Verdict startVerdict(qint64 maxSteps);

signals:
    // The state or the list changed.
    void checked();
    // A Start put off while the data was read, asked again now that it has been.
    void startRequested(qint64 maxSteps);
    // The data's training-set size became known for the current settings (the LR preview's steps per epoch).
    void trainSampleCountKnown(qint64 count);

private:
    void dataSettingsChanged();
    void read();
    void compare();
    bool factsCurrent() const;

    ProjectDocument* m_doc;
    State m_state = State::Unchecked;
    std::optional<DataFacts> m_facts;
    DatasetSettings m_factsFor;  // the settings m_facts (or m_dataError) was read with
    QString m_pathFor;
    QString m_dataError;
    std::vector<DataMismatch> m_mismatches;
    QFutureWatcher<void>* m_watcher;
    struct Result;
    static void readInto(Result& out, const DatasetSettings& settings, const QString& path);
    std::shared_ptr<Result> m_result;
    DatasetSettings m_readingFor;
    QString m_readingPath;
    bool m_reread = false;  // settings changed while reading: read again after
    std::optional<qint64> m_pendingStart;
    int m_autoDelayMs = 500;
    QTimer* m_autoTimer;
};

}  // namespace strata::ui
