// The ONNX importer (core/export/OnnxImport.h, `strata-train import`): models exported by PyTorch
// (torch.onnx.export, random weights; tools/make_import_fixtures.py with Debian's python3-torch) imported, then
// exported by `strata-train export` from the project alone, give onnxruntime's outputs of the original file within
// 1e-4 on 100 inputs; every example project exported and imported again gives the same outputs; nodes that cannot
// be mapped are listed with their op and why, and fail the import unless --partial; training starts from the
// imported weights (training.init_from); the layout puts branches side by side.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/CliCommands.h"
#include "core/export/OnnxImport.h"
#include "core/export/OnnxWeights.h"
#include "core/graph/Project.h"
#include "core/io/FormatError.h"
#include "core/train/Trainer.h"
#include "tests/support/OnnxRuntime.h"
#include "tests/support/TestBackends.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

std::vector<float> readFloats(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
}

std::vector<int64_t> readDims(const std::string& path) {
    std::ifstream in(path);
    std::vector<int64_t> dims;
    for (int64_t d; in >> d;) dims.push_back(d);
    return dims;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    return a.size() == b.size() ? worst : INFINITY;
}

struct Run {
    int code = 0;
    std::string out, err;
};
Run run(int (*command)(const std::vector<std::string>&, std::ostream&, std::ostream&),
        const std::vector<std::string>& args) {
    std::ostringstream out, err;
    Run r;
    r.code = command(args, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
}

}  // namespace

class TestOnnxImport : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::string path(const std::string& name) const {
        return m_dir.filePath(QString::fromStdString(name)).toStdString();
    }

    // The fixture models, made once by PyTorch (Debian's /usr/bin/python3; tools/install-deps.sh installs it).
    void makeFixtures(const std::vector<std::string>& names) {
        std::string cmd = "/usr/bin/python3 " STRATA_SOURCE_DIR "/tools/make_import_fixtures.py '" + path("") + "'";
        for (const std::string& n : names) cmd += " " + n;
        cmd += " > '" + path("fixtures.log") + "' 2>&1";
        const int status = std::system(cmd.c_str());
        std::ifstream log(path("fixtures.log"));
        const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
        QVERIFY2(status == 0, ("tools/make_import_fixtures.py failed (python3-torch and python3-torchvision "
                               "from tools/install-deps.sh):\n" +
                               text)
                                  .c_str());
    }

    // Imports `name`.onnx, exports the project alone, and compares both files in onnxruntime on the fixture's
    // inputs.
    void roundTrip(const std::string& name) {
        const std::string onnx = path(name + ".onnx"), project = path(name + ".strata"),
                          exported = path(name + ".strata.onnx");
        const Run imp = run(runImportCommand, {onnx, "-o", project});
        QVERIFY2(imp.code == 0, (imp.out + imp.err).c_str());
        qInfo("%s", imp.out.c_str());
        const Run exp = run(runExportCommand, {project, "--format", "onnx", "-o", exported});
        QVERIFY2(exp.code == 0, (exp.out + exp.err).c_str());
        const std::vector<float> inputs = readFloats(path(name + ".inputs.f32"));
        const std::vector<int64_t> dims = readDims(path(name + ".dims"));
        QCOMPARE(dims.size() > 1 ? dims[0] : 0, int64_t{100});
        test::OnnxRuntimeBatch ort;
        ort.add(onnx, inputs, dims);
        ort.add(exported, inputs, dims);
        const std::string err = ort.run();
        QVERIFY2(err.empty(), err.c_str());
        const double diff = maxAbsDiff(ort.output(0), ort.output(1));
        qInfo("%s: %lld inputs, max abs difference original vs imported-and-exported %.3g", name.c_str(),
              static_cast<long long>(dims[0]), diff);
        QVERIFY2(diff <= 1e-4, (name + ": max abs difference " + std::to_string(diff)).c_str());
        // PyTorch's own outputs agree with onnxruntime's on the original (the fixture is what it says).
        const double torchDiff = maxAbsDiff(readFloats(path(name + ".torch.f32")), ort.output(0));
        QVERIFY2(torchDiff <= 1e-3, (name + ": torch vs onnxruntime " + std::to_string(torchDiff)).c_str());
    }

