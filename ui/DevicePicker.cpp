// DevicePicker: see DevicePicker.h.
#include "ui/DevicePicker.h"

#include <QHeaderView>
#include <QLabel>
#include <QTimer>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <map>
#include <mutex>

#include <QtConcurrent/QtConcurrentRun>

namespace strata::ui {

namespace {

enum Column { ColDevice = 0, ColName, ColMemory, ColCompute, ColUtilization, ColumnCount };

QString formatGiB(double bytes) { return QString::number(bytes / (1024.0 * 1024.0 * 1024.0), 'f', 1) + " GiB"; }

}  // namespace

// Telemetry sources, created lazily and used only by one sampling task at a time.
struct DevicePicker::Samplers {
    std::mutex mutex;
    std::vector<std::string> devices;
    std::map<std::string, std::unique_ptr<TelemetrySource>> sources;
    std::map<std::string, bool> failed;
};

DevicePicker::DevicePicker(QWidget* parent) : QWidget(parent), m_samplers(std::make_shared<Samplers>()) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_tree = new QTreeWidget(this);
    m_tree->setColumnCount(ColumnCount);
    m_tree->setHeaderLabels({tr("Device"), tr("Name"), tr("Memory"), tr("Compute"), tr("Utilization")});
    m_tree->setRootIsDecorated(false);
    m_tree->setUniformRowHeights(true);
    m_tree->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_tree->header()->setStretchLastSection(true);
    layout->addWidget(m_tree);
    m_note = new QLabel(this);
    m_note->setWordWrap(true);
    m_note->setStyleSheet("color: palette(mid);");
    layout->addWidget(m_note);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color: #b00020; font-weight: bold;");
    m_error->setVisible(false);
    layout->addWidget(m_error);

    m_timer = new QTimer(this);
    m_timer->setInterval(1000);
    connect(m_timer, &QTimer::timeout, this, &DevicePicker::sampleNow);
    m_watcher = new QFutureWatcher<std::vector<TelemetryEvent>>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] {
        for (const TelemetryEvent& e : m_watcher->result()) showTelemetry(e);
    });
    connect(m_tree, &QTreeWidget::itemChanged, this, &DevicePicker::onItemChanged);

    refreshDevices();
}

DevicePicker::~DevicePicker() {
    m_timer->stop();
    m_watcher->waitForFinished();
}

void DevicePicker::refreshDevices() {
    std::vector<DeviceInfo> devices = backendRegistry().devices();
    QString reason;
    bool anyGpu = false;
    for (const DeviceInfo& d : devices) anyGpu = anyGpu || d.device.type == DeviceType::Cuda;
    if (!anyGpu) {
        BackendProvider* cuda = backendRegistry().provider(DeviceType::Cuda);
        if (!cuda) {
            reason = tr("this build has no CUDA support");
        } else {
            reason = QString::fromStdString(cuda->unavailableReason());
            if (reason.isEmpty()) reason = tr("no CUDA device found");
        }
    }
    populate(devices, reason);
}

void DevicePicker::setDeviceList(const std::vector<DeviceInfo>& devices, const QString& gpuUnavailableReason) {
    populate(devices, gpuUnavailableReason);
}

