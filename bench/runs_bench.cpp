// The run history and Runs view against issue 15's targets (no reference program: absolute targets):
//   1. the database stays consistent when a writer is killed mid-write: a child process records steps in
//      transactions of 256 and is SIGKILLed at random moments; after each kill, SQLite's integrity check
//      passes and every run holds a whole number of transactions;
//   2. the Runs view opens and sorts 1,000 recorded runs in under 1 s;
//   3. overlaying 10 runs of 100,000 step points each keeps the chart's repaint p99 under 50 ms.
// Usage: runs_bench [--kills N]   (QT_QPA_PLATFORM=offscreen for a headless machine)
#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/history/RunStore.h"
#include "qcustomplot.h"
#include "ui/ChartPanel.h"
#include "ui/RunsPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;

namespace {

Project benchProject(const std::string& name, double lr) {
    Project p;
    p.name = name;
    p.graph.addNode("Input", "input", Json{{"shape", {16}}});
    p.training.learningRate = lr;
    return p;
}

void record(history::RunStore& store, const Project& p, int steps, double acc) {
    const int64_t id = store.beginRun(p, "/bench/" + p.name + ".strata", "cpu", "cli");
    std::vector<StepEvent> batch;
    for (int s = 1; s <= steps; ++s) {
        StepEvent e;
        e.step = s;
        e.epoch = 1 + s / 1000;
        e.loss = 2.0 / (1 + 0.001 * s);
        e.accuracy = acc;
        batch.push_back(e);
        if (batch.size() == 4096 || s == steps) {
            store.addSteps(id, batch);
            batch.clear();
        }
    }
    EpochEvent ev;
    ev.epoch = 1;
    ev.hasValidation = true;
    ev.valAccuracy = acc;
    ev.valLoss = 1 - acc;
    store.addEpoch(id, ev);
    FinishedEvent f;
    f.epochsCompleted = 1;
    f.bestEpoch = 1;
    f.bestValAccuracy = acc;
    store.finishRun(id, "finished", "", f);
}

// 1. A writer killed at random: integrity and whole transactions.
void killTest(const std::string& db, int kills) {
    std::mt19937 rng(7);
    int consistent = 0;
    for (int k = 0; k < kills; ++k) {
        const pid_t child = fork();
        if (child == 0) {
            history::RunStore store(db);
            const int64_t id = store.beginRun(benchProject("killed", 0.1), "", "cpu", "cli");
            std::vector<StepEvent> batch(256);
            for (int64_t s = 0;; ++s) {
                for (size_t i = 0; i < batch.size(); ++i) batch[i].step = s * 256 + int64_t(i);
                store.addSteps(id, batch);
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 200));
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        history::RunStore store(db);
        const std::string check = store.integrityCheck();
        bool whole = true;
        for (const history::RunRecord& r : store.runs()) whole = whole && store.metrics(r.id, "step").size() % 256 == 0;
        consistent += check == "ok" && whole ? 1 : 0;
        if (check != "ok" || !whole)
            std::printf("  kill %d: integrity '%s', whole transactions %s\n", k, check.c_str(), whole ? "yes" : "NO");
    }
    std::printf("killed writer: %d/%d kills left the database consistent (integrity ok, whole transactions)\n",
                consistent, kills);
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
    int kills = 20;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::string(argv[i]) == "--kills") kills = std::atoi(argv[i + 1]);
    QTemporaryDir dir;
    killTest(dir.filePath("killed.sqlite").toStdString(), kills);  // before Qt starts threads: fork is safe

    QApplication app(argc, argv);
    const std::string db = dir.filePath("runs.sqlite").toStdString();
    {
        history::RunStore store(db);
        for (int i = 0; i < 990; ++i) record(store, benchProject("other", 0.01), 20, 0.3 + 0.0004 * i);
        for (int i = 0; i < 10; ++i) record(store, benchProject("big", 0.01 * (i + 1)), 100000, 0.5 + 0.01 * i);
    }
    ui::ProjectDocument doc;
    ui::TrainingDashboard dash(&doc);
    dash.resize(1200, 800);
    dash.show();
    std::vector<double> openMs;
    for (int r = 0; r < 5; ++r) {
        ui::RunsPanel panel;
        QElapsedTimer t;
        t.start();
        panel.setDatabase(QString::fromStdString(db));
        panel.table()->sortByColumn(ui::RunsModel::BestValAcc, Qt::DescendingOrder);
        panel.table()->sortByColumn(ui::RunsModel::Project, Qt::AscendingOrder);
        openMs.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    std::printf("Runs view, 1,000 runs: open + two sorts median %.1f ms, max %.1f ms (target < 1000 ms)\n",
                percentile(openMs, 0.5), percentile(openMs, 1.0));

    ui::RunsPanel panel;
    panel.setDashboard(&dash);
    panel.setDatabase(QString::fromStdString(db));
    panel.setFilterText("big");
    QList<qint64> ids;
    for (int r = 0; r < panel.proxy()->rowCount(); ++r) ids << panel.proxy()->index(r, 0).data().toLongLong();
    panel.selectRuns(ids);
    QElapsedTimer t;
    t.start();
    panel.overlaySelected();
    const double overlayMs = double(t.nsecsElapsed()) / 1e6;
    ui::ChartPanel* loss = dash.chart("loss");
    std::vector<double> paint;
    for (int i = 0; i < 60; ++i) {
        QElapsedTimer p;
        p.start();
        loss->plot()->replot(QCustomPlot::rpImmediateRefresh);
        paint.push_back(double(p.nsecsElapsed()) / 1e6);
    }
    std::printf(
        "overlay of %lld runs x 100,000 points: load %.0f ms; loss chart repaint p50 %.1f ms, p99 %.1f ms "
        "(target p99 < 50 ms)\n",
        static_cast<long long>(ids.size()), overlayMs, percentile(paint, 0.5), percentile(paint, 0.99));
    return 0;
}