private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        makeFixtures({"resnet18", "mobilenet_v2", "transformer", "unmapped"});
    }

    void resnet18RoundTrip() {
        roundTrip("resnet18");
        if (QTest::currentTestFailed()) return;
        const Project p = readProject(path("resnet18.strata"));
        int convs = 0, bns = 0, adds = 0;
        for (const Node* n : p.graph.nodes()) {
            convs += n->type == "Conv2D";
            bns += n->type == "BatchNorm";
            adds += n->type == "Add";
        }
        QCOMPARE(convs, 20);
        QCOMPARE(adds, 8);
        // Layout: the downsampling shortcut's convolution sits beside the block's first convolution, not on it.
        const Node* shortcut = p.graph.nodeByName("layer2.0.downsample.0.Conv");
        const Node* main = p.graph.nodeByName("layer2.0.conv1.Conv");
        QVERIFY2(shortcut && main, "torch's node names kept, readable");
        QCOMPARE(shortcut->y, main->y);
        QVERIFY(shortcut->x != main->x);
        QCOMPARE(p.training.initFrom, std::string("resnet18.imported.safetensors"));
        QVERIFY(fs::exists(path("resnet18.imported.safetensors")));
        Q_UNUSED(bns);
    }

    void mobilenetV2RoundTrip() { roundTrip("mobilenet_v2"); }

    // Embedding + 2 nn.TransformerEncoderLayer (GELU, decomposed LayerNorm with Pow) + mean + Linear: PyTorch's
    // attention with its run-time shape arithmetic read as MultiHeadSelfAttention.
    void transformerRoundTrip() {
        roundTrip("transformer");
        if (QTest::currentTestFailed()) return;
        const Project p = readProject(path("transformer.strata"));
        std::map<std::string, int> types;
        for (const Node* n : p.graph.nodes()) ++types[n->type];
        QCOMPARE(types["MultiHeadSelfAttention"], 2);
        QCOMPARE(types["LayerNorm"], 4);
        QCOMPARE(types["GELU"], 2);
        QCOMPARE(types["Embedding"], 1);
        QCOMPARE(types["SequenceMeanPool"], 1);
    }

    // A node no layer maps: listed with its op and why, the import fails and writes nothing; --partial writes
    // the project with the rest.
    void unmappedNodesAreListed() {
        const std::string project = path("unmapped.strata");
        const Run r = run(runImportCommand, {path("unmapped.onnx"), "-o", project});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.find("(CumSum): no Strata layer maps the operator CumSum") != std::string::npos, r.err.c_str());
        QVERIFY2(r.err.find("--partial") != std::string::npos, r.err.c_str());
        QVERIFY(!fs::exists(project));
        const Run partial = run(runImportCommand, {path("unmapped.onnx"), "-o", project, "--partial"});
        QVERIFY2(partial.code == 0, (partial.out + partial.err).c_str());
        QVERIFY2(partial.err.find("CumSum") != std::string::npos, partial.err.c_str());
        const Project p = readProject(project);
        QVERIFY(p.graph.nodeByName("conv.Conv"));
        // The last layer gives the graph output, whose value torch names "output".
        QVERIFY(p.graph.nodeByName("output") && p.graph.nodeByName("output")->type == "Dense");
        // Refuses to overwrite without --force.
        const Run again = run(runImportCommand, {path("unmapped.onnx"), "-o", project, "--partial"});
        QCOMPARE(again.code, 2);
    }

    // Not an ONNX file, and a file that is: errors name the file.
    void badFilesNameTheFile() {
        const std::string junk = path("junk.onnx");
        std::ofstream(junk) << "not a protobuf at all";
        const Run r = run(runImportCommand, {junk, "-o", path("junk.strata")});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.find(junk) != std::string::npos, r.err.c_str());
    }

    // training.init_from: a new run of the imported project starts from the imported weights (without --init-from
    // or --resume), in strata-train and the workbench alike (the Trainer reads it); the path is relative to the
    // project file, whatever the working folder.
    void trainingStartsFromImportedWeights() {
        const std::string onnx = path("mlp.onnx"), project = path("mlp.strata");
        QCOMPARE(run(runExportCommand,
                     {STRATA_SOURCE_DIR "/examples/fashion_mlp.strata", "--untrained", "--format", "onnx", "-o", onnx})
                     .code,
                 0);
        QCOMPARE(run(runImportCommand, {onnx, "-o", project}).code, 0);
        Project p = readProject(project);
        QCOMPARE(p.training.initFrom, std::string("mlp.imported.safetensors"));
        p.training.epochs = 1;
        p.dataset.syntheticSamples = 64;
        struct Logs : TrainingObserver {
            std::vector<std::string> lines, errors;
            void onLog(const std::string& l) override { lines.push_back(l); }
            void onError(const std::string& e) override { errors.push_back(e); }
        } logs;
        auto backend = test::makeReferenceBackend();
        TrainerOptions options;
        options.projectPath = project;
        options.maxSteps = 1;
        options.telemetryIntervalMs = 0;
        Trainer trainer(p, *backend, &logs, options);
        QVERIFY2(trainer.run(), logs.errors.empty() ? "" : logs.errors[0].c_str());
        std::string started;
        for (const std::string& l : logs.lines)
            if (l.rfind("init-from ", 0) == 0) started = l;
        QVERIFY2(started.find("initialized 4 of 4 tensors from " + path("mlp.imported.safetensors") +
                              "; all matched") != std::string::npos,
                 started.c_str());
    }

    // --init-from another tool's ONNX file: its weights are read through the importer, so they carry the node
    // names of the project imported from it and every tensor matches (PyTorch's own initializer names, such as
    // "onnx::Conv_193", match nothing).
    void initFromForeignOnnxMatchesItsImport() {
        const std::string project = path("resnet18.strata");
        if (!QFile::exists(QString::fromStdString(project)))
            QCOMPARE(run(runImportCommand, {path("resnet18.onnx"), "-o", project}).code, 0);
        Project p = readProject(project);
        p.training.initFrom.clear();
        p.training.epochs = 1;
        p.training.batchSize = 2;
        p.dataset.syntheticSamples = 4;
        struct Logs : TrainingObserver {
            std::vector<std::string> lines, errors;
            void onLog(const std::string& l) override { lines.push_back(l); }
            void onError(const std::string& e) override { errors.push_back(e); }
        } logs;
        auto backend = test::makeCpuBackend();
        TrainerOptions options;
        options.projectPath = project;
        options.maxSteps = 1;
        options.telemetryIntervalMs = 0;
        options.initFrom = path("resnet18.onnx");
        options.readModelWeights = onnxWeightSource;
        Trainer trainer(p, *backend, &logs, options);
        QVERIFY2(trainer.run(), logs.errors.empty() ? "" : logs.errors[0].c_str());
        std::string started;
        for (const std::string& l : logs.lines)
            if (l.rfind("init-from ", 0) == 0) started = l;
        QVERIFY2(started.find("; all matched") != std::string::npos, started.c_str());
        QVERIFY2(started.find("initialized 0 of") == std::string::npos, started.c_str());
    }

    // Every example project: exported (untrained weights, normalization included), imported, exported again:
    // the same outputs, and the same layers by name and type.
    void examplesRoundTrip() {
        test::OnnxRuntimeBatch ort;
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(STRATA_SOURCE_DIR "/examples")) {
            if (e.path().extension() != ".strata") continue;
            const std::string stem = e.path().stem().string();
            const std::string first = path("ex_" + stem + ".onnx"), project = path("ex_" + stem + ".strata"),
                              second = path("ex_" + stem + ".again.onnx");
            Run a = run(runExportCommand, {e.path().string(), "--untrained", "--format", "onnx", "-o", first});
            if (a.code != 0) {
                // Its data set is not on this machine (made by a tool under tools/): the same graph over a
                // synthetic data set of its input's shape, without normalization.
                qInfo("%s: %s; exported over a synthetic data set", stem.c_str(), a.err.c_str());
                Project p = readProject(e.path().string());
                p.dataset = DatasetSettings{};
                p.dataset.kind = DatasetKind::Synthetic;
                p.dataset.normalization = NormalizationMode::None;
                for (const Node* in : p.graph.nodes())
                    if (in->type == "Input")
                        p.dataset.syntheticShape = in->params.at("shape").get<std::vector<int64_t>>();
                const std::string copy = path("ex_" + stem + ".synthetic.strata");
                writeProject(p, copy);
                a = run(runExportCommand, {copy, "--untrained", "--format", "onnx", "-o", first});
            }
            QVERIFY2(a.code == 0, (stem + ": " + a.out + a.err).c_str());
            const Run i = run(runImportCommand, {first, "-o", project});
            QVERIFY2(i.code == 0, (stem + ": " + i.out + i.err).c_str());
            const Run b = run(runExportCommand, {project, "--format", "onnx", "-o", second});
            QVERIFY2(b.code == 0, (stem + ": " + b.out + b.err).c_str());
            const Project original = readProject(e.path().string()), imported = readProject(project);
            for (const Node* n : original.graph.nodes()) {
                if (n->type == "Dropout") continue;  // the identity at inference: not in the file
                const Node* m = imported.graph.nodeByName(n->name);
                QVERIFY2(m && m->type == n->type, (stem + ": " + n->name + " not imported as " + n->type).c_str());
            }
            // Integer-valued inputs: valid token ids for the text models, pixel values for the images.
            std::vector<int64_t> dims{100};
            for (const Node* in : original.graph.nodes())
                if (in->type == "Input")
                    for (const Json& d : in->params.at("shape")) dims.push_back(d.get<int64_t>());
            int64_t n = 1;
            for (int64_t d : dims) n *= d;
            std::vector<float> x(static_cast<size_t>(n));
            for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((k * 2654435761u >> 7) % 4);
            ort.add(first, x, dims);
            ort.add(second, x, dims);
            names.push_back(stem);
        }
        QVERIFY2(names.size() >= 3, "fewer than 3 examples could be exported here");
        const std::string err = ort.run();
        QVERIFY2(err.empty(), err.c_str());
        for (size_t k = 0; k < names.size(); ++k) {
            const double diff = maxAbsDiff(ort.output(2 * k), ort.output(2 * k + 1));
            qInfo("example %s: max abs difference %.3g", names[k].c_str(), diff);
            QVERIFY2(diff <= 1e-4, (names[k] + ": " + std::to_string(diff)).c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestOnnxImport)
#include "test_onnx_import.moc"
