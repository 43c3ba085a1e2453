// The workbench's views of tasks beyond classification (issue 38): the dashboard's TaskMetricsView (a series per
// metric, the image strip's pixels), the Predict dock's TaskPredictView on trained models (regression scatter with
// its diagonal and residual histogram, multi-label table at a threshold, image to image samples), and the task
// templates (valid graphs whose settings fit their task).
#include <QApplication>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <fstream>
#include <random>

#include <qcustomplot.h>

#include "core/graph/Graph.h"
#include "core/graph/Task.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/ChartPanel.h"
#include "ui/TaskMetricsView.h"
#include "ui/TaskPredictView.h"
#include "ui/base/Templates.h"

using namespace strata;
using namespace strata::ui;

namespace {

// Trains `p` with a checkpoint folder in `dir` and returns the best checkpoint's path.
QString trainTo(Project p, const QString& dir) {
    p.training.checkpointDir = dir.toStdString();
    if (const std::string why = test::trainQuietly(p); !why.empty()) throw std::runtime_error(why);
    return dir + "/best.safetensors";
}

void writeText(const QString& path, const std::string& text) {
    std::ofstream f(path.toStdString(), std::ios::binary);
    f << text;
}

Project csvProject(TaskKind task, const QString& csv, int inputs, int outputs) {
    Project p;
    p.name = "task view";
    test::addChain(p.graph, {{"Input", "input", Json{{"shape", {inputs}}}},
                             {"Dense", "dense1", Json{{"units", 16}}},
                             {"ReLU", "relu1"},
                             {"Dense", "dense2", Json{{"units", outputs}}}});
    p.dataset.task = task;
    p.dataset.kind = DatasetKind::Csv;
    p.dataset.trainPath = csv.toStdString();
    p.dataset.validationSplit = 0.25;
    p.dataset.normalization = NormalizationMode::Standardize;
    p.training.loss = task == TaskKind::Regression ? LossKind::Mse : LossKind::BceLogits;
    p.training.optimizer = OptimizerKind::Adam;
    p.training.learningRate = 0.01;
    p.training.batchSize = 32;
    p.training.epochs = 5;
    p.training.threads = 1;
    return p;
}

}  // namespace

class TestTaskViews : public QObject {
    Q_OBJECT
private slots:
    void metricsViewPlotsTheTaskMetrics() {
        TaskMetricsView view;
        view.setTask(TaskKind::Classification);
        QVERIFY(view.isHidden());
        view.setTask(TaskKind::Regression);
        QVERIFY(!view.isHidden());
        EpochEvent e;
        e.valMetrics = {{"mae", 1.5}, {"rmse", 2.0}, {"r2", 0.8}, {"mae[a]", 1}, {"r2[a]", 0.7}, {"r2[b]", 0.9}};
        view.addEpoch(e, 10);
        e.valMetrics = {{"mae", 1.0}, {"rmse", 1.5}, {"r2", 0.9}, {"mae[a]", 1}, {"r2[a]", 0.8}, {"r2[b]", 0.95}};
        view.addEpoch(e, 20);
        QCOMPARE(view.seriesNames(), (QStringList{"mae", "rmse", "r2", "r2[a]", "r2[b]"}));
        QCOMPARE(view.chart()->pointCount("r2"), 2);
        view.setTask(TaskKind::MultiLabel);
        QVERIFY(view.seriesNames().isEmpty());
    }

    // The strip's pixels are the raw values the engine sends: 0 black, 255 white, clamped outside.
    void imageStrip() {
        TaskMetricsView view;
        view.setTask(TaskKind::ImageToImage);
        EpochEvent e;
        e.valMetrics = {{"psnr", 21.5}};
        e.strip.dims = {1, 2, 2};
        e.strip.count = 2;
        e.strip.inputs = {0, 255, 300, -5, 10, 20, 30, 40};
        e.strip.outputs = {1, 2, 3, 4, 5, 6, 7, 8};
        e.strip.targets = {9, 9, 9, 9, 100, 100, 100, 100};
        view.addEpoch(e, 1);
        QCOMPARE(view.stripColumns(), 2);
        const QImage in = view.stripImage(0, 0);
        QCOMPARE(in.size(), QSize(2, 2));
        QCOMPARE(qGray(in.pixel(0, 0)), 0);
        QCOMPARE(qGray(in.pixel(1, 0)), 255);
        QCOMPARE(qGray(in.pixel(0, 1)), 255);  // 300 clamped
        QCOMPARE(qGray(in.pixel(1, 1)), 0);    // -5 clamped
        QCOMPARE(qGray(view.stripImage(2, 1).pixel(0, 0)), 100);
        QCOMPARE(qGray(view.stripImage(1, 0).pixel(1, 1)), 4);
        QCOMPARE(view.seriesNames(), QStringList{"psnr"});
    }

