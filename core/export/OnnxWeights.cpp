// An ONNX file's float initializers as an --init-from source (see OnnxWeights.h).
#include "core/export/OnnxWeights.h"

#include <cstring>

#include "core/export/Onnx.h"

namespace strata {

WeightSource onnxWeightSource(const std::string& path) {
    const OnnxModelInfo info = readOnnx(path);
    WeightSource source;
    source.file = path;
    source.kind = "ONNX file";
    for (const TensorRecord& t : info.initializers) {
        if (t.name.find('/') != std::string::npos) continue;
        std::vector<float> values(t.data.size() / sizeof(float));
        if (!values.empty()) std::memcpy(values.data(), t.data.data(), values.size() * sizeof(float));
        source.values[t.name] = std::move(values);
        source.shapes[t.name] = t.shape;
    }
    source.noMatchHint =
        (info.producerName == "strata"
             ? std::string("this file was written by Strata for another project")
             : "this file was written by " +
                   (info.producerName.empty() ? std::string("another tool") : "'" + info.producerName + "'")) +
        "; a model from another tool is imported first: strata-train import " + path +
        " -o PROJECT.strata (or File > Import Model...), which makes a project whose nodes are named after its "
        "weights";
    return source;
}

}  // namespace strata
