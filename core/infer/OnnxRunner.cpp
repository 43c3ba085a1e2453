#include "core/infer/OnnxRunner.h"

#include <algorithm>
#include <cstring>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/export/Onnx.h"
#include "core/io/JsonInput.h"
#include "core/io/Safetensors.h"
#include "core/tensor/Shape.h"

#ifdef STRATA_HAVE_OPENCV_DNN
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/dnn.hpp>
#endif

namespace strata {

namespace {

#ifdef STRATA_HAVE_OPENCV_DNN
// OpenCV's messages can span lines and end in a newline; one line reads better inside ours.
std::string oneLine(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    std::string out;
    for (char c : text)
        if (!(c == ' ' && (out.empty() || out.back() == ' '))) out += c;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

std::string reasonOf(const cv::Exception& e) {
    // e.msg is OpenCV's message; the ONNX importer nests the failing step's full what() in it ("OpenCV(4.6.0)
    // <source>:<line>: error: (<code>) in function '<f>' > <message>"): those build paths, codes and function
    // names say nothing about the file, so only the messages stay.
    static const std::regex kFrame(R"(OpenCV\([^)]*\) \S+:\d+: error: \(-?\d+:[^)]*\)( in function '[^']*')?( >)? ?)");
    static const std::regex kFunction(R"( in function '[^']*')");
    std::string msg = oneLine(e.msg.empty() ? e.what() : e.msg);
    msg = std::regex_replace(msg, kFrame, "");
    msg = oneLine(std::regex_replace(msg, kFunction, ""));
    while (!msg.empty() && (msg.back() == '>' || msg.back() == ' ')) msg.pop_back();
    return msg.empty() ? oneLine(e.what()) : msg;
}

// OpenCV logs the same failures it throws to stderr; they reach the caller in our exception instead.
class QuietOpenCv {
public:
    QuietOpenCv() : m_old(cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT)) {}
    ~QuietOpenCv() { cv::utils::logging::setLogLevel(m_old); }
    QuietOpenCv(const QuietOpenCv&) = delete;
    QuietOpenCv& operator=(const QuietOpenCv&) = delete;

private:
    cv::utils::logging::LogLevel m_old;
};
#endif

int64_t product(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

}  // namespace

OnnxRunError::OnnxRunError(const std::string& what, std::string reason)
    : std::runtime_error(what), m_reason(std::move(reason)) {}

bool onnxRunnerAvailable() {
#ifdef STRATA_HAVE_OPENCV_DNN
    return true;
#else
    return false;
#endif
}

std::string onnxRunnerName() {
#ifdef STRATA_HAVE_OPENCV_DNN
    return "OpenCV DNN " + cv::getVersionString();
#else
    return "no ONNX runtime";
#endif
}

struct OnnxRunner::Impl {
    std::string path;
    std::string inputName, outputName;
    std::vector<int64_t> inputDims, outputDims;
    bool normalizationInGraph = true;
#ifdef STRATA_HAVE_OPENCV_DNN
    cv::dnn::Net net;
#endif
};

OnnxRunner::OnnxRunner(const std::string& path, const WeightLoadOptions& options) : m_impl(std::make_unique<Impl>()) {
    Impl& d = *m_impl;
    d.path = path;
#ifndef STRATA_HAVE_OPENCV_DNN
    (void)options;  // nothing is run: the callers' fallback (loadModelFile) checks the weights
    const std::string reason =
        "Strata was built without OpenCV's DNN module (CMake option STRATA_OPENCV, package libopencv-dnn-dev)";
    throw OnnxRunError(path + ": cannot run the ONNX graph: " + reason, reason);
#else
    const OnnxModelInfo info = readOnnx(path);
    // Every float initializer the graph computes with, constants included: OpenCV would run NaN through.
    for (const TensorRecord& t : info.initializers)
        if (std::string problem = nonFiniteProblem(t.name, recordToFloats(t), options); !problem.empty())
            throw FormatError(path, problem);
    d.inputName = info.inputName;
    d.outputName = info.outputName;
    auto perSample = [&](const std::vector<int64_t>& dims, const char* what) {
        if (dims.empty())
            throw OnnxRunError(path + ": the graph " + what + " has no batch dimension",
                               std::string("the graph ") + what + " has no batch dimension");
        std::vector<int64_t> rest(dims.begin() + 1, dims.end());
        int64_t n = 1;
        for (int64_t v : rest)
            if (v > 0 && (__builtin_mul_overflow(n, v, &n) || n > kMaxSampleElements))
                throw FormatError(path, std::string("the graph ") + what + " holds more than " +
                                            std::to_string(kMaxSampleElements) + " values per sample");
        for (int64_t v : rest)
            if (v <= 0) {
                const std::string reason = std::string("the graph ") + what + " '" +
                                           (what[0] == 'i' ? info.inputName : info.outputName) +
                                           "' has a symbolic dimension besides the batch";
                throw OnnxRunError(path + ": " + reason, reason);
            }
        return rest;
    };
    d.inputDims = perSample(info.inputDims, "input");
    d.outputDims = perSample(info.outputDims, "output");
    if (auto it = info.metadata.find("strata.normalization"); it != info.metadata.end()) {
        const nlohmann::json j = tryParseJson<nlohmann::json>(it->second);
        if (j.is_object() && j.contains("in_graph") && j["in_graph"].is_boolean())
            d.normalizationInGraph = j["in_graph"].get<bool>();
    }
    const QuietOpenCv quiet;
    try {
        d.net = cv::dnn::readNetFromONNX(path);
    } catch (const cv::Exception& e) {
        throw OnnxRunError(path + ": " + onnxRunnerName() + " cannot import the graph: " + reasonOf(e), reasonOf(e));
    } catch (const std::exception& e) {
        throw OnnxRunError(path + ": " + onnxRunnerName() + " cannot import the graph: " + oneLine(e.what()),
                           oneLine(e.what()));
    }
    if (d.net.empty())
        throw OnnxRunError(path + ": " + onnxRunnerName() + " imported an empty network", "an empty network");
    d.net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    d.net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
#endif
}

OnnxRunner::~OnnxRunner() = default;

const std::string& OnnxRunner::path() const { return m_impl->path; }
const std::vector<int64_t>& OnnxRunner::inputDims() const { return m_impl->inputDims; }
const std::vector<int64_t>& OnnxRunner::outputDims() const { return m_impl->outputDims; }
int64_t OnnxRunner::inputSize() const { return product(m_impl->inputDims); }
bool OnnxRunner::normalizationInGraph() const { return m_impl->normalizationInGraph; }

std::vector<float> OnnxRunner::run(const float* inputs, int64_t count, int64_t batchSize) {
    if (count < 0 || batchSize < 1) throw std::invalid_argument("OnnxRunner::run: bad sample count or batch size");
    Impl& d = *m_impl;
    const int64_t inSize = inputSize(), outSize = product(d.outputDims);
    int64_t total = 0;
    if (__builtin_mul_overflow(count, outSize, &total))
        throw std::invalid_argument("OnnxRunner::run: " + std::to_string(count) + " samples of " +
                                    std::to_string(outSize) + " outputs overflow");
    std::vector<float> out(static_cast<size_t>(total));
#ifdef STRATA_HAVE_OPENCV_DNN
    const QuietOpenCv quiet;
    for (int64_t first = 0; first < count; first += batchSize) {
        const int64_t n = std::min(batchSize, count - first);
        const std::string where = d.path + ": samples " + std::to_string(first) + ".." + std::to_string(first + n - 1);
        std::vector<int> dims{static_cast<int>(n)};
        for (int64_t v : d.inputDims) dims.push_back(static_cast<int>(v));
        // A copy: OpenCV keeps the blob, and the caller's buffer is const.
        cv::Mat blob(static_cast<int>(dims.size()), dims.data(), CV_32F);
        std::memcpy(blob.ptr<float>(), inputs + first * inSize, static_cast<size_t>(n * inSize) * sizeof(float));
        cv::Mat y;
        try {
            d.net.setInput(blob, d.inputName);
            y = d.net.forward(d.outputName);
        } catch (const cv::Exception& e) {
            throw OnnxRunError(where + ": " + onnxRunnerName() + " failed to run the graph: " + reasonOf(e),
                               reasonOf(e));
        } catch (const std::exception& e) {
            throw OnnxRunError(where + ": " + onnxRunnerName() + " failed to run the graph: " + oneLine(e.what()),
                               oneLine(e.what()));
        }
        if (y.type() != CV_32F || static_cast<int64_t>(y.total()) != n * outSize) {
            std::string shape;
            for (int i = 0; i < y.dims; ++i) shape += (i ? ", " : "") + std::to_string(y.size[i]);
            const std::string reason = "its output '" + d.outputName + "' is [" + shape + "]" +
                                       (y.type() != CV_32F ? " (not float32)" : "") + ", expected " +
                                       std::to_string(n) + " x " + std::to_string(outSize) + " values";
            throw OnnxRunError(where + ": " + onnxRunnerName() + ": " + reason, reason);
        }
        if (!y.isContinuous()) y = y.clone();
        std::memcpy(out.data() + first * outSize, y.ptr<float>(), static_cast<size_t>(n * outSize) * sizeof(float));
    }
#else
    (void)inputs;
    (void)inSize;
#endif
    return out;
}

}  // namespace strata
