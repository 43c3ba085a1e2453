// gui_latency: how the GUI and the engine get along. Trains a project (by
// default examples/fashion_cnn.strata) on the CPU for the same number of steps
//   1. headless: core::Trainer directly, as strata-train does;
//   2. in the TrainingDashboard (charts live, UI timer appending points),
//      while a 5 ms precise QTimer on the GUI thread records how late it fires.
// Prints the GUI thread's timer lateness (p50, p99, max) during the GUI run and
// the engine's samples/s in both runs and their ratio. Throughput is measured
// on the engine's own step timestamps from the second step to the last, so
// data loading and compilation do not count.
//
//   gui_latency [project.strata] [--steps N] [--repeats R] [--headless-thread]
// Targets: p99 lateness < 50 ms, throughput with the GUI >= 97% of headless.
#include <QApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/OpenMpWaitPolicy.h"
#include "core/backend/BackendRegistry.h"
#include "core/graph/Project.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Trainer.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/EngineWorker.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;

namespace {

struct RunResult {
    double samplesPerSecond = 0;
    int64_t steps = 0;
    bool ok = false;
    std::string error;
};

// Engine-side timestamps of every step.
struct StepClock {
    std::vector<double> elapsed;  // StepEvent::elapsedSeconds, in step order
    int batch = 0;
    double throughput() const {
        if (elapsed.size() < 2) return 0;
        const double seconds = elapsed.back() - elapsed.front();
        return seconds > 0 ? double(elapsed.size() - 1) * batch / seconds : 0;
    }
};

class RecordingObserver : public TrainingObserver {
public:
    StepClock clock;
    std::string error;
    void onStep(const StepEvent& e) override { clock.elapsed.push_back(e.elapsedSeconds); }
    void onError(const std::string& message) override { error = message; }
};

RunResult runHeadless(const Project& project, const std::string& path, int64_t steps) {
    RecordingObserver observer;
    observer.clock.batch = project.training.batchSize;
    RunResult r;
    try {
        std::unique_ptr<Backend> backend = backendRegistry().create(Device::cpu(), backendOptionsFor(project.training));
        TrainerOptions options;
        options.projectPath = path;
        options.maxSteps = steps;
        Trainer trainer(project, *backend, &observer, options);
        r.ok = trainer.run();
    } catch (const std::exception& e) {
        observer.error = e.what();
    }
    r.error = observer.error;
    r.steps = int64_t(observer.clock.elapsed.size());
    r.samplesPerSecond = observer.clock.throughput();
    return r;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size() - 1) + 0.5));
    return v[i];
}

struct GuiResult {
    RunResult run;
    std::vector<double> latenessMs;
};

GuiResult runInDashboard(const Project& project, int64_t steps) {
    GuiResult out;
    ui::ProjectDocument doc;
    doc.newProject(project);
    ui::TrainingDashboard dash(&doc);
    dash.resize(1280, 800);
    dash.show();

    StepClock clock;
    clock.batch = project.training.batchSize;
    QObject::connect(dash.worker(), &ui::EngineWorker::stepReported,
                     [&clock](const StepEvent& e) { clock.elapsed.push_back(e.elapsedSeconds); });
    QString error;
    QObject::connect(dash.worker(), &ui::EngineWorker::errorOccurred, [&error](const QString& m) { error = m; });

    // The probe: a 5 ms timer; lateness is how long after its due time each tick runs.
    QElapsedTimer wall;
    QTimer probe;
    probe.setTimerType(Qt::PreciseTimer);
    probe.setInterval(5);
    qint64 due = 0;
    bool measuring = false;
    QObject::connect(&probe, &QTimer::timeout, [&] {
        const qint64 now = wall.nsecsElapsed();
        if (measuring) out.latenessMs.push_back(std::max<qint64>(0, now - due) / 1e6);
        due = now + 5'000'000;
        // Only while the engine is actually stepping (not while it loads data).
        measuring = dash.pointCount("train_loss") > 0 || !clock.elapsed.empty();
    });

    QEventLoop loop;
    QObject::connect(&dash, &ui::TrainingDashboard::trainingFinished, &loop, &QEventLoop::quit);
    wall.start();
    probe.start();
    dash.startTraining(steps);
    loop.exec();
    probe.stop();

    out.run.ok = error.isEmpty();
    out.run.error = error.toStdString();
    out.run.steps = int64_t(clock.elapsed.size());
    out.run.samplesPerSecond = clock.throughput();
    return out;
}

