// ONNX files are validated whole before any runtime reads them (issue 18): a file whose initializer carries
// two data fields, too little data, a negative dimension, an undefined node input, a cycle or an unknown
// operator is refused by readOnnx with a FormatError naming the file and the initializer or node, and
// `predict` exits non-zero with that message instead of falling back to Strata's runtime.
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "app/CliCommands.h"
#include "core/export/ExportModel.h"
#include "core/export/Onnx.h"
#include "tests/support/TestFiles.h"
#include "tests/support/TestProjects.h"

using namespace strata;

class TestOnnxValidation : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string m_good;

    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }

    onnx::ModelProto load() const {
        std::ifstream in(m_good, std::ios::binary);
        onnx::ModelProto proto;
        if (!proto.ParseFromIstream(&in)) qFatal("cannot parse the exported file");
        return proto;
    }
    std::string save(const onnx::ModelProto& proto, const std::string& name) const {
        const std::string file = path(name);
        std::ofstream out(file, std::ios::binary);
        proto.SerializeToOstream(&out);
        return file;
    }
    static onnx::TensorProto* initializer(onnx::ModelProto& p, const std::string& name) {
        for (auto& t : *p.mutable_graph()->mutable_initializer())
            if (t.name() == name) return &t;
        qFatal("no initializer %s", name.c_str());
    }
    static onnx::NodeProto* nodeOfType(onnx::ModelProto& p, const std::string& op, int which = 0) {
        for (auto& n : *p.mutable_graph()->mutable_node())
            if (n.op_type() == op && which-- == 0) return &n;
        qFatal("no node of type %s", op.c_str());
    }

    // readOnnx refuses the mutated file naming `needle`, and so does `predict` (non-zero exit, same message).
    void expectRefused(const std::function<void(onnx::ModelProto&)>& mutate, const std::string& name,
                       const std::string& needle) {
        onnx::ModelProto p = load();
        mutate(p);
        const std::string file = save(p, name);
        test::expectFormatError([&] { readOnnx(file); }, file, needle);
        std::ostringstream out, err;
        const int rc = runPredictCommand({file, path("rows.csv")}, out, err);
        QVERIFY2(rc != 0, ("predict ran " + name + ": " + out.str()).c_str());
        QVERIFY2(err.str().find(needle) != std::string::npos, (err.str() + " lacks " + needle).c_str());
    }

private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        const Project project = test::blobsMlpProject("onnxcheck", 16, 4);
        m_good = path("good.onnx");
        writeOnnx(m_good, untrainedExportModel(project, path("p.strata")));
        std::ofstream csv(path("rows.csv"));
        for (int i = 0; i < 16; ++i) csv << (i ? "," : "") << "f" << i;
        csv << "\n";
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < 16; ++i) csv << 0.1 * (i + r) << (i == 15 ? "\n" : ",");
    }

    void theGoodFileReadsAndPredicts() {
        const OnnxModelInfo info = readOnnx(m_good);
        QVERIFY(info.initializer("dense1.weight") != nullptr);
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({m_good, path("rows.csv")}, out, err) == 0, err.str().c_str());
        QVERIFY2(out.str().find("sample 1:") != std::string::npos, out.str().c_str());
    }

    // The crash of the report: raw_data plus a one-element float_data; OpenCV copied the full size out of
    // float_data.
    void twoDataFields() {
        expectRefused([](onnx::ModelProto& p) { initializer(p, "dense1.weight")->add_float_data(1.f); }, "two.onnx",
                      "initializer 'dense1.weight': carries 2 data fields; exactly one is allowed");
    }

    void shortData() {
        expectRefused(
            [](onnx::ModelProto& p) {
                onnx::TensorProto* t = initializer(p, "dense1.bias");
                t->clear_raw_data();
                t->add_float_data(1.f);
            },
            "short.onnx", "initializer 'dense1.bias': 1 values for dims of 32 elements");
        expectRefused(
            [](onnx::ModelProto& p) {
                onnx::TensorProto* t = initializer(p, "dense1.bias");
                t->set_raw_data(t->raw_data().substr(4));
            },
            "shortraw.onnx", "initializer 'dense1.bias': 124 raw bytes for 32 elements of 4 bytes");
        expectRefused([](onnx::ModelProto& p) { initializer(p, "dense1.bias")->clear_raw_data(); }, "nodata.onnx",
                      "(no data field)");
    }

    void badDims() {
        expectRefused(
            [](onnx::ModelProto& p) {
                onnx::TensorProto* t = initializer(p, "dense1.bias");
                t->clear_dims();
                t->add_dims(-4);
                t->add_dims(-8);
            },
            "negative.onnx", "initializer 'dense1.bias': negative dimension -4");
        expectRefused(
            [](onnx::ModelProto& p) {
                onnx::TensorProto* t = initializer(p, "dense1.bias");
                t->clear_dims();
                for (int i = 0; i < 4; ++i) t->add_dims(65536);
            },
            "overflow.onnx", "initializer 'dense1.bias': the dimensions multiply past 2^63 elements");
        expectRefused(
            [](onnx::ModelProto& p) {
                p.mutable_graph()
                    ->mutable_input(0)
                    ->mutable_type()
                    ->mutable_tensor_type()
                    ->mutable_shape()
                    ->mutable_dim(1)
                    ->set_dim_value(-16);
            },
            "negativeinput.onnx", "has negative dimension -16");
    }

    void graphStructure() {
        expectRefused([](onnx::ModelProto& p) { nodeOfType(p, "Relu")->set_input(0, "nowhere"); }, "missing.onnx",
                      "(Relu): input 'nowhere' is not defined");
        // Relu reads the last Gemm's output: Gemm2 <- Relu <- Gemm2.
        expectRefused(
            [](onnx::ModelProto& p) {
                const std::string last = nodeOfType(p, "Gemm", 1)->output(0);
                nodeOfType(p, "Relu")->set_input(0, last);
            },
            "cycle.onnx", "the graph has a cycle");
        expectRefused([](onnx::ModelProto& p) { nodeOfType(p, "Relu")->set_op_type("NoSuchOp"); }, "unknown.onnx",
                      "fails onnx::checker");
    }

    void notARegularFile() {
        const std::string dir = path("folder.onnx");
        std::filesystem::create_directories(dir);
        test::expectFormatError([&] { readOnnx(dir); }, dir, "is a directory");
    }
};

QTEST_GUILESS_MAIN(TestOnnxValidation)
#include "test_onnx_validation.moc"
