// Predict: a saved model (checkpoint, or a .safetensors / .gguf / .onnx export) applied to the samples of a
// data file, the engine half of `strata-train predict` (app/ parses its options and prints). Inputs come
// from IDX images, CSV rows (tabular features, or text tokenized with the model's vocabulary) or one image
// file fitted to the model's input (core/data/ImageFile.h, the path the Predict dock uses too). Raw values
// are normalized as the model file says. An .onnx file's operator graph runs in OpenCV DNN (OnnxRunner)
// when asked or by default when this build has it; by default, where OpenCV cannot run it, the file's
// weights run on the Strata CPU backend and runtimeDescription() says so with OpenCV's reason.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"
#include "core/infer/Evaluation.h"

namespace strata {

class Backend;
class Model;
class OnnxRunner;
class Int8Engine;

// Raw (un-normalized) inputs read from a file.
struct PredictInputs {
    std::vector<int64_t> sampleDims;  // per sample: the model's input shape for images, [F] for CSV, [T] for text
    int64_t count = 0;
    std::vector<float> values;        // count * prod(sampleDims)
    std::vector<std::string> labels;  // true labels when the file has them (CSV), else empty
    // Regression and multi-label 0/1 columns: the target columns' values when the CSV has them (data units), count *
    // targets; else empty.
    std::vector<float> targets;
    std::vector<std::string> notes;  // what was done to fit the file to the model (image resized, ...)
};

// The first `limit` samples of `path` for `model` (input shape `inputShape`): an image file by its extension
// (data::isImageFileName), IDX images by their magic, else CSV (the project's label column is kept apart;
// text projects tokenize the text column with `model.vocabulary`). Throws naming the file and line.
PredictInputs readPredictInputs(const std::string& path, const ExportModel& model, const Shape& inputShape,
                                int64_t limit);
// Raw texts for a text model (dataset kind text, a vocabulary): each tokenized as in training (the project's
// tokenizer, ids from `model.vocabulary`, unknown words 1), cut to max_tokens or padded with 0. An empty text is
// all padding. Throws std::invalid_argument for a model that does not take text.
PredictInputs encodeTexts(const std::vector<std::string>& texts, const ExportModel& model);
// The lines of a UTF-8 text file, one sample each (a final line without a newline counts; "\r\n" endings
// are cut); at most `limit`. Throws naming the file when it cannot be read or a line holds a NUL byte (not
// text: a binary file given by mistake), naming the line.
std::vector<std::string> readTextLines(const std::string& path, int64_t limit);
// True when the file (gzipped or not) starts with the IDX u8 rank-3 magic.
bool isIdxImages(const std::string& path);
// IDX labels (u8 class indices, as Fashion-MNIST's *-labels-idx1-ubyte) for the first `count` samples.
std::vector<std::string> readIdxLabels(const std::string& path, int64_t count);

// Int8: an int8 ONNX file (export --quantize int8) on Strata's int8 engine (Int8Engine.h), refused with the reason
// on a CPU without AVX512-VNNI; Auto runs int8 files on it where it can and says why not where it cannot.
enum class PredictRuntime { Auto, Strata, OpenCv, Int8 };

class Predictor {
public:
    // Loads and compiles the model on a CPU backend. OpenCv: an .onnx file whose graph OpenCV cannot import
    // is an error (OnnxRunError); Auto: it falls back to Strata and says so. Weights holding NaN or inf are
    // refused naming the tensor unless `options` allow them (loadModelFile).
    Predictor(const std::string& modelPath, PredictRuntime runtime = PredictRuntime::Auto,
              const WeightLoadOptions& options = {});
    ~Predictor();
    Predictor(const Predictor&) = delete;
    Predictor& operator=(const Predictor&) = delete;

    const ExportModel& model() const { return m_file; }
    const Shape& inputShape() const;
    const Shape& outputShape() const;
    int classes() const;
    // The class's name from the file, else "class K".
    std::string className(size_t k) const;
    // A label from an input file names class k when it is k's name or its index.
    bool labelIsClass(const std::string& label, size_t k) const;
    // "runtime: ..." in words: what runs the model, and why not OpenCV where it does not.
    const std::string& runtimeDescription() const { return m_runtimeLine; }

    TaskKind task() const { return m_file.project.dataset.task; }
    // Regression: the predictions in the data's units (the target standardization undone), count * targets.
    std::vector<float> regressionValues(const Predictions& p) const;
    // Multi-label: each label's probability (the sigmoid of its output), count * labels.
    static std::vector<float> labelProbabilities(const Predictions& p);

    // Normalizes `raw` (count samples of the model's input size, data-file scale) as the file says and runs
    // them, `batchSize` at a time. Probabilities are the outputs when the graph ends in a Softmax.
    Predictions run(std::vector<float> raw, int64_t count, int batchSize = 256);

private:
    std::string m_path;
    PredictRuntime m_runtime;
    ExportModel m_file;
    std::unique_ptr<Backend> m_backend;
    std::unique_ptr<Model> m_model;
    std::unique_ptr<OnnxRunner> m_runner;
    std::unique_ptr<Int8Engine> m_int8;
    std::string m_runtimeLine;
};

}  // namespace strata
