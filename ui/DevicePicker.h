// DevicePicker: the devices a run can use (the CPU and every CUDA GPU listed
// by backendRegistry()), with name, memory, compute capability and live
// utilization. The CPU, or one or several GPUs (a data-parallel run, one replica
// per GPU): selectionError() explains why a selection is refused. With no GPU the
// CPU is selected and the list says why there is none.
#pragma once

#include <QFutureWatcher>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/backend/BackendRegistry.h"

class QLabel;
class QTimer;
class QTreeWidget;
class QTreeWidgetItem;

namespace strata::ui {

class DevicePicker : public QWidget {
    Q_OBJECT
public:
    explicit DevicePicker(QWidget* parent = nullptr);
    ~DevicePicker() override;

    // Lists the devices again from backendRegistry().
    void refreshDevices();
    // Test hook: shows `devices` instead of the registry's; `gpuUnavailableReason` is shown when
    // the list has no GPU. Live sampling still goes through the registry.
    void setDeviceList(const std::vector<DeviceInfo>& devices, const QString& gpuUnavailableReason);

    // Ticked devices as "cpu" / "cuda:N", in list order.
    QStringList selectedDevices() const;
    void setSelectedDevices(const QStringList& devices);
    // "" when the selection can start a run; otherwise a sentence saying what to change.
    QString selectionError() const;
    // The device(s) a run would use, "cpu", "cuda:1" or "cuda:0,cuda:1" ("" when selectionError() is not empty).
    QString runDevice() const;
    // Why the GPU list is empty ("" when it has GPUs).
    QString gpuNote() const { return m_gpuNote; }
    int deviceCount() const;
    // Utilization text shown for a device ("" if the device is not listed).
    QString utilizationText(const QString& device) const;

    // Shows a telemetry sample (from the picker's own sampler or a running engine).
    void showTelemetry(const TelemetryEvent& event);
    // Interval of the live utilization refresh while visible (default 1000 ms).
    void setRefreshIntervalMs(int ms);

signals:
    void selectionChanged();

protected:
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    void populate(const std::vector<DeviceInfo>& devices, const QString& gpuReason);
    void applySelection(const QStringList& devices);
    void onItemChanged(QTreeWidgetItem* item, int column);
    void sampleNow();
    void updateNotes();
    QTreeWidgetItem* itemFor(const QString& device) const;

    struct Samplers;
    QTreeWidget* m_tree = nullptr;
    QLabel* m_note = nullptr;
    QLabel* m_error = nullptr;
    QTimer* m_timer = nullptr;
    QString m_gpuNote;
    std::shared_ptr<Samplers> m_samplers;
    QFutureWatcher<std::vector<TelemetryEvent>>* m_watcher = nullptr;
    bool m_updating = false;
    bool m_userSelected = false;  // a tick by the user (or setSelectedDevices) survives a refresh
};

}  // namespace strata::ui