    // A trained regression: the scatter holds every validation sample (actual, predicted) in data units with the
    // diagonal, the residual histogram counts them all, and the metrics name each target.
    void regressionPredictView() {
        QTemporaryDir dir;
        const QString csv = dir.filePath("r.csv");
        std::mt19937 rng(3);
        std::normal_distribution<double> x(0, 1);
        std::string text = "a,b,price\n";
        for (int i = 0; i < 400; ++i) {
            const double a = x(rng), b = x(rng);
            text += std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(1000 + 200 * a - 50 * b) + "\n";
        }
        writeText(csv, text);
        Project p = csvProject(TaskKind::Regression, csv, 2, 1);
        p.dataset.targetColumns = {"price"};
        const QString model = trainTo(p, dir.filePath("ck"));
        TaskPredictView view;
        view.resize(900, 500);
        view.setModel(model, QString());
        view.waitForResult();
        QVERIFY2(view.errorText().isEmpty(), qPrintable(view.errorText()));
        QCOMPARE(view.task(), TaskKind::Regression);
        QVERIFY2(view.metricsText().startsWith("price: MAE"), qPrintable(view.metricsText()));
        QCOMPARE(view.scatterPlot()->graphCount(), 1);
        QCOMPARE(view.scatterPlot()->graph(0)->dataCount(), 100);  // a quarter of 400 held out
        QCOMPARE(view.scatterPlot()->itemCount(), 1);              // the diagonal
        // Predictions are in the data's units: around 1000, not standardized values around 0.
        const double mid = view.scatterPlot()->graph(0)->data()->at(50)->value;
        QVERIFY2(mid > 300 && mid < 1800, std::to_string(mid).c_str());
        auto* bars = qobject_cast<QCPBars*>(view.residualPlot()->plottable(0));
        QVERIFY(bars);
        double total = 0;
        for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) total += it->value;
        QCOMPARE(total, 100.0);
        view.grab().save(dir.filePath("regression.png"));
        if (qEnvironmentVariableIsSet("STRATA_SCREENSHOTS"))
            view.grab().save(qEnvironmentVariable("STRATA_SCREENSHOTS") + "/task_regression.png");
    }

    // A trained multi-label model: one row per label, F1 changing with the threshold, a sample's probabilities.
    void multiLabelPredictView() {
        QTemporaryDir dir;
        const QString csv = dir.filePath("m.csv");
        std::mt19937 rng(5);
        std::normal_distribution<double> x(0, 1);
        std::string text = "a,b,tags\n";
        for (int i = 0; i < 400; ++i) {
            const double a = x(rng), b = x(rng);
            std::string tags;
            if (a > 0) tags += "up";
            if (b > 0) tags += std::string(tags.empty() ? "" : ";") + "right";
            text += std::to_string(a) + "," + std::to_string(b) + "," + tags + "\n";
        }
        writeText(csv, text);
        Project p = csvProject(TaskKind::MultiLabel, csv, 2, 2);
        p.dataset.labelColumn = "tags";
        const QString model = trainTo(p, dir.filePath("ck"));
        TaskPredictView view;
        view.setModel(model, QString());
        view.waitForResult();
        QVERIFY2(view.errorText().isEmpty(), qPrintable(view.errorText()));
        QCOMPARE(view.labelTable()->rowCount(), 2);
        QCOMPARE(view.labelTable()->item(0, 0)->text(), QString("up"));
        QCOMPARE(view.thresholdEdit()->value(), 0.5);
        const QString at05 = view.metricsText();
        QVERIFY2(at05.startsWith("micro F1"), qPrintable(at05));
        view.thresholdEdit()->setValue(0.99);
        QVERIFY(view.metricsText() != at05);
        QVERIFY(view.metricsText().contains("0.99"));
        QCOMPARE(view.sampleTable()->rowCount(), 2);
        const double prob = view.sampleTable()->item(0, 1)->text().toDouble();
        QVERIFY(prob >= 0 && prob <= 1);
    }

    // A real denoising run's epochs in the view: the strip shows four validation images, the target row the clean
    // image the engine trained against, the input row the noisy one.
    void stripFromARun() {
        if (!QFile::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"))
            QSKIP("Fashion-MNIST is not installed");
        Project p = makeTemplate("denoising_autoencoder");
        p.dataset.trainLimit = 256;
        p.dataset.validationLimit = 64;
        p.training.epochs = 2;
        p.training.threads = 2;
        struct Epochs : TrainingObserver {
            std::vector<EpochEvent> events;
            void onEpoch(const EpochEvent& e) override { events.push_back(e); }
        } seen;
        auto backend = test::makeCpuBackend();
        Trainer t(p, *backend, &seen);
        QVERIFY(t.run());
        QCOMPARE(static_cast<int>(seen.events.size()), 2);
        TaskMetricsView view;
        view.resize(900, 260);
        view.setTask(TaskKind::ImageToImage);
        for (const EpochEvent& e : seen.events) view.addEpoch(e, e.epoch);
        QCOMPARE(view.stripColumns(), 4);
        QCOMPARE(view.chart()->pointCount("psnr"), 2);
        const QImage input = view.stripImage(0, 0), target = view.stripImage(2, 0);
        QCOMPARE(target.size(), QSize(28, 28));
        QVERIFY(input != target);  // noise on the input only
        // The target row is the clean validation image: Fashion-MNIST's first test image, pixel for pixel.
        const ImageStrip& strip = seen.events.back().strip;
        QCOMPARE(strip.targets.size(), size_t(4 * 784));
        int same = 0;
        for (int i = 0; i < 784; ++i)
            same += qGray(target.pixel(i % 28, i / 28)) == int(strip.targets[size_t(i)] + 0.5f);
        QCOMPARE(same, 784);
        if (qEnvironmentVariableIsSet("STRATA_SCREENSHOTS")) {
            view.show();
            QTest::qWait(300);  // the layout and the chart's queued repaint
            view.grab().save(qEnvironmentVariable("STRATA_SCREENSHOTS") + "/task_strip.png");
        }
    }

    void taskTemplatesFitTheirTasks() {
        for (const QString& id :
             {QString("tabular_regression"), QString("multi_label_text"), QString("denoising_autoencoder")}) {
            const Project p = makeTemplate(id);
            QVERIFY2(!p.name.empty(), qPrintable(id));
            QVERIFY2(p.dataset.task != TaskKind::Classification, qPrintable(id));
            const std::string problem = taskSettingsProblem(p.dataset, p.training);
            QVERIFY2(problem.empty(), qPrintable(id + ": " + QString::fromStdString(problem)));
            QVERIFY(analyzeGraph(p.graph).ok());
        }
    }

    // The denoising template is an encoder-decoder (it was three stride-1 convolutions, which can learn to copy):
    // stride-2 convolutions down to 7x7, transposed convolutions back to the image's shape; the example file holds
    // the same graph.
    void denoisingTemplateIsAnEncoderDecoder() {
        const Project p = makeTemplate("denoising_autoencoder");
        const GraphAnalysis a = analyzeGraph(p.graph);
        QVERIFY(a.ok());
        int64_t smallest = 28;
        int down = 0, up = 0;
        for (const Node* n : p.graph.nodes()) {
            const Shape* s = a.shapeOf(n->id);
            QVERIFY(s);
            if (s->rank() == 3) smallest = std::min(smallest, (*s)[1]);
            if (n->type == "Conv2D" && n->params.at("stride")[0].get<int>() == 2) ++down;
            if (n->type == "ConvTranspose2D" || n->type == "Upsample2D") ++up;
        }
        QCOMPARE(smallest, int64_t(7));
        QCOMPARE(down, 2);
        QCOMPARE(up, 2);
        const Node* last = p.graph.nodes().back();
        QCOMPARE(*a.shapeOf(last->id), (Shape{1, 28, 28}));
        const Project example = readProject(test::sourcePath("examples/fashion_denoising.strata"));
        QVERIFY(example.graph == p.graph);
    }
};

QTEST_MAIN(TestTaskViews)
#include "test_task_views.moc"
