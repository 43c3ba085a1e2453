// Transfer learning (issue 37): frozen nodes (Node::trainable) keep their weights bit for bit while the others
// learn, the optimizer holds no state for them and backward does none of their gradient work; the flag's place in
// the project file; --init-from an ONNX file, with what did not match listed.
#include <QTemporaryDir>
#include <QTest>
#include <sstream>
#include <string>
#include <vector>

#include "app/Cli.h"
#include "core/backend/CpuBackend.h"
#include "core/export/Onnx.h"
#include "core/export/OnnxWeights.h"
#include "core/graph/Model.h"
#include "core/graph/Project.h"
#include "core/graph/Transfer.h"
#include "core/train/Checkpoint.h"
#include "core/train/Optimizer.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Counts the weight-gradient work of Dense (the dW GEMM, the one with A transposed) and Conv2D (a fused backward
// with a filter gradient), and the convolutions' data gradients.
class GradientWorkCounter : public CpuBackend {
public:
    int weightGemms = 0, filterGradients = 0, dataGradients = 0;
    void doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) override {
        if (transA) ++weightGemms;
        CpuBackend::doGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    void doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                               const ConvDesc& d, bool overwriteDx) override {
        if (dw) ++filterGradients;
        if (dx) ++dataGradients;
        CpuBackend::doConv2dBackwardFused(dx, dw, dbias, dy, x, w, d, overwriteDx);
    }
};

