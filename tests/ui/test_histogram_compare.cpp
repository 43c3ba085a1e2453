// The Runs view's "Compare histograms": two runs trained with histograms (different learning rates) and one
// without a run folder, selected together; the button (enabled from two runs) opens a dialog that lists the
// runs' tensors, overlays one line per run that kept them (each a distribution: it sums to 1) at the last sample
// or a chosen step, and names the run without histograms and why.
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <qcustomplot.h>

#include "core/backend/BackendRegistry.h"
#include "core/history/RunStore.h"
#include "core/train/Trainer.h"
#include "tests/support/TestProjects.h"
#include "ui/HistogramCompareDialog.h"
#include "ui/RunsPanel.h"

using namespace strata;
using namespace strata::ui;

namespace {

struct Quiet : TrainingObserver {
    std::string error;
    void onError(const std::string& m) override { error = m; }
};

// Trains the blobs MLP for 12 steps with histograms every 5 (steps 0, 5, 10) into `folder`; records it in `store`.
int64_t trainRun(history::RunStore& store, const QString& folder, double lr) {
    Project p = test::blobsMlpProject("cmp");
    p.training.learningRate = lr;
    p.training.checkpointDir = folder.toStdString();
    auto backend = backendRegistry().create(Device::parse("cpu"), BackendOptions{});
    TrainerOptions opt;
    opt.histogramEvery = 5;
    opt.maxSteps = 12;
    opt.telemetryIntervalMs = 0;
    Quiet q;
    Trainer t(p, *backend, &q, opt);
    if (!t.run()) qWarning("%s", q.error.c_str());
    const int64_t id = store.beginRun(p, "/tmp/cmp.strata", "cpu", "gui", folder.toStdString());
    store.finishRun(id, "finished", "", FinishedEvent{});
    return id;
}

QPushButton* button(RunsPanel& panel, const QString& text) {
    for (QPushButton* b : panel.findChildren<QPushButton*>())
        if (b->text() == text) return b;
    return nullptr;
}

}  // namespace

class TestHistogramCompare : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void comparesSelectedRuns() {
        const std::string db = m_dir.filePath("runs.sqlite").toStdString();
        int64_t a = 0, b = 0, c = 0;
        {
            history::RunStore store(db);
            a = trainRun(store, m_dir.filePath("runA"), 0.05);
            b = trainRun(store, m_dir.filePath("runB"), 0.5);
            c = store.beginRun(test::blobsMlpProject("cmp"), "/tmp/cmp.strata", "cpu", "cli");
            store.finishRun(c, "finished", "", FinishedEvent{});
        }
        RunsPanel panel;
        QVERIFY(panel.setDatabase(QString::fromStdString(db)));
        panel.show();
        QPushButton* compare = button(panel, QStringLiteral("Compare histograms"));
        QVERIFY(compare);
        panel.selectRuns({a});
        QVERIFY(!compare->isEnabled());
        QVERIFY(!panel.compareHistograms());
        panel.selectRuns({a, b, c});
        QVERIFY(compare->isEnabled());
        compare->click();
        auto* dialog = panel.findChild<HistogramCompareDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->isVisible());
        QSignalSpy loaded(dialog, &HistogramCompareDialog::loaded);
        QVERIFY(!dialog->isLoading() || loaded.wait(60000));
        QVERIFY(dialog->tensors().contains(QStringLiteral("dense1.weight")));
        QVERIFY(dialog->tensors().contains(QStringLiteral("dense2.bias")));

        dialog->select(QStringLiteral("dense1.weight"), true);
        const HistogramComparison& cmp = dialog->comparison();
        QCOMPARE(cmp.steps, (std::vector<int64_t>{10, 10, -1}));
        QCOMPARE(dialog->plot()->graphCount(), 2);
        for (int g = 0; g < 2; ++g) {
            double sum = 0;
            for (auto it = dialog->plot()->graph(g)->data()->begin(); it != dialog->plot()->graph(g)->data()->end();
                 ++it)
                sum += it->value;
            QVERIFY(std::abs(sum - 1) < 1e-4);
        }
        // The two learning rates move the weights apart: their gradient histograms differ.
        double diff = 0;
        for (int r = 0; r < cmp.shares.rows; ++r) diff += std::abs(cmp.shares.at(r, 0) - cmp.shares.at(r, 1));
        QVERIFY(diff > 0.01);
        QVERIFY2(dialog->notesText().contains(QStringLiteral("run %1: step 11").arg(a)),
                 qPrintable(dialog->notesText()));
        QVERIFY2(dialog->notesText().contains(QStringLiteral("run %1: no run folder").arg(c)),
                 qPrintable(dialog->notesText()));

        // A chosen step: each run's sample at or before it.
        dialog->select(QStringLiteral("dense1.weight"), false, 7);
        QCOMPARE(dialog->comparison().steps, (std::vector<int64_t>{5, 5, -1}));
        QVERIFY(dialog->plot()->graph(0)->name().contains(QStringLiteral("step 6")));
        if (const QByteArray dir = qgetenv("STRATA_UI_SCREENSHOTS"); !dir.isEmpty())
            dialog->grab().save(QString::fromUtf8(dir) + QStringLiteral("/histogram-compare.png"));
        dialog->close();
    }
};

QTEST_MAIN(TestHistogramCompare)
#include "test_histogram_compare.moc"
