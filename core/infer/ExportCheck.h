// ExportCheck: writes a model to one of the export formats and checks the
// file: it loads the written file back the way `strata-train predict` does
// (loadModelFile), runs it and the live model on the same validation samples
// on the CPU backend, and reports the largest output difference, the accuracy
// of each and, in words, what was actually run. Used by the GUI's Export
// dialog; no Qt here.
//
// What "runs the file" means per format: GGUF and safetensors files are read
// back tensor by tensor (F16 and Q8_0 dequantized) and compiled from the
// project JSON they carry. An ONNX file's operator graph is executed by OpenCV's
// DNN module (OnnxRunner) on the raw inputs. Where OpenCV cannot import or run
// the graph (or the build has no OpenCV), the check falls back to rebuilding the
// file's initializers and embedded project into a Strata model, and the
// `method` text says so with OpenCV's reason. An int8 (QDQ) file, which OpenCV
// 4.6 cannot import, is then simulated: its dequantized weights with every
// activation rounded to the file's uint8 grid (Quantize.h, simulateInt8).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"
#include "core/export/FoldBatchNorm.h"

namespace strata {

class Backend;
class Model;
struct DataSplit;

enum class ExportFormat { Onnx, Gguf, Safetensors };

// Every format and every precision (a new one goes here too: test_export_formats walks these lists, and fails for
// a supported pair it has no tolerance for).
const std::vector<ExportFormat>& exportFormats();
const std::vector<ExportPrecision>& exportPrecisions();
const char* exportFormatName(ExportFormat format);           // "ONNX", "GGUF", "safetensors"
const char* exportFormatExtension(ExportFormat format);      // ".onnx", ".gguf", ".safetensors"
const char* exportPrecisionName(ExportPrecision precision);  // "F32", "F16", "Q8_0", "Q4_0", "int8"
// ONNX: F32 or int8 (QDQ); safetensors: F32 or F16; GGUF: F32, F16, Q8_0 or Q4_0.
bool exportFormatSupports(ExportFormat format, ExportPrecision precision);

struct ExportRequest {
    ExportFormat format = ExportFormat::Onnx;
    ExportPrecision precision = ExportPrecision::F32;
    int opset = 13;  // ONNX only
};

struct ExportWriteResult {
    // One line per tensor as stored (ONNX: its initializers, F32), the file size, and under Q8_0 the
    // tensors stored as F16 instead (ExportSummary::fallbacks).
    ExportSummary summary;
    // Int8: the BatchNorms folded into the layer before them before quantizing (prepareInt8Export).
    std::vector<FoldedBatchNorm> folded;
};

// Writes `model` to `path` (temporary file, then rename). Int8 calibrates on `calibration` (training samples,
// normalized; required for int8, else unused) as `quantization` says. Throws std::invalid_argument for a
// precision the format lacks, an opset out of range or int8 without calibration data, and the writers'
// exceptions (naming the file) otherwise.
ExportWriteResult writeExport(const std::string& path, const ExportModel& model, const ExportRequest& request,
                              const DataSplit* calibration = nullptr, const QuantizationOptions& quantization = {});

// The model compiled on `backend` with the ExportModel's weights, frozen (Model::freezeWeights): for inference.
std::unique_ptr<Model> compileExportModel(const ExportModel& model, Backend& backend);

struct ExportCheckResult {
    std::string path;
    std::string method;          // what was loaded and run, in words
    std::string runtime;         // what ran the file: "OpenCV DNN 4.6.0" or "Strata CPU backend"
    std::string fallbackReason;  // ONNX only: why OpenCV could not run the graph; empty when it did
    int64_t samples = 0;
    int classes = 0;
    double maxAbsDiff = 0;                      // largest |live output - file output| over every sample and output
    double maxAbsOutput = 0;                    // largest |live output|, the scale maxAbsDiff is measured against
    double liveAccuracy = 0, fileAccuracy = 0;  // 0..1 on those samples (classification)
    int64_t samePrediction = 0;                 // samples where both predict the same class (classification)
    // Tasks other than classification (Task.h): the task's score (taskScoreName: R2, micro F1, PSNR) of each on
    // those samples, each in the data's units as its own file says (a regression file's target standardization
    // is applied to its outputs, so a wrong one shows up here); classes, accuracies and samePrediction are 0.
    std::string scoreName;
    double liveScore = 0, fileScore = 0;
    // An int8 file run on Strata's int8 engine (Int8Engine.h): against its reference, the float simulation of the
    // same file (simulateInt8), the samples of the same class and the largest output difference; -1 and 0 when the
    // engine did not run (no AVX512-VNNI, or a layer it has no int8 path for: `method` says which).
    int64_t int8SameAsSimulation = -1;
    double int8MaxDiffFromSimulation = 0;
};

// Loads `exportedPath` with loadModelFile, compiles it and `live` on the CPU backend and runs both on the first
// `limit` samples of `data` (model inputs normalized with `dataNormalization`, as loadDataset gives them). The
// live model takes them as they are; the file gets them turned back into raw values and normalized the way the
// file says (inside an ONNX graph, else with the normalization the file stores), so a wrong normalization in
// the file shows up as a difference. An ONNX file runs in OpenCV DNN when it can (see above).
// Tasks other than classification compare the task's score instead of accuracy (ExportCheckResult::scoreName).
// Throws (naming the file) when the file cannot be loaded (weights holding NaN or inf included, unless `options`
// allow them) or does not fit the data.
ExportCheckResult checkExport(const ExportModel& live, const std::string& exportedPath, const DataSplit& data,
                              const Normalization& dataNormalization, int64_t limit = 256,
                              const WeightLoadOptions& options = {});

}  // namespace strata