void DevicePicker::populate(const std::vector<DeviceInfo>& devices, const QString& gpuReason) {
    const QStringList previous = selectedDevices();
    m_updating = true;
    m_tree->clear();
    bool anyGpu = false;
    for (const DeviceInfo& info : devices) {
        const QString id = QString::fromStdString(info.device.toString());
        auto* item = new QTreeWidgetItem(m_tree);
        item->setData(ColDevice, Qt::UserRole, id);
        item->setText(ColDevice, id);
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable | Qt::ItemIsSelectable);
        item->setCheckState(ColDevice, Qt::Unchecked);
        item->setText(ColName, QString::fromStdString(info.name));
        if (info.device.type == DeviceType::Cuda) {
            anyGpu = true;
            item->setText(ColMemory, info.totalMemoryBytes ? tr("%1 (%2 free)")
                                                                 .arg(formatGiB(double(info.totalMemoryBytes)),
                                                                      formatGiB(double(info.freeMemoryBytes)))
                                                           : QString());
            item->setText(ColCompute,
                          tr("%1.%2, %3 SMs").arg(info.computeMajor).arg(info.computeMinor).arg(info.multiprocessors));
        } else {
            item->setText(ColMemory, info.totalMemoryBytes ? formatGiB(double(info.totalMemoryBytes)) : QString());
            item->setText(ColCompute,
                          info.multiprocessors ? tr("%n core(s)", nullptr, info.multiprocessors) : QString());
        }
        item->setText(ColUtilization, QStringLiteral("-"));
    }
    m_gpuNote = anyGpu ? QString() : (gpuReason.isEmpty() ? tr("no CUDA device found") : gpuReason);
    {
        std::lock_guard lock(m_samplers->mutex);
        m_samplers->devices.clear();
        for (const DeviceInfo& info : devices) m_samplers->devices.push_back(info.device.toString());
    }
    m_updating = false;

    // Keep what the user ticked when it is still listed; otherwise default to the first GPU, or the CPU.
    QStringList keep;
    if (m_userSelected)
        for (const QString& d : previous)
            if (itemFor(d)) keep << d;
    if (keep.isEmpty()) {
        for (const DeviceInfo& info : devices)
            if (info.device.type == DeviceType::Cuda) {
                keep << QString::fromStdString(info.device.toString());
                break;
            }
        if (keep.isEmpty() && itemFor("cpu")) keep << "cpu";
    }
    applySelection(keep);
}

QTreeWidgetItem* DevicePicker::itemFor(const QString& device) const {
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        QTreeWidgetItem* item = m_tree->topLevelItem(i);
        if (item->data(ColDevice, Qt::UserRole).toString() == device) return item;
    }
    return nullptr;
}

int DevicePicker::deviceCount() const { return m_tree->topLevelItemCount(); }

QStringList DevicePicker::selectedDevices() const {
    QStringList out;
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        QTreeWidgetItem* item = m_tree->topLevelItem(i);
        if (item->checkState(ColDevice) == Qt::Checked) out << item->data(ColDevice, Qt::UserRole).toString();
    }
    return out;
}

void DevicePicker::setSelectedDevices(const QStringList& devices) {
    m_userSelected = true;
    applySelection(devices);
}

void DevicePicker::applySelection(const QStringList& devices) {
    m_updating = true;
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        QTreeWidgetItem* item = m_tree->topLevelItem(i);
        const bool on = devices.contains(item->data(ColDevice, Qt::UserRole).toString());
        item->setCheckState(ColDevice, on ? Qt::Checked : Qt::Unchecked);
    }
    m_updating = false;
    updateNotes();
    emit selectionChanged();
}

void DevicePicker::onItemChanged(QTreeWidgetItem* item, int column) {
    if (m_updating || column != ColDevice) return;
    m_userSelected = true;
    // The CPU and the GPUs exclude each other; several GPUs may be ticked together.
    if (item->checkState(ColDevice) == Qt::Checked) {
        const bool isCpu = item->data(ColDevice, Qt::UserRole).toString() == QLatin1String("cpu");
        m_updating = true;
        for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
            QTreeWidgetItem* other = m_tree->topLevelItem(i);
            if (other == item) continue;
            const bool otherIsCpu = other->data(ColDevice, Qt::UserRole).toString() == QLatin1String("cpu");
            if (isCpu || otherIsCpu) other->setCheckState(ColDevice, Qt::Unchecked);
        }
        m_updating = false;
    }
    updateNotes();
    emit selectionChanged();
}

QString DevicePicker::selectionError() const {
    const QStringList selected = selectedDevices();
    if (selected.isEmpty()) return tr("Tick a device to train on.");
    int gpus = 0;
    for (const QString& d : selected) gpus += d.startsWith(QLatin1String("cuda")) ? 1 : 0;
    if (selected.size() > 1 && gpus != selected.size()) return tr("Tick either the CPU or GPUs.");
    return {};
}

