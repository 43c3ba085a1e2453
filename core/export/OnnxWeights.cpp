// An ONNX file's float initializers as an --init-from source (see OnnxWeights.h).
#include "core/export/OnnxWeights.h"

#include <cstring>

#include "core/export/Onnx.h"
#include "core/export/OnnxImport.h"
#include "core/train/ProjectFingerprint.h"

namespace strata {

WeightSource onnxWeightSource(const std::string& path) {
    const OnnxModelInfo info = readOnnx(path);
    WeightSource source;
    source.file = path;
    source.kind = "ONNX file";
    if (info.producerName != "strata") {
        // Another tool's file names its initializers its own way ("onnx::Conv_193"); read through the importer,
        // its weights carry the names `strata-train import` gives the nodes of the project it makes, so a
        // project imported from this file (or one with the same node names) matches. Nodes the importer
        // cannot map bring no weights; the layers it could map still do.
        OnnxImportOptions options;
        options.partial = true;
        OnnxImport imported = importOnnxModel(info, path, options);
        source.kind = "ONNX file (read as `strata-train import` reads it)";
        source.shapes = graphParameterShapes(imported.project.graph);
        source.values = std::move(imported.weights);
        source.noMatchHint = "its weights are named after the nodes `strata-train import " + path +
                             " -o PROJECT.strata` makes; train that project (or one with the same node names)";
        return source;
    }
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
