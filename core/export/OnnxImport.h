// OnnxImport: an ONNX model written elsewhere (torch.onnx.export, opsets 13 to 21) or by Strata, as a Strata
// project: its nodes read as layers through the one mapping table (onnxLayerTable, OnnxLayers.cpp), its weights
// kept, the graph laid out on the canvas by depth. What cannot be mapped is listed node by node with the op and
// why; nothing is dropped silently.
//
// Foreign exporters write forms Strata's writers do not, and the importer rewrites them before the table reads
// the graph, saying so in `absorbed`: Constant nodes (read as initializers by readOnnx), Identity (passes its
// input on), Gemm with transB 0 or alpha/beta other than 1 (the weight transposed or scaled), MatMul by a
// [in, out] weight (as Strata's Transpose + MatMul of an [out, in] one), Add with the constant first, and
// Dropout (the identity at inference; kept as a Dropout layer).
//
// writeImportedProject writes the project and, beside it, a checkpoint of the imported weights
// ("<stem>.imported.safetensors", core/train/Checkpoint.h) that the project's training.init_from names, so that
// the project trains from them and `strata-train export` exports them before any training.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/data/Normalization.h"
#include "core/export/Onnx.h"
#include "core/graph/Project.h"

namespace strata {

// The opsets the importer reads (the exporter writes 13 to 17).
constexpr int kOnnxImportMinOpset = 13;
constexpr int kOnnxImportMaxOpset = 21;

// One ONNX node the importer could not map.
struct OnnxImportIssue {
    std::string node;  // the node's name ("#12" when it has none)
    std::string op;    // its operator
    std::string why;   // what is wrong, and what to do about it
    std::string text() const { return "node '" + node + "' (" + op + "): " + why; }
};

struct OnnxImportOptions {
    // false: any node that cannot be mapped fails the import (OnnxImportError). true: the project is built from
    // what could be mapped; the layers that read an unmapped node's output are left unconnected for the user
    // to fix in the editor.
    bool partial = false;
    // Called on the importing thread as the work advances: a fraction 0..1 and what is being done.
    std::function<void(double, const std::string&)> progress;
};

struct OnnxImport {
    Project project;
    std::map<std::string, std::vector<float>> weights;  // "<node>.<param>", as Strata lays them out
    std::vector<OnnxImportIssue> unmapped;              // in file order
    std::vector<std::string> absorbed;                  // what the rewrites folded away, one line each
    Normalization normalization;                        // "none", unless a Strata file's input carries one
    int onnxNodes = 0;                                  // nodes in the file (Constant nodes included)
};

// Thrown when nodes cannot be mapped (and OnnxImportOptions::partial is false): every one is listed.
class OnnxImportError : public std::runtime_error {
public:
    OnnxImportError(const std::string& what, std::vector<OnnxImportIssue> issues)
        : std::runtime_error(what), m_issues(std::move(issues)) {}
    const std::vector<OnnxImportIssue>& issues() const { return m_issues; }

private:
    std::vector<OnnxImportIssue> m_issues;
};

// Imports a model read by readOnnx (`source` names the file in messages). Throws OnnxImportError (unmapped
// nodes), FormatError (a graph over the limits of InputLimits.h, or without a fixed per-sample input shape).
OnnxImport importOnnxModel(const OnnxModelInfo& info, const std::string& source, const OnnxImportOptions& options = {});
// readOnnx (checked) then importOnnxModel.
OnnxImport importOnnxFile(const std::string& path, const OnnxImportOptions& options = {});

// The checkpoint file the import writes beside a project file: "<dir>/<stem>.imported.safetensors".
std::string importedWeightsPath(const std::string& projectPath);
// Writes the imported weights as a checkpoint (epoch 0) beside the project, sets training.init_from to it
// (relative to the project's folder) and writes the project. Both written atomically; the weights first.
void writeImportedProject(OnnxImport& imported, const std::string& projectPath);

}  // namespace strata