// The dashboard runs the document's project without a file path, so make the dataset paths absolute.
Project withAbsolutePaths(Project p, const std::string& projectPath) {
    for (std::string* s : {&p.dataset.trainImages, &p.dataset.trainLabels, &p.dataset.validationImages,
                           &p.dataset.validationLabels, &p.dataset.trainPath, &p.dataset.validationPath})
        *s = resolveDatasetPath(projectPath, *s);
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv);  // as strata does; both modes run with it
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ui::registerEngineMetaTypes();

    std::string path = std::string(STRATA_SOURCE_DIR) + "/examples/fashion_cnn.strata";
    int64_t steps = 300;
    int repeats = 2;
    bool headlessOnThread = false;  // --headless-thread: the headless Trainer runs on a std::thread
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--headless-thread"))
            headlessOnThread = true;
        else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = std::max(1, std::atoi(argv[++i]));
        else
            path = argv[i];
    }

    Project project;
    try {
        project = withAbsolutePaths(readProject(path), path);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gui_latency: %s\n", e.what());
        return 1;
    }
    project.training.device = "cpu";
    project.training.checkpointDir.clear();                                  // no checkpoint writes in either run
    project.training.epochs = std::max<int>(project.training.epochs, 1000);  // maxSteps ends both runs

    std::printf("project %s, %lld steps per run, batch %d, %d repeat(s), CPU\n",
                QFileInfo(QString::fromStdString(path)).fileName().toUtf8().constData(), static_cast<long long>(steps),
                project.training.batchSize, repeats);
    std::vector<double> headless, gui, lateness;
    for (int r = 0; r < repeats; ++r) {
        // Alternate so that drift in machine load touches both sides alike.
        RunResult h;
        if (headlessOnThread) {
            std::thread t([&] { h = runHeadless(project, path, steps); });
            t.join();
        } else {
            h = runHeadless(project, path, steps);
        }
        if (!h.ok) {
            std::fprintf(stderr, "headless run failed: %s\n", h.error.c_str());
            return 1;
        }
        const GuiResult g = runInDashboard(project, steps);
        if (!g.run.ok) {
            std::fprintf(stderr, "GUI run failed: %s\n", g.run.error.c_str());
            return 1;
        }
        std::printf(
            "  repeat %d: headless %.1f samples/s (%lld steps), GUI %.1f samples/s (%lld steps), "
            "timer p99 %.2f ms\n",
            r + 1, h.samplesPerSecond, static_cast<long long>(h.steps), g.run.samplesPerSecond,
            static_cast<long long>(g.run.steps), percentile(g.latenessMs, 99));
        headless.push_back(h.samplesPerSecond);
        gui.push_back(g.run.samplesPerSecond);
        lateness.insert(lateness.end(), g.latenessMs.begin(), g.latenessMs.end());
    }
    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return v.empty() ? 0 : s / double(v.size());
    };
    const double p50 = percentile(lateness, 50), p99 = percentile(lateness, 99);
    const double worst = lateness.empty() ? 0 : *std::max_element(lateness.begin(), lateness.end());
    const double ratio = mean(headless) > 0 ? mean(gui) / mean(headless) : 0;
    std::printf(
        "GUI thread 5 ms timer lateness over %zu ticks: p50 %.2f ms, p99 %.2f ms, max %.2f ms "
        "(target p99 < 50)\n",
        lateness.size(), p50, p99, worst);
    std::printf("throughput: headless %.1f samples/s, with GUI %.1f samples/s, ratio %.3f (target >= 0.97)\n",
                mean(headless), mean(gui), ratio);
    const bool pass = p99 < 50.0 && ratio >= 0.97;
    std::printf("%s\n", pass ? "targets met" : "TARGETS MISSED");
    return 0;
}
