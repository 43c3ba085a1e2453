// The `strata-train export` and `strata-train predict` commands. app/strata_train.cpp
// passes the arguments after the command word; output goes to `out`, errors to `err`.
//
//   export PROJECT_OR_CHECKPOINT --format onnx|gguf|safetensors [--quantize q8_0|f16]
//          [--opset N] [--no-normalization] [--untrained] -o FILE
//     A checkpoint file, or a checkpoint folder (its best checkpoint), or a project
//     file (its training.checkpointDir's best checkpoint; with --untrained, the
//     seeded initial weights).
//   predict MODEL_FILE INPUT [--top K] [--count N] [--labels IDX_LABELS] [--quiet] [--runtime strata|opencv]
//     MODEL_FILE: checkpoint file or folder, .safetensors / .gguf / .onnx export. An .onnx file's graph runs
//     in OpenCV DNN (OnnxRunner) by default when the build has it; --runtime strata runs its weights on the
//     Strata CPU backend instead, --runtime opencv makes an OpenCV failure an error. Where OpenCV cannot run
//     the graph by default, Strata runs it and says why. A "runtime: ..." line says which one ran.
//     INPUT: IDX images (gzipped or raw; the first N), a CSV file (header row; the
//     project's label column, when present, is shown and not fed to the model; text
//     projects tokenize the text column), or a PNG / PGM / PPM image of the model's
//     width and height (RGB becomes gray by its luma for a one-channel model). Raw values
//     are normalized as in training; prints the top K classes with probabilities, and
//     "accuracy X% on N samples" when labels are known (the CSV's label column, or
//     --labels with an IDX label file for IDX images). --quiet prints only that summary.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Raw (un-normalized) inputs read from a file for `predict`.
struct PredictInputs {
    std::vector<int64_t> sampleDims;  // per sample as read: [H, W] or [C, H, W] for images, [F] for CSV
    int64_t count = 0;
    std::vector<float> values;         // count * prod(sampleDims)
    std::vector<std::string> labels;   // true labels when the file has them (CSV), else empty
};

// Reads a binary PGM (P5) or PPM (P6) or their ASCII forms (P2, P3); 8- or 16-bit. Values stay in
// 0..maxval (scaled to 0..255 when maxval != 255). Result dims [C, H, W] with C = 1 or 3.
// Throws FormatError naming the file and offset.
PredictInputs readNetpbm(const std::string& path);
// Reads a PNG image (see core/data/PngReader.h) as dims [C, H, W], C = 1 (gray) or 3, values 0..255.
PredictInputs readPngInputs(const std::string& path);

}  // namespace strata
