#include "tests/support/OnnxRuntime.h"

#include <QFileInfo>
#include <QProcess>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/support/TestBackends.h"

namespace strata::test {

std::string testPython(std::string* why) {
    const std::string python = STRATA_TEST_PYTHON;
    if (QFileInfo::exists(QString::fromStdString(python))) return python;
    if (why)
        *why = python +
               " is missing: run tools/install-deps.sh test (it makes the tests' venv with onnxruntime, "
               "onnx and gguf from PyPI)";
    return {};
}

std::string runTestPython(const std::vector<std::string>& args, std::string* output) {
    std::string why;
    const std::string python = testPython(&why);
    if (python.empty()) return why;
    QStringList list;
    for (const std::string& a : args) list << QString::fromStdString(a);
    QProcess p;
    p.start(QString::fromStdString(python), list);
    if (!p.waitForFinished(300000)) return "python " + args.front() + " did not finish in 5 minutes";
    const std::string text = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError()).toStdString();
    if (output) *output = text;
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return "python " + args.front() + " (exit " + std::to_string(p.exitCode()) + "): " + text;
    return {};
}

size_t OnnxRuntimeBatch::add(const std::string& model, const std::vector<float>& raw, const std::vector<int64_t>& dims,
                             bool optimized) {
    Run r;
    r.model = model;
    r.optimized = optimized;
    // Numbered, so one file may be queued twice (as written and optimized).
    const std::string stem = model + ".ort" + std::to_string(m_runs.size());
    r.input = stem + "-in.f32";
    r.outputFile = stem + "-out.f32";
    r.dims = dims;
    std::ofstream(r.input, std::ios::binary)
        .write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * sizeof(float)));
    m_runs.push_back(std::move(r));
    return m_runs.size() - 1;
}

std::string OnnxRuntimeBatch::run() {
    if (m_runs.empty()) return {};
    std::string why;
    const std::string python = testPython(&why);
    if (python.empty()) return why;
    const std::string manifest = m_runs.front().model + ".ort-manifest";
    {
        std::ofstream m(manifest);
        for (const Run& r : m_runs) {
            m << (r.optimized ? "@optimized " : "") << r.model << ' ' << r.input << ' ' << r.outputFile;
            for (int64_t d : r.dims) m << ' ' << d;
            m << '\n';
        }
    }
    QProcess p;
    p.start(QString::fromStdString(python),
            {QString::fromStdString(sourcePath("tools/run_onnxruntime.py")), QString::fromStdString(manifest)});
    if (!p.waitForFinished(300000)) return "tools/run_onnxruntime.py did not finish in 5 minutes";
    const std::string output = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError()).toStdString();
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return "onnxruntime (exit " + std::to_string(p.exitCode()) + "): " + output;
    for (Run& r : m_runs) {
        std::ifstream f(r.outputFile, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
        r.output.resize(bytes.size() / sizeof(float));
        std::memcpy(r.output.data(), bytes.data(), r.output.size() * sizeof(float));
        if (r.optimized) {
            std::ifstream ops(r.outputFile + ".ops");
            for (std::string op; std::getline(ops, op);)
                if (!op.empty()) r.ops.push_back(op);
        }
    }
    return {};
}

}  // namespace strata::test
