// OnnxRunner: runs the operator graph of an .onnx file in OpenCV's DNN module
// (libopencv-dnn-dev, built in with the CMake option STRATA_OPENCV), a runtime
// we did not write, so the export check and `strata-train predict --runtime
// opencv` test the file itself rather than Strata's reading of its weights.
//
// Strata has no ONNX interpreter of its own: without OpenCV, or when OpenCV
// cannot import or run a graph (OpenCV 4.6 lacks LayerNormalization and Gather
// with runtime indices, for instance), OnnxRunError says so, naming the file
// and quoting OpenCV. Callers decide what to do instead and must say so.
// No OpenCV header here: the OpenCV types stay in OnnxRunner.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/io/NonFinite.h"

namespace strata {

// The file cannot be run: what() names the file and the step (import or forward); reason() is what OpenCV said
// (or that Strata was built without OpenCV), for messages that name the file themselves.
class OnnxRunError : public std::runtime_error {
public:
    OnnxRunError(const std::string& what, std::string reason);
    const std::string& reason() const { return m_reason; }

private:
    std::string m_reason;
};

// True when this build runs ONNX graphs (STRATA_OPENCV found OpenCV's DNN module).
bool onnxRunnerAvailable();
// "OpenCV DNN 4.6.0" (the library's own version string), or "no ONNX runtime" without OpenCV.
std::string onnxRunnerName();

class OnnxRunner {
public:
    // Parses the file (readOnnx: FormatError for a file that is not ONNX, or one with a float initializer holding
    // NaN or inf unless `options` allow it) and imports its graph into OpenCV; throws OnnxRunError when that fails
    // or this build has no OpenCV.
    explicit OnnxRunner(const std::string& path, const WeightLoadOptions& options = {});
    ~OnnxRunner();
    OnnxRunner(const OnnxRunner&) = delete;
    OnnxRunner& operator=(const OnnxRunner&) = delete;

    const std::string& path() const;
    // One sample's input and output dimensions as the file declares them (the batch dimension left out).
    const std::vector<int64_t>& inputDims() const;
    const std::vector<int64_t>& outputDims() const;
    int64_t inputSize() const;  // values per input sample
    // Whether the graph applies the dataset normalization itself, so it takes raw data-file values: the
    // "in_graph" flag of Strata's strata.normalization metadata; true when the file has no such metadata.
    bool normalizationInGraph() const;

    // Runs `count` samples of inputSize() values each (batch-major, float32) in batches of at most
    // `batchSize`; returns count * (values per output sample). Throws OnnxRunError naming the file and
    // the batch when OpenCV fails or its output has an unexpected size.
    std::vector<float> run(const float* inputs, int64_t count, int64_t batchSize = 256);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace strata
