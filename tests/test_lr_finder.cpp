// The learning-rate finder (core/train/LrFinder, strata-train lr-find): the suggestion on a curve computed by
// hand, the sweep's exponential rates and early stop, the weights it starts from copied and never written (a
// Model's and a checkpoint file's), and the command's table, JSON and refusals.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>
#include <sstream>

#include "app/CliCommands.h"
#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/LrFinder.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

std::unique_ptr<Backend> cpu() {
    BackendOptions one;
    one.threads = 1;
    return backendRegistry().create(Device::parse("cpu"), one);
}

// Every parameter set to zero: the logits are then all zero and the first loss is exactly ln(classes).
void zeroWeights(Model& model) {
    std::map<std::string, std::vector<float>> w = modelWeights(model);
    for (auto& [name, v] : w) std::fill(v.begin(), v.end(), 0.0f);
    applyWeights(model, w);
}

}  // namespace

class TestLrFinder : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    // loss(x), x = log10(rate) on a grid of 201 points from 1e-6 to 1e2 (0.04 apart): 1 - tanh(2(x + 3)), plus
    // 10 (x + 1)^2 above x = -1. Below -1 its slope -2 sech^2(2(x + 3)) is steepest at x = -3; the quadratic
    // turns it up just past -1 (the slope there is -2 sech^2(4) = -0.0027, zero at x = -0.99987), so the
    // grid's minimum is the point at -1: the suggestions are 1e-3 (steepest) and 1e-1 / 10 = 1e-2.
    void suggestionOnAHandComputedCurve() {
        std::vector<LrFindPoint> pts;
        for (int i = 0; i <= 200; ++i) {
            const double x = -6 + 0.04 * i;
            const double loss = 1 - std::tanh(2 * (x + 3)) + (x > -1 ? 10 * (x + 1) * (x + 1) : 0.0);
            pts.push_back({std::pow(10.0, x), loss, loss});
        }
        const LrSuggestion s = suggestLearningRate(pts);
        QCOMPARE(s.steepestIndex, 75);
        QCOMPARE(s.minimumIndex, 125);
        QVERIFY(std::abs(s.steepest / 1e-3 - 1) < 1e-9);
        QVERIFY(std::abs(s.minOver10 / 1e-2 - 1) < 1e-9);
        // Past the minimum the loss rises steeply and falls again nowhere: a curve that only rises has no
        // steepest descent.
        std::vector<LrFindPoint> rising;
        for (int i = 0; i < 10; ++i) rising.push_back({std::pow(10.0, i - 5), double(i), double(i)});
        QVERIFY(std::isnan(suggestLearningRate(rising).steepest));
        QVERIFY(std::isnan(suggestLearningRate({{1e-3, 1, 1}, {1e-2, 0.5, 0.5}}).steepest));
    }

    // The sweep trains a copy: the model it starts from keeps every weight, and the copy is what the sweep
    // starts from (zero weights give a first loss of exactly ln 4).
    void sweepLeavesTheWeightsUntouched() {
        const Project project = test::blobsMlpProject("lr", 16, 4);
        auto backend = cpu();
        std::unique_ptr<Model> source = compile(project.graph, *backend, project.training.seed);
        zeroWeights(*source);
        const auto before = modelWeights(*source);
        LrFindOptions o;
        o.steps = 80;
        o.startFrom = source.get();
        const LrFindResult r = findLearningRate(project, "", *backend, o);
        QVERIFY(!r.points.empty());
        QVERIFY2(std::abs(r.points[0].loss - std::log(4.0)) < 1e-5, std::to_string(r.points[0].loss).c_str());
        QVERIFY(modelWeights(*source) == before);
        // And the sweep did train its copy: the loss moved.
        double far = 0;
        for (const LrFindPoint& p : r.points) far = std::max(far, std::abs(p.loss - r.points[0].loss));
        QVERIFY(far > 0.05);
    }

    // Rates grow by the same factor every step from start to end; on blobs with SGD the loss falls, then blows
    // up well before a rate of 1000, and the sweep stops there; the suggestion lies inside the swept range.
    void sweepIsExponentialAndStopsOnDivergence() {
        const Project project = test::blobsMlpProject("lr", 16, 4);
        auto backend = cpu();
        LrFindOptions o;
        o.steps = 120;
        o.minLearningRate = 1e-4;
        o.maxLearningRate = 1e3;
        const LrFindResult r = findLearningRate(project, "", *backend, o);
        QVERIFY2(r.stoppedEarly, "the sweep to 1000 should diverge");
        QVERIFY(r.points.size() < 120 && r.points.size() > 20);
        QVERIFY(std::abs(r.points[0].learningRate - 1e-4) < 1e-12);
        const double ratio = std::pow(1e7, 1.0 / 119);
        for (size_t i = 1; i < r.points.size(); ++i)
            QVERIFY(std::abs(r.points[i].learningRate / r.points[i - 1].learningRate / ratio - 1) < 1e-9);
        QVERIFY(std::isfinite(r.suggestion.steepest));
        QVERIFY(r.suggestion.steepest > 1e-4 && r.suggestion.steepest < r.points.back().learningRate);
        QVERIFY(r.suggestion.minOver10 < r.suggestion.minimum);
        // The smoothed loss at the steepest point is below the start: it is a descent.
        QVERIFY(r.points[r.suggestion.steepestIndex].smoothedLoss < r.points[0].smoothedLoss);
        // Cancelling through the progress callback keeps the points so far.
        o.progress = [](int step, double, double) { return step < 9; };
        const LrFindResult c = findLearningRate(project, "", *backend, o);
        QCOMPARE(int(c.points.size()), 10);
        QVERIFY(c.stoppedEarly);
        LrFindOptions backwards;
        backwards.minLearningRate = 1;
        backwards.maxLearningRate = 0.1;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, findLearningRate(project, "", *backend, backwards));
    }

    // strata-train lr-find: the table and its suggestion, the JSON, a checkpoint given with --init-from read and
    // left as it was (byte for byte), and the refusals.
    void commandPrintsTheCurve() {
        Project project = test::blobsMlpProject("lr", 16, 4);
        const std::string path = m_dir.filePath("lr.strata").toStdString();
        writeProject(project, path);
        auto backend = cpu();
        std::unique_ptr<Model> model = compile(project.graph, *backend, project.training.seed);
        zeroWeights(*model);
        Checkpoint c;
        c.project = project;
        c.weights = modelWeights(*model);
        const std::string ckpt = m_dir.filePath("zero.safetensors").toStdString();
        saveCheckpoint(c, ckpt);
        QFile f(QString::fromStdString(ckpt));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray bytes = f.readAll();
        f.close();

        std::ostringstream out, err;
        const std::string json = m_dir.filePath("lr.json").toStdString();
        const int rc = runLrFindCommand(
            {path, "--steps", "60", "--start", "1e-4", "--end", "100", "--init-from", ckpt, "--json", json}, out, err);
        QVERIFY2(rc == 0, err.str().c_str());
        QVERIFY2(out.str().find("suggested learning rate") != std::string::npos, out.str().c_str());
        QVERIFY(out.str().find("<- steepest descent") != std::string::npos);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll() == bytes);
        std::ifstream in(json);
        const Json j = Json::parse(in);
        QVERIFY(j["points"].size() >= 3);
        QVERIFY(std::abs(j["points"][0]["loss"].get<double>() - std::log(4.0)) < 1e-5);
        QVERIFY(j["suggestion"]["steepest"].is_number());

        QCOMPARE(runLrFindCommand({path, "--start", "1", "--end", "0.5"}, out, err), 2);
        QCOMPARE(runLrFindCommand({path, "--start", "0"}, out, err), 2);
        QCOMPARE(runLrFindCommand({path, "--steps", "2"}, out, err), 2);
        QCOMPARE(runLrFindCommand({"no-such.strata"}, out, err), 1);
    }
};

QTEST_MAIN(TestLrFinder)
#include "test_lr_finder.moc"
