// DataChecker: see DataChecker.h.
#include "ui/DataChecker.h"

#include <QTimer>
#include <exception>
#include <memory>
#include <utility>

#include <QtConcurrent/QtConcurrentRun>

#include "ui/base/ProjectDocument.h"

namespace strata::ui {

struct DataChecker::Result {
    DataFacts facts;
    QString error;
};

namespace {

// Facts read on the spot, for data that costs nothing to describe (a synthetic set's settings): Start needs no
// wait for it.
bool cheap(const DatasetSettings& s) { return s.kind == DatasetKind::Synthetic; }

}  // namespace

DataChecker::DataChecker(ProjectDocument* doc, QObject* parent)
    : QObject(parent), m_doc(doc), m_watcher(new QFutureWatcher<void>(this)), m_autoTimer(new QTimer(this)) {
    m_autoTimer->setSingleShot(true);
    connect(m_autoTimer, &QTimer::timeout, this, [this] {
        if (!factsCurrent()) read();
    });
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] {
        const std::shared_ptr<Result> result = m_result;
        m_factsFor = m_readingFor;
        m_pathFor = m_readingPath;
        m_dataError = result->error;
        if (result->error.isEmpty())
            m_facts = result->facts;
        else
            m_facts.reset();
        if (std::exchange(m_reread, false) || !factsCurrent()) {
            read();  // the settings changed while it read: their data, not the old
            return;
        }
        if (m_facts && m_facts->trainCount > 0) emit trainSampleCountKnown(m_facts->trainCount);
        compare();
        if (m_pendingStart) emit startRequested(*std::exchange(m_pendingStart, std::nullopt));
    });
    connect(doc, &ProjectDocument::analysisChanged, this, &DataChecker::compare);
    connect(doc, &ProjectDocument::settingsChanged, this, &DataChecker::dataSettingsChanged);
    connect(doc, &ProjectDocument::fileChanged, this, &DataChecker::dataSettingsChanged);  // relative paths move
    connect(doc, &ProjectDocument::projectReset, this, [this] {
        m_pendingStart.reset();
        dataSettingsChanged();
    });
    dataSettingsChanged();
}

DataChecker::~DataChecker() { m_watcher->waitForFinished(); }

bool DataChecker::factsCurrent() const {
    return (m_facts || !m_dataError.isEmpty()) && m_factsFor == m_doc->project().dataset &&
           m_pathFor == m_doc->filePath();
}

QString DataChecker::factsText() const {
    if (!m_facts) return {};
    QString text = tr("%1, %n class(es)", nullptr, m_facts->numClasses)
                       .arg(QString::fromStdString(m_facts->sampleShape.toString()));
    if (m_facts->vocabularySize > 0) text += tr(", a vocabulary of %1 tokens").arg(m_facts->vocabularySize);
    return text;
}

void DataChecker::dataSettingsChanged() {
    if (factsCurrent()) return;  // a training setting, or the same data
    const bool had = m_state != State::Unchecked || !m_mismatches.empty();
    m_state = State::Unchecked;
    m_mismatches.clear();
    m_facts.reset();
    m_dataError.clear();
    if (had) emit checked();
    if (cheap(m_doc->project().dataset))
        read();
    else if (m_autoDelayMs > 0)
        m_autoTimer->start(m_autoDelayMs);
}

void DataChecker::check() {
    m_facts.reset();  // read again: the files may have changed on disk
    m_dataError.clear();
    read();
}

void DataChecker::read() {
    m_autoTimer->stop();
    if (m_watcher->isRunning()) {
        m_reread = true;
        return;
    }
    m_readingFor = m_doc->project().dataset;
    m_readingPath = m_doc->filePath();
    if (cheap(m_readingFor)) {
        Result now;
        readInto(now, m_readingFor, m_readingPath);
        m_factsFor = m_readingFor;
        m_pathFor = m_readingPath;
        m_dataError = now.error;
        if (now.error.isEmpty())
            m_facts = now.facts;
        else
            m_facts.reset();
        compare();
        return;
    }
    m_state = State::Reading;
    emit checked();
    m_result = std::make_shared<Result>();
    const std::shared_ptr<Result> result = m_result;
    const DatasetSettings settings = m_readingFor;
    const QString path = m_readingPath;
    m_watcher->setFuture(QtConcurrent::run([result, settings, path] { readInto(*result, settings, path); }));
}

void DataChecker::compare() {
    if (!factsCurrent()) return;
    if (!m_dataError.isEmpty()) {
        m_state = State::DataError;
        m_mismatches.clear();
    } else {
        m_state = State::Checked;
        m_mismatches = checkDataAgainstGraph(m_doc->graph(), *m_facts);
    }
    emit checked();
}

DataChecker::Verdict DataChecker::startVerdict(qint64 maxSteps) {
    if (!factsCurrent()) {
        read();
        if (!factsCurrent()) {
            m_pendingStart = maxSteps;
            return {{}, tr("Checking the data against the graph...")};
        }
    }
    compare();
    if (m_state == State::DataError) return {tr("the data cannot be read: %1").arg(m_dataError), {}};
    if (!m_mismatches.empty()) return {QString::fromStdString(dataMismatchText(m_mismatches)), {}};
    return {};
}

void DataChecker::readInto(Result& out, const DatasetSettings& settings, const QString& path) {
    try {
        out.facts = readDataFacts(settings, path.toStdString());
    } catch (const std::exception& e) {
        out.error = QString::fromStdString(e.what());
    }
}

}  // namespace strata::ui