QString DevicePicker::runDevice() const {
    if (!selectionError().isEmpty()) return {};
    // Several GPUs: "cuda:0,cuda:1", one data-parallel replica on each.
    return selectedDevices().join(QLatin1Char(','));
}

void DevicePicker::updateNotes() {
    // The reason in words on the panel; a driver's own text (in parentheses) only in the tooltip.
    const qsizetype detail = m_gpuNote.indexOf(QLatin1String(" ("));
    const QString words = detail > 0 ? m_gpuNote.left(detail) : m_gpuNote;
    m_note->setText(m_gpuNote.isEmpty() ? QString() : tr("No GPU listed: %1.").arg(words));
    m_note->setToolTip(detail > 0 ? m_gpuNote : QString());
    m_note->setVisible(!m_gpuNote.isEmpty());
    const QStringList selected = selectedDevices();
    // Only the multi-GPU case is worth a red line while picking; an empty selection is obvious.
    const QString error = selected.isEmpty() ? QString() : selectionError();
    m_error->setText(error);
    m_error->setVisible(!error.isEmpty());
}

QString DevicePicker::utilizationText(const QString& device) const {
    QTreeWidgetItem* item = itemFor(device);
    return item ? item->text(ColUtilization) : QString();
}

void DevicePicker::showTelemetry(const TelemetryEvent& event) {
    QTreeWidgetItem* item = itemFor(QString::fromStdString(event.device));
    if (!item) return;
    if (!event.available) {
        item->setText(ColUtilization, tr("unavailable"));
        item->setToolTip(ColUtilization, QString::fromStdString(event.reason));
        return;
    }
    QString text = QString::number(event.utilizationPercent, 'f', 0) + " %";
    if (event.memoryTotalBytes > 0)
        text += tr(", %1 / %2 used").arg(formatGiB(event.memoryUsedBytes), formatGiB(event.memoryTotalBytes));
    if (event.temperatureC >= 0) text += QStringLiteral(", %1 \u00b0C").arg(event.temperatureC, 0, 'f', 0);
    item->setText(ColUtilization, text);
    item->setToolTip(ColUtilization, QString());
}

void DevicePicker::setRefreshIntervalMs(int ms) { m_timer->setInterval(ms); }

void DevicePicker::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    sampleNow();
    m_timer->start();
}

void DevicePicker::hideEvent(QHideEvent* event) {
    m_timer->stop();
    QWidget::hideEvent(event);
}

void DevicePicker::sampleNow() {
    // Sampling (NVML, /proc) stays off the GUI thread; at most one round is in flight.
    if (m_watcher->isRunning()) return;
    std::shared_ptr<Samplers> samplers = m_samplers;
    m_watcher->setFuture(QtConcurrent::run([samplers] {
        std::vector<TelemetryEvent> out;
        std::lock_guard lock(samplers->mutex);
        for (const std::string& id : samplers->devices) {
            if (samplers->failed[id]) continue;
            try {
                auto& source = samplers->sources[id];
                if (!source) source = backendRegistry().telemetry(Device::parse(id));
                if (!source) {
                    samplers->failed[id] = true;
                    TelemetryEvent e;
                    e.device = id;
                    e.available = false;
                    e.reason = "this device cannot be sampled";
                    out.push_back(e);
                    continue;
                }
                TelemetryEvent e = source->sample();
                if (e.device.empty()) e.device = id;
                if (!e.available) samplers->failed[id] = true;
                out.push_back(std::move(e));
            } catch (const std::exception& ex) {
                samplers->failed[id] = true;
                TelemetryEvent e;
                e.device = id;
                e.available = false;
                e.reason = ex.what();
                out.push_back(e);
            }
        }
        return out;
    }));
}

}  // namespace strata::ui
