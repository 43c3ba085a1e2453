// ExportModel: everything an export format needs from a trained model (the
// project with its graph, the weights by "<node>.<param>", the dataset
// normalization, class labels and vocabulary), and the loaders that build one
// from a checkpoint or from one of our own export files (safetensors, GGUF,
// ONNX written by Strata, which carry the project JSON in their metadata).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/export/Quantize.h"
#include "core/graph/Project.h"
#include "core/train/Checkpoint.h"

namespace strata {

struct ExportModel {
    Project project;
    std::map<std::string, std::vector<float>> weights;  // flat values by Model::namedParameters name
    Normalization normalization;
    // Regression: the targets' standardization, undone on the outputs (Checkpoint::targetNormalization). Every format
    // stores it as JSON text under kMetaTargetNormalization, only when its mode is not "none".
    Normalization targetNormalization;
    std::vector<std::string> classNames;
    std::vector<std::string> vocabulary;
    std::string tokenizerModel;  // text, sentencepiece: the serialized SentencePiece model
    // An int8 ONNX file's activation quantization by node name (Quantize.h); empty for float models. Its
    // weights are the file's, dequantized.
    std::map<std::string, ActivationQuant> int8Activations;
};

// One parameter or state tensor of a graph, with its real shape (checkpoints store weights flat).
struct ExportParameter {
    std::string name;  // "<node name>.<param>"
    int node = -1;
    std::string param;  // "weight"
    Shape shape;
    bool trainable = true;
};

// Every parameter of the graph in topological order. Throws std::runtime_error naming the first
// problem when the graph does not analyze cleanly.
std::vector<ExportParameter> exportParameters(const Graph& graph);
// Checks that `model.weights` holds exactly the graph's parameters with the right sizes; throws naming the tensor.
void checkExportWeights(const ExportModel& model, const std::vector<ExportParameter>& params);

ExportModel exportModelFromCheckpoint(const Checkpoint& checkpoint);
// A project's model with its seeded initial weights (compiled on the CPU), and the normalization, class names
// and vocabulary of its dataset (`projectPath` resolves the dataset's relative paths).
ExportModel untrainedExportModel(const Project& project, const std::string& projectPath);

// The normalization's values must be usable (checkNormalizationValues: no std of 0, NaN or inf, as checkpoints
// refuse it) and per-feature statistics (CSV 'standardize') must hold one mean and one std per input value of the
// graph; throws std::runtime_error naming the field, the sizes or the feature otherwise. Writers and loaders check.
void checkNormalization(const Normalization& norm, const Graph& graph);

// Metadata keys shared by the formats.
inline constexpr const char* kMetaProject = "strata.project";
inline constexpr const char* kMetaClassLabels = "strata.class_labels";
inline constexpr const char* kMetaTargetNormalization = "strata.target_normalization";
// The metadata text of model.targetNormalization; empty when its mode is "none" (nothing is written).
std::string targetNormalizationText(const ExportModel& model);
// Reads that text back into model.targetNormalization; throws FormatError naming `path` when it is malformed.
void readTargetNormalization(ExportModel& model, const std::string& text, const std::string& path);
inline constexpr const char* kMetaVocabulary = "strata.vocabulary";
// text, sentencepiece: the SentencePiece model, base64 (safetensors, ONNX and GGUF metadata alike).
inline constexpr const char* kMetaTokenizerModel = "strata.tokenizer_model";

// Q8_0 and Q4_0 are GGUF block types; Int8 is ONNX's post-training quantization (QDQ, Quantize.h).
enum class ExportPrecision { F32, F16, Q8_0, Q4_0, Int8 };
// "f32", "f16", "q8_0", "q4_0", "int8" (as given to --quantize); throws std::invalid_argument otherwise.
ExportPrecision parseExportPrecision(const std::string& text);

// What a writer stored, one line per tensor ("conv1.weight [32, 1, 3, 3] F16"), for the CLI to print.
struct ExportSummary {
    std::vector<std::string> tensors;
    // Q8_0 and Q4_0 exports: the rank >= 2 tensors stored as F16 because their innermost dimension is not a
    // multiple of 32 (the blocks run along it; llama.cpp falls back the same way).
    std::vector<ExportParameter> fallbacks;
    uint64_t bytes = 0;  // file size
};

// Safetensors export: "<node>.<param>" tensors with their real shapes, F32, or F16 for tensors of rank >= 2
// (1-D tensors stay F32; Q8_0 and Q4_0 are GGUF only, int8 ONNX only);
// metadata strata.project, strata.class_labels, strata.vocabulary (JSON arrays) and strata.normalization
// (JSON: mode, scale, mean, std, and feature_mean / feature_std arrays for per-feature standardization).
ExportSummary writeSafetensorsExport(const std::string& path, const ExportModel& model, ExportPrecision precision);
// GGUF export (see Gguf.h for the keys). F16: every tensor of rank >= 2 as F16, 1-D tensors (biases,
// norm parameters and statistics) stay F32, as llama.cpp does. Q8_0: tensors of rank >= 2 whose
// innermost dimension is a multiple of 32 as Q8_0; other rank >= 2 tensors as F16; 1-D as F32. Q4_0: the
// same with Q4_0 blocks.
ExportSummary writeGgufExport(const std::string& path, const ExportModel& model, ExportPrecision precision);

// A checkpoint file or folder, a .safetensors export, a .gguf export or a Strata .onnx export:
// GGUF by its magic bytes, ONNX by the .onnx extension, anything else as safetensors (a checkpoint
// or an export, told apart by its metadata). Throws FormatError or std::runtime_error naming the file; among
// others for a weight holding NaN or inf (as dequantized; unless `options` allow it) and for a normalization
// with a std of 0, NaN or inf (checkNormalizationValues, as checkpoints refuse it).
ExportModel loadModelFile(const std::string& path, const WeightLoadOptions& options = {});

}  // namespace strata
