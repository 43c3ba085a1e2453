// OptimizeWorker: the engine side of the Optimize panel (see OptimizeWorker.h).
#include "ui/base/OptimizeWorker.h"

#include <exception>

namespace strata::ui {

namespace {

void registerOptimizeMetaTypes() {
    static const bool once = [] {
        qRegisterMetaType<strata::CompressionVariant>("strata::CompressionVariant");
        qRegisterMetaType<strata::CompressionRequest>("strata::CompressionRequest");
        return true;
    }();
    (void)once;
}

}  // namespace

OptimizeWorker::OptimizeWorker(QObject* parent) : QObject(parent) { registerOptimizeMetaTypes(); }

OptimizeWorker::~OptimizeWorker() = default;

void OptimizeWorker::stop() {
    std::lock_guard lock(m_mutex);
    if (m_study)
        m_study->requestStop();
    else if (m_running)
        m_pendingStop = true;
}

void OptimizeWorker::onEpoch(const EpochEvent& e) {
    QString line = tr("fine-tuning epoch %1: train accuracy %2%").arg(e.epoch).arg(e.trainAccuracy * 100, 0, 'f', 2);
    if (e.hasValidation) line += tr(", validation accuracy %1%").arg(e.valAccuracy * 100, 0, 'f', 2);
    emit logMessage(line);
}

void OptimizeWorker::onLog(const std::string& message) { emit logMessage(QString::fromStdString(message)); }

void OptimizeWorker::start(const strata::CompressionRequest& request) {
    if (m_running.exchange(true)) {
        emit finished(false, false, tr("An optimization is already running."));
        return;
    }
    bool ok = true, stopped = false;
    QString error;
    try {
        CompressionStudy study(
            request,
            [this](const std::string& stage, double fraction) {
                const QString s = QString::fromStdString(stage);
                const auto now = std::chrono::steady_clock::now();
                // Fine-tuning reports every step: a queued signal per step would flood the GUI thread.
                if (s == m_lastStage && now - m_lastProgress < std::chrono::milliseconds(100)) return;
                m_lastStage = s;
                m_lastProgress = now;
                emit progress(s, fraction);
            },
            [this](const CompressionVariant& v) { emit variantMeasured(v); }, this);
        {
            std::lock_guard lock(m_mutex);
            m_study = &study;
            if (m_pendingStop) study.requestStop();
        }
        try {
            study.run();
        } catch (...) {
            std::lock_guard lock(m_mutex);
            m_study = nullptr;
            throw;
        }
        std::lock_guard lock(m_mutex);
        m_study = nullptr;
        stopped = study.stopRequested();
    } catch (const std::exception& e) {
        ok = false;
        error = QString::fromStdString(e.what());
    }
    {
        std::lock_guard lock(m_mutex);
        m_pendingStop = false;
    }
    m_running = false;
    emit finished(ok, stopped, error);
}

}  // namespace strata::ui
