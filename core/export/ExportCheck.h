// ExportCheck: writes a model to one of the export formats and checks the
// file: it loads the written file back the way `strata-train predict` does
// (loadModelFile), runs it and the live model on the same validation samples
// on the CPU backend, and reports the largest output difference, the accuracy
// of each and, in words, what was actually run. Used by the GUI's Export
// dialog; no Qt here.
//
// What "runs the file" means per format: GGUF and safetensors files are read
// back tensor by tensor (F16 and Q8_0 dequantized) and compiled from the
// project JSON they carry. Strata has no ONNX runtime of its own: an ONNX file
// is parsed and its initializers and embedded project are rebuilt into a
// Strata model; its operator graph is not executed here (tests/test_export_onnx
// runs it in OpenCV's DNN module). The `method` text says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"

namespace strata {

class Backend;
class Model;
struct DataSplit;

enum class ExportFormat { Onnx, Gguf, Safetensors };

const char* exportFormatName(ExportFormat format);       // "ONNX", "GGUF", "safetensors"
const char* exportFormatExtension(ExportFormat format);  // ".onnx", ".gguf", ".safetensors"
const char* exportPrecisionName(ExportPrecision precision);  // "F32", "F16", "Q8_0"
// ONNX exports are float32; safetensors has no Q8_0 type; GGUF takes all three.
bool exportFormatSupports(ExportFormat format, ExportPrecision precision);

struct ExportRequest {
    ExportFormat format = ExportFormat::Onnx;
    ExportPrecision precision = ExportPrecision::F32;
    int opset = 13;  // ONNX only
};

struct ExportWriteResult {
    ExportSummary summary;  // one line per tensor as stored (ONNX: its initializers, F32), and the file size
    // Under Q8_0: the tensors of rank >= 2 stored as F16 instead, because their innermost dimension is not
    // a multiple of 32 (see Gguf.h), each as "name [shape]".
    std::vector<std::string> q8Fallbacks;
};

// Writes `model` to `path` (temporary file, then rename). Throws std::invalid_argument for a precision the
// format lacks or an opset out of range, and the writers' exceptions (naming the file) otherwise.
ExportWriteResult writeExport(const std::string& path, const ExportModel& model, const ExportRequest& request);

// The model compiled on `backend` with the ExportModel's weights.
std::unique_ptr<Model> compileExportModel(const ExportModel& model, Backend& backend);

struct ExportCheckResult {
    std::string path;
    std::string method;  // what was loaded and run, in words
    int64_t samples = 0;
    int classes = 0;
    double maxAbsDiff = 0;  // largest |live output - file output| over every sample and output
    double maxAbsOutput = 0;  // largest |live output|, the scale maxAbsDiff is measured against
    double liveAccuracy = 0, fileAccuracy = 0;  // 0..1 on those samples
    int64_t samePrediction = 0;  // samples where both predict the same class
};

// Loads `exportedPath` with loadModelFile, compiles it and `live` on the CPU backend and runs both on the first
// `limit` samples of `data` (model inputs normalized with `dataNormalization`, as loadDataset gives them). The
// live model takes them as they are; the file's model gets them turned back into raw values and normalized with
// the normalization the file stores, so a wrong normalization in the file shows up as a difference.
// Throws (naming the file) when the file cannot be loaded or does not fit the data.
ExportCheckResult checkExport(const ExportModel& live, const std::string& exportedPath, const DataSplit& data,
                              const CheckpointNormalization& dataNormalization, int64_t limit = 256);

}  // namespace strata