// Input [1, 8, 8] -> conv1 -> bn1 -> ReLU -> conv2 -> ReLU -> Flatten -> head (Dense 3): a backbone and a head.
Project backboneProject() {
    Project p;
    p.name = "backbone";
    test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                             {"Conv2D", "conv1", Json{{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                             {"BatchNorm", "bn1"},
                             {"ReLU", "relu1"},
                             {"Conv2D", "conv2", Json{{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                             {"ReLU", "relu2"},
                             {"Flatten", "flatten"},
                             {"Dense", "head", Json{{"units", 3}}}});
    test::useBlobs(p, 240, 3, {1, 8, 8});
    p.training.batchSize = 24;
    p.training.epochs = 1;
    p.training.seed = 5;
    p.training.threads = 1;
    p.training.learningRate = 0.05;
    return p;
}

void freeze(Project& p, const std::vector<std::string>& names) {
    for (const std::string& n : names) p.graph.setTrainable(p.graph.nodeByName(n)->id, false);
}

// One forward and backward of a batch of 4 (ones), with `counter` counting.
void oneBackward(Model& model) {
    std::vector<float> x(4 * 64, 1.0f);
    const Tensor input = model.backend().fromHost(model.inputShape().withBatch(4), x.data());
    const Tensor& out = model.forward(input, true, 1);
    std::vector<float> g(static_cast<size_t>(out.numel()), 0.1f);
    model.zeroGrad();
    model.backward(model.backend().fromHost(out.shape(), g.data()));
}

// A project's seeded initial weights written as ONNX (Strata's names: "<node>.<param>").
std::string writeModelOnnx(const Project& p, uint64_t seed, const std::string& file) {
    auto backend = test::makeCpuBackend();
    ExportModel m;
    m.project = p;
    m.weights = modelWeights(*compile(p.graph, *backend, seed));
    writeOnnx(file, m);
    return file;
}

struct TrainRun {
    bool ok = false;
    struct {
        std::string log, error;
    } rec;
};

TrainRun train(const Project& p, TrainerOptions o) {
    TrainRun r;
    o.telemetryIntervalMs = 0;
    auto backend = test::makeCpuBackend();
    test::RecordedRun rec;
    Trainer trainer(p, *backend, &rec, o);
    r.ok = trainer.run();
    r.rec.log = rec.log;
    r.rec.error = rec.error;
    return r;
}

}  // namespace

class TestTransfer : public QObject {
    Q_OBJECT

private slots:
    // Training with momentum and weight decay, then with AdamW: every frozen tensor keeps its initial bits, every
    // other learnable one moves, and the optimizer keeps no state for the frozen ones.
    void frozenWeightsStayBitIdentical() {
        for (const OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::AdamW}) {
            QTemporaryDir dir;
            Project p = backboneProject();
            freeze(p, {"conv1", "bn1", "conv2"});
            p.training.optimizer = kind;
            p.training.weightDecay = 0.01;
            p.training.learningRate = kind == OptimizerKind::Sgd ? 0.05 : 0.01;
            p.training.checkpointDir = (dir.path() + "/ck").toStdString();
            auto reference = test::makeCpuBackend();
            const auto initial = modelWeights(*compile(p.graph, *reference, p.training.seed));
            auto backend = test::makeCpuBackend();
            test::RecordedRun rec;
            TrainerOptions o;
            o.telemetryIntervalMs = 0;
            Trainer trainer(p, *backend, &rec, o);
            QVERIFY2(trainer.run(), rec.error.c_str());
            const Checkpoint c = loadCheckpoint(p.training.checkpointDir + "/latest.safetensors");
            // bn1's running statistics too: a frozen BatchNorm normalizes as at inference.
            for (const char* name : {"conv1.weight", "conv1.bias", "bn1.gamma", "bn1.beta", "bn1.running_mean",
                                     "bn1.running_var", "conv2.weight", "conv2.bias"})
                QVERIFY2(c.weights.at(name) == initial.at(name), name);
            for (const char* name : {"head.weight", "head.bias"})
                QVERIFY2(c.weights.at(name) != initial.at(name), name);
            for (const auto& [slot, values] : c.optimizerState) QVERIFY2(!contains(slot, "conv"), slot.c_str());
            QVERIFY(!c.optimizerState.empty());
        }
    }

    // The model: frozen weights are state (no gradient, not packed); the packed block holds the head alone.
    void frozenWeightsAreNotPacked() {
        Project p = backboneProject();
        auto backend = test::makeCpuBackend();
        const auto all = compile(p.graph, *backend, 1);
        freeze(p, {"conv1", "bn1", "conv2"});
        const auto frozen = compile(p.graph, *backend, 1);
        QCOMPARE(frozen->parameterCount(), int64_t(3 * 256 + 3));
        QCOMPARE(frozen->frozenParameterCount(), all->parameterCount() - frozen->parameterCount());
        for (const auto& np : frozen->namedParameters()) {
            const bool backbone = !contains(np.name, "head"), state = contains(np.name, "running_");
            QCOMPARE(np.param->frozen, backbone && !state);  // running statistics were never weights
            QCOMPARE(np.param->grad.defined(), !backbone);
            QCOMPARE(frozen->packedOffset(*np.param) >= 0, !backbone);
        }
        QVERIFY(frozen->packedValues().numel() < all->packedValues().numel());
        // Same seed, same initial values: freezing draws no other numbers.
        QVERIFY(modelWeights(*frozen) == modelWeights(*all));
        Optimizer opt(*frozen, p.training);
        for (const auto& [slot, values] : opt.state()) QVERIFY2(!contains(slot, "conv"), slot.c_str());
    }

    // Backward does no weight-gradient work for a frozen layer; with nothing trainable before it, no input
    // gradient either (the layer's backward is not called at all).
    void frozenLayersSkipGradientWork() {
        Project p = backboneProject();
        GradientWorkCounter counter;
        {
            const auto model = compile(p.graph, counter, 1);
            oneBackward(*model);
            QCOMPARE(counter.filterGradients, 2);
            QCOMPARE(counter.dataGradients, 1);  // conv1's input is the Input: no gradient wanted
            QCOMPARE(counter.weightGemms, 1);    // the head
        }
        const int allLayers = compile(p.graph, counter, 1)->backwardLayerCount();
        {
            // conv2 frozen, conv1 trainable: conv2 still passes the gradient down, but computes no filter gradient.
            Project q = p;
            freeze(q, {"conv2"});
            counter.filterGradients = counter.dataGradients = counter.weightGemms = 0;
            const auto model = compile(q.graph, counter, 1);
            oneBackward(*model);
            QCOMPARE(counter.filterGradients, 1);
            QCOMPARE(counter.dataGradients, 1);
            QCOMPARE(counter.weightGemms, 1);
        }
        {
            // The whole backbone frozen: no convolution backward at all, the head's alone.
            Project q = p;
            freeze(q, {"conv1", "bn1", "conv2"});
            counter.filterGradients = counter.dataGradients = counter.weightGemms = 0;
            const auto model = compile(q.graph, counter, 1);
            oneBackward(*model);
            QCOMPARE(counter.filterGradients, 0);
            QCOMPARE(counter.dataGradients, 0);
            QCOMPARE(counter.weightGemms, 1);
            QCOMPARE(model->backwardLayerCount(), 1);
            QVERIFY(allLayers > 1);
        }
    }

    // The project file: "trainable": false on a frozen node only, read back; a file with nothing frozen is written
    // as before (no key); a wrong type is refused with its JSON pointer.
    void projectFileKeepsTheFlag() {
        Project p = backboneProject();
        const std::string plain = projectToJson(p).dump();
        QVERIFY(!contains(plain, "trainable"));
        freeze(p, {"conv1"});
        const Json j = projectToJson(p);
        QVERIFY(contains(j.dump(), "\"trainable\":false"));
        const Project back = projectFromJson(j);
        QVERIFY(!back.graph.nodeByName("conv1")->trainable);
        QVERIFY(back.graph.nodeByName("conv2")->trainable);
        QVERIFY(back.graph == p.graph);
        Json bad = j;
        for (Json& n : bad["graph"]["nodes"])
            if (n["name"] == "conv1") n["trainable"] = "no";
        try {
            projectFromJson(bad);
            QFAIL("a string for trainable was accepted");
        } catch (const ProjectError& e) {
            QVERIFY2(contains(e.what(), "/graph/nodes/1/trainable") && contains(e.what(), "expected a boolean"),
                     e.what());
        }
        // Every example opens and is written back without the key.
        const Project example = readProject(test::sourcePath("examples/fashion_cnn.strata"));
        QVERIFY(!contains(projectToJson(example).dump(), "trainable"));
    }

    // --init-from an ONNX file Strata wrote: tensors matched by name and shape, the others listed with both shapes
    // in one summary line (and one per line).
    void initFromOnnxListsWhatDoesNotMatch() {
        QTemporaryDir dir;
        const Project four = test::blobsMlpProject("four", 16, 4);
        const std::string file = writeModelOnnx(four, 11, (dir.path() + "/four.onnx").toStdString());
        const auto source = modelWeights(*compile(four.graph, *test::makeCpuBackend(), 11));

        const Project five = test::blobsMlpProject("five", 16, 5);
        auto backend = test::makeCpuBackend();
        auto model = compile(five.graph, *backend, 3);
        const auto initial = modelWeights(*model);
        const WeightSource onnx = onnxWeightSource(file);
        QCOMPARE(onnx.kind, std::string("ONNX file"));
        const InitFromReport r = initFromWeights(*model, onnx);
        QCOMPARE(r.copied, (std::vector<std::string>{"dense1.weight [32, 16]", "dense1.bias [32]"}));
        QCOMPARE(r.skipped, (std::vector<std::string>{"dense2.weight [5, 32]: the ONNX file's is [4, 32]",
                                                      "dense2.bias [5]: the ONNX file's is [4]"}));
        QCOMPARE(r.summary(file), "initialized 2 of 4 tensors from " + file +
                                      "; not matched: dense2.weight [5, 32] (the ONNX file's is [4, 32]), "
                                      "dense2.bias [5] (the ONNX file's is [4])");
        const auto after = modelWeights(*model);
        QVERIFY(after.at("dense1.weight") == source.at("dense1.weight"));
        QVERIFY(after.at("dense1.bias") == source.at("dense1.bias"));
        QVERIFY(after.at("dense2.weight") == initial.at("dense2.weight"));

        // Through the Trainer, as strata-train passes the reader: the summary line and each mismatch in the log.
        TrainerOptions o;
        o.initFrom = file;
        o.maxSteps = 2;
        o.readModelWeights = onnxWeightSource;
        TrainRun run = train(five, o);
        QVERIFY2(run.ok, run.rec.error.c_str());
        QVERIFY2(contains(run.rec.log, "init-from " + file + ": initialized 2 of 4 tensors from " + file +
                                           "; not matched: dense2.weight [5, 32] (the ONNX file's is [4, 32])"),
                 run.rec.log.c_str());
        QVERIFY2(contains(run.rec.log, "  not matched dense2.bias [5]: the ONNX file's is [4]"), run.rec.log.c_str());

        // No reader: refused, saying what is missing, rather than a run from scratch.
        o.readModelWeights = nullptr;
        run = train(five, o);
        QVERIFY(!run.ok);
        QVERIFY2(contains(run.rec.error, "--init-from an ONNX file needs the ONNX reader"), run.rec.error.c_str());

        // Nothing matches (other names): refused, saying how to bring in another tool's model.
        Project other = five;
        other.graph.rename(other.graph.nodeByName("dense1")->id, "hidden");
        other.graph.rename(other.graph.nodeByName("dense2")->id, "out");
        o.readModelWeights = onnxWeightSource;
        run = train(other, o);
        QVERIFY(!run.ok);
        QVERIFY2(contains(run.rec.error, "--init-from copied no tensor") &&
                     contains(run.rec.error, "strata-train import " + file + " -o PROJECT.strata"),
                 run.rec.error.c_str());
        QVERIFY2(contains(run.rec.log, "not used (no parameter of that name) dense1.weight [32, 16]"),
                 run.rec.log.c_str());
    }

    // Replacing the head: the last Dense takes the class count and a new name, so --init-from leaves it at its
    // new initial weights even when the class count is the same; the Trainer does it for the data set's classes.
    void replaceHeadGivesNewWeights() {
        QTemporaryDir dir;
        const Project four = test::blobsMlpProject("four", 16, 4);
        const std::string file = writeModelOnnx(four, 11, (dir.path() + "/four.onnx").toStdString());
        Project p = four;
        freeze(p, {"dense2"});
        const HeadReplacement h = replaceHead(p.graph, 4);
        QCOMPARE(h.summary(), std::string("head dense2 (Dense, 4 units) replaced by dense2_new (4 units): new "
                                          "initial weights"));
        QVERIFY(p.graph.nodeByName("dense2_new")->trainable);
        QCOMPARE(p.graph.nodeByName("dense2_new")->params["units"].get<int>(), 4);
        auto backend = test::makeCpuBackend();
        auto model = compile(p.graph, *backend, 3);
        const InitFromReport r = initFromWeights(*model, onnxWeightSource(file));
        QCOMPARE(r.copied.size(), size_t(2));
        QCOMPARE(r.skipped, (std::vector<std::string>{"dense2_new.weight [4, 32]: not in the ONNX file",
                                                      "dense2_new.bias [4]: not in the ONNX file"}));
        QCOMPARE(r.unused, (std::vector<std::string>{"dense2.bias [4]", "dense2.weight [4, 32]"}));
        // Again: another free name.
        QCOMPARE(replaceHead(p.graph, 3).newName, std::string("dense2_new_new"));
        Graph none;
        none.addNode("Input", "in", Json{{"shape", {4}}});
        QVERIFY_THROWS_EXCEPTION(GraphError, replaceHead(none, 3));

        // The Trainer (strata-train --replace-head): the data set has 3 classes, the project's head 4 units.
        Project three = test::blobsMlpProject("three", 16, 4);
        three.dataset.syntheticClasses = 3;
        TrainerOptions o;
        o.replaceHead = true;
        o.maxSteps = 2;
        o.initFrom = file;
        o.readModelWeights = onnxWeightSource;
        const TrainRun run = train(three, o);
        QVERIFY2(run.ok, run.rec.error.c_str());
        QVERIFY2(contains(run.rec.log, "head dense2 (Dense, 4 units) replaced by dense2_new (3 units)"),
                 run.rec.log.c_str());
        QVERIFY2(contains(run.rec.log, "initialized 2 of 4 tensors"), run.rec.log.c_str());
    }

    // --freeze and --freeze-until: parsed by the command line, applied by name; an unknown name is refused with
    // the nodes that hold weights.
    void freezeFlags() {
        std::ostringstream out, err;
        cli::TrainArgs got;
        const int rc = cli::runCommandLine(
            {"p.strata", "--freeze", "conv1,conv2", "--freeze", "head", "--freeze-until", "relu2", "--replace-head"},
            [&got](const cli::TrainArgs& a) {
                got = a;
                return 0;
            },
            out, err);
        QCOMPARE(rc, 0);
        QCOMPARE(got.freeze, (std::vector<std::string>{"conv1", "conv2", "head"}));
        QCOMPARE(got.freezeUntil, std::string("relu2"));
        QVERIFY(got.replaceHead);

        Project p = backboneProject();
        QCOMPARE(freezeUntil(p.graph, "relu2"), (std::vector<std::string>{"conv1", "bn1", "conv2"}));
        QVERIFY(!p.graph.nodeByName("relu2")->trainable);
        QVERIFY(p.graph.nodeByName("flatten")->trainable);
        QVERIFY(p.graph.nodeByName("head")->trainable);
        Project q = backboneProject();
        try {
            freezeNodes(q.graph, {"conv1", "cnv2"});
            QFAIL("an unknown node was frozen");
        } catch (const GraphError& e) {
            QCOMPARE(std::string(e.what()),
                     std::string("--freeze: no node is named 'cnv2' (nodes with weights: conv1, bn1, conv2, head)"));
        }
        QVERIFY(q.graph.nodeByName("conv1")->trainable);  // nothing changed
    }
};

QTEST_GUILESS_MAIN(TestTransfer)
#include "test_transfer.moc"
