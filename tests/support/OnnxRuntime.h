// onnxruntime (PyPI, in the venv of tools/setup-test-venv.sh) as an independent runtime for exported ONNX
// files: queue files with their raw inputs, run them all in one Python process, read the outputs back.
// A missing venv is an error naming the command that makes it, never a skip: the test set-up installs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::test {

// The venv's python, or "" with `why` set when it is missing.
std::string testPython(std::string* why);
// Runs the venv's python with `args` (a script under tools/ given by its source path, and its arguments);
// "" on success with its output in `output`, else what failed (a missing venv names the set-up command).
std::string runTestPython(const std::vector<std::string>& args, std::string* output = nullptr);

class OnnxRuntimeBatch {
public:
    // `raw` holds the file's input, batch first, of shape `dims`. Returns the index of the run. Optimized: with
    // every graph optimization on (QDQ fused into integer kernels), the optimized graph's op types in ops(i).
    size_t add(const std::string& model, const std::vector<float>& raw, const std::vector<int64_t>& dims,
               bool optimized = false);
    size_t size() const { return m_runs.size(); }
    // Runs every queued file; "" on success, else what failed (one line per file, or why nothing ran).
    std::string run();
    // The first output of run `i` as float32 (after run()).
    const std::vector<float>& output(size_t i) const { return m_runs[i].output; }
    const std::string& model(size_t i) const { return m_runs[i].model; }
    // Optimized runs: the operator types onnxruntime's optimized graph holds ("QLinearConv", ...).
    const std::vector<std::string>& ops(size_t i) const { return m_runs[i].ops; }

private:
    struct Run {
        std::string model, input, outputFile;
        std::vector<int64_t> dims;
        std::vector<float> output;
        bool optimized = false;
        std::vector<std::string> ops;
    };
    std::vector<Run> m_runs;
};

}  // namespace strata::test
