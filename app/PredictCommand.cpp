// strata-train predict: options declared and results printed here; reading the inputs and running the model is
// core/infer/Predict's.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"
#include "core/graph/Project.h"
#include "core/infer/Predict.h"
#include "core/infer/Saliency.h"
#include "core/io/FileIo.h"
#include "core/io/InputLimits.h"
#include "core/train/ProjectFingerprint.h"
#include "core/train/TaskMetrics.h"

namespace strata {

namespace {

using cli::looksLikeProjectFile;
using cli::UsageError;

// Samples per forward pass: bounds the activations (a CNN on 10,000 images at once would need gigabytes).
constexpr int kPredictBatch = 256;

struct PredictArgs {
    std::string modelPath, inputPath, labelsPath, runtimeName, textFile;
    std::vector<std::string> texts;
    std::string saliencyPath, saliencyLayer;
    int saliencyClass = -1;  // -1: each sample's predicted class
    int top = 3, count = 5;
    bool quiet = false;
    WeightLoadOptions loadOptions;
};

// Tasks other than classification: regression values in the data's units (and MAE, RMSE, R^2 when the file holds
// the targets), multi-label probabilities per label and the labels at the threshold (and micro/macro F1 when known),
// image to image the PSNR of each output against its input.
int printTaskPredictions(std::ostream& out, const Predictor& predictor, const Predictions& p, const PredictInputs& in,
                         bool quiet) {
    const DatasetSettings& ds = predictor.model().project.dataset;
    const auto k = static_cast<size_t>(p.classes);
    out << std::fixed << std::setprecision(4);
    if (ds.task == TaskKind::Regression) {
        const std::vector<float> values = predictor.regressionValues(p);
        const bool known = in.targets.size() == values.size();
        for (int64_t s = 0; s < p.count && !quiet; ++s) {
            out << "sample " << s << ":";
            for (size_t j = 0; j < k; ++j) {
                out << (j ? ", " : " ") << predictor.className(j) << " " << values[static_cast<size_t>(s) * k + j];
                if (known) out << " (actual " << in.targets[static_cast<size_t>(s) * k + j] << ")";
            }
            out << "\n";
        }
        if (known) {
            TaskMetrics m(TaskKind::Regression, p.classes, predictor.model().classNames);
            m.add(values.data(), in.targets.data(), p.count);
            const std::vector<RegressionTargetMetrics> r = m.regression();
            for (size_t j = 0; j < k; ++j)
                out << predictor.className(j) << ": MAE " << r[j].mae << ", RMSE " << r[j].rmse << ", R2 " << r[j].r2
                    << " on " << p.count << " samples\n";
        }
        return 0;
    }
    if (ds.task == TaskKind::MultiLabel) {
        const std::vector<float> prob = Predictor::labelProbabilities(p);
        for (int64_t s = 0; s < p.count && !quiet; ++s) {
            out << "sample " << s << ":";
            std::string chosen;
            for (size_t j = 0; j < k; ++j) {
                const float q = prob[static_cast<size_t>(s) * k + j];
                out << (j ? ", " : " ") << predictor.className(j) << " " << q;
                if (q >= ds.threshold) chosen += (chosen.empty() ? "" : ", ") + predictor.className(j);
            }
            out << " | labels at " << ds.threshold << ": " << (chosen.empty() ? std::string("none") : chosen) << "\n";
        }
        if (in.targets.size() == prob.size()) {
            TaskMetrics m(TaskKind::MultiLabel, p.classes, predictor.model().classNames, {}, ds.threshold);
            m.add(p.outputs.data(), in.targets.data(), p.count);
            out << "micro F1 " << m.microF1() << ", macro F1 " << m.macroF1() << " on " << p.count << " samples\n";
        }
        return 0;
    }
    // Image to image: each output against its (normalized) input, the autoencoder's target.
    std::vector<float> inputs = in.values;
    applyNormalization(inputs, predictor.model().normalization);
    for (int64_t s = 0; s < p.count; ++s) {
        TaskMetrics m(TaskKind::ImageToImage, p.classes, {}, {}, 0.5, predictor.model().normalization);
        if (inputs.size() == p.outputs.size())
            m.add(p.outputs.data() + s * p.classes, inputs.data() + s * p.classes, 1);
        if (!quiet)
            out << "sample " << s << ": output " << predictor.outputShape().toString() << ", PSNR against the input "
                << std::setprecision(2) << m.psnr() << " dB\n";
    }
    return 0;
}

// --saliency: Grad-CAM maps (image models) or token scores (text models) of each sample's predicted class (or
// --saliency-class) as JSON, or the first sample's Grad-CAM map as a grayscale PNG. Computed by the Strata CPU
// backend on the file's weights whatever runs the predictions.
void writeSaliency(const PredictArgs& a, const Predictor& predictor, const PredictInputs& in, const Predictions& p,
                   std::ostream& out) {
    const std::string& path = a.saliencyPath;
    const bool png = std::filesystem::path(path).extension() == ".png";
    auto backend = backendRegistry().create(Device::cpu());
    SaliencyModel model(predictor.model(), *backend);
    const bool text = model.takesTokens();
    if (png && text)
        throw UsageError("--saliency " + path + ": a PNG holds a Grad-CAM map; a text model's token scores go to a " +
                         ".json file");
    std::vector<float> x = in.values;
    applyNormalization(x, predictor.model().normalization);
    const int64_t per = predictor.inputShape().numel();
    const int64_t count = png ? 1 : in.count;
    nlohmann::ordered_json samples = nlohmann::ordered_json::array();
    for (int64_t s = 0; s < count; ++s) {
        const int cls = a.saliencyClass >= 0 ? a.saliencyClass : p.predicted[static_cast<size_t>(s)];
        nlohmann::ordered_json j = {{"sample", s}, {"class", cls}};
        if (cls < predictor.classes()) j["class_name"] = predictor.className(static_cast<size_t>(cls));
        const float* sample = x.data() + s * per;
        if (text) {
            const TokenSaliency t = model.tokenSaliency(sample, cls);
            std::vector<int64_t> ids;
            for (int64_t i = 0; i < per; ++i)
                ids.push_back(static_cast<int64_t>(in.values[static_cast<size_t>(s * per + i)]));
            j.update({{"score", t.score}, {"embedding", t.embeddingNode}, {"token_ids", ids}, {"values", t.values}});
        } else {
            const GradCam g = model.gradCam(sample, cls, a.saliencyLayer);
            if (png) writeGradCamPng(path, g);
            j.update({{"score", g.score},
                      {"layer", g.layer},
                      {"activation", g.activationNode},
                      {"height", g.height},
                      {"width", g.width},
                      {"empty", g.empty},
                      {"map", g.map}});
        }
        samples.push_back(std::move(j));
    }
    if (!png) {
        const nlohmann::ordered_json doc = {
            {"kind", text ? "token_saliency" : "grad_cam"}, {"model", a.modelPath}, {"samples", samples}};
        writeFileAtomically(path, [&](std::ostream& f) { f << doc.dump() << "\n"; });
    }
    out << "saliency: "
        << (text  ? "token scores"
            : png ? "the first sample's Grad-CAM map"
                  : "Grad-CAM maps")
        << " of " << count << " sample(s) written to " << path << "\n";
}

int predictCommand(PredictArgs& a, std::ostream& out) {
    const std::string &modelPath = a.modelPath, &labelsPath = a.labelsPath, &runtimeName = a.runtimeName,
                      &textFile = a.textFile;
    std::string& inputPath = a.inputPath;
    std::vector<std::string>& texts = a.texts;
    const int top = a.top, count = a.count;
    const bool quiet = a.quiet;
    const WeightLoadOptions& loadOptions = a.loadOptions;
    const bool textInput = !texts.empty() || !textFile.empty();
    if (textInput && (!inputPath.empty() || (!texts.empty() && !textFile.empty())))
        throw UsageError("give one input: INPUT, --text or --text-file");
    if (textInput && !labelsPath.empty()) throw UsageError("--labels goes with IDX images, not with text");
    if (modelPath.empty() || (inputPath.empty() && !textInput))
        throw UsageError("predict needs MODEL_FILE and INPUT (or --text / --text-file)");
    if (textInput) inputPath = textFile.empty() ? std::string("--text") : textFile;
    if (!a.saliencyPath.empty()) {
        const std::string ext = std::filesystem::path(a.saliencyPath).extension().string();
        if (ext != ".png" && ext != ".json")
            throw UsageError("--saliency " + a.saliencyPath + ": give a .png (a Grad-CAM map) or .json file");
    } else if (!a.saliencyLayer.empty() || a.saliencyClass >= 0) {
        throw UsageError("--saliency-layer and --saliency-class go with --saliency");
    }
    const PredictRuntime runtime = runtimeName == "strata"   ? PredictRuntime::Strata
                                   : runtimeName == "opencv" ? PredictRuntime::OpenCv
                                   : runtimeName == "int8"   ? PredictRuntime::Int8
                                                             : PredictRuntime::Auto;
    // A project file stands for its checkpoint, which must belong to it (not another project's of the same shapes).
    std::string modelFile = modelPath;
    std::optional<Project> project;
    std::error_code ec;
    if (!std::filesystem::is_directory(modelPath, ec) && looksLikeProjectFile(modelPath)) {
        project = readProject(modelPath);
        modelFile = projectCheckpointFile(*project, modelPath);
        out << "using checkpoint " << modelFile << "\n";
    }
    if (runtime == PredictRuntime::OpenCv && std::filesystem::path(modelFile).extension() != ".onnx")
        throw UsageError("--runtime opencv runs .onnx files; " + modelFile + " is not one");
    const auto predictor = std::make_unique<Predictor>(modelFile, runtime, loadOptions);
    if (project) {
        const ExportModel& m = predictor->model();
        checkBelongsToProject(modelFile, m.project.name,
                              projectFingerprint(m.project, m.classNames, m.normalization, m.vocabulary),
                              projectSettingsFingerprint(*project),
                              "To predict with it anyway, give the checkpoint instead of the project");
    }
    const Shape& inShape = predictor->inputShape();

    PredictInputs in;
    if (!textInput) {
        in = readPredictInputs(inputPath, predictor->model(), inShape, count);
    } else {
        if (!textFile.empty()) texts = readTextLines(textFile, count);
        try {
            in = encodeTexts(texts, predictor->model());
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(modelPath + ": " + e.what());
        }
    }
    for (const std::string& note : in.notes) out << note << "\n";
    if (!labelsPath.empty()) {
        if (!in.labels.empty()) throw UsageError("--labels: " + inputPath + " holds its own labels");
        in.labels = readIdxLabels(labelsPath, in.count);
        for (size_t s = 0; s < in.labels.size(); ++s) {
            bool known = false;
            for (int k = 0; k < predictor->classes() && !known; ++k)
                known = predictor->labelIsClass(in.labels[s], static_cast<size_t>(k));
            if (!known)
                throw std::runtime_error(labelsPath + ": the label of sample " + std::to_string(s) + ", '" +
                                         cutForMessage(in.labels[s]) + "', is not one of the model's " +
                                         std::to_string(predictor->classes()) + " classes");
        }
    }
    const int64_t per = Shape(in.sampleDims).numel();  // checked: throws rather than wrap
    if (per != inShape.numel())
        throw std::runtime_error(inputPath + ": samples of shape " + Shape(in.sampleDims).toString() + " (" +
                                 std::to_string(per) + " values) do not fit the model input " + inShape.toString());
    if (in.count == 0) throw std::runtime_error(inputPath + ": no samples");

    const Predictions p = predictor->run(in.values, in.count, kPredictBatch);  // image to image compares with them
    out << "model " << modelPath << " (" << predictor->model().project.name << "), input " << inputPath << ": "
        << in.count << " sample(s)\n";
    out << predictor->runtimeDescription() << "\n";
    if (!a.saliencyPath.empty() && predictor->task() != TaskKind::Classification)
        throw UsageError("--saliency explains a classifier's class scores; this model's task is " +
                         settingName(predictor->task()));
    if (predictor->task() != TaskKind::Classification) return printTaskPredictions(out, *predictor, p, in, quiet);
    const size_t classes = static_cast<size_t>(p.classes);
    int64_t labelled = 0, correct = 0;
    std::vector<size_t> idx(classes);
    for (int64_t s = 0; s < in.count; ++s) {
        const float* prob = p.probabilitiesOf(s);
        const bool hasLabel = static_cast<size_t>(s) < in.labels.size();
        if (hasLabel) {
            ++labelled;
            if (predictor->labelIsClass(in.labels[static_cast<size_t>(s)],
                                        static_cast<size_t>(p.predicted[static_cast<size_t>(s)])))
                ++correct;
        }
        if (quiet) continue;
        std::iota(idx.begin(), idx.end(), size_t{0});
        const size_t k = std::min<size_t>(static_cast<size_t>(top), classes);
        std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                          [&](size_t a, size_t b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); });
        out << "sample " << s;
        if (hasLabel) out << " (label " << in.labels[static_cast<size_t>(s)] << ")";
        out << ":";
        for (size_t j = 0; j < k; ++j)
            out << (j ? ", " : " ") << predictor->className(idx[j]) << " " << std::fixed << std::setprecision(4)
                << prob[idx[j]];
        out << "\n";
    }
    if (labelled > 0)
        out << "accuracy " << std::fixed << std::setprecision(2) << 100.0 * double(correct) / double(labelled)
            << "% on " << labelled << " samples (" << correct << " correct)\n";
    if (!a.saliencyPath.empty()) writeSaliency(a, *predictor, in, p, out);
    return 0;
}

}  // namespace

cli::CommandRun cli::declarePredict(CLI::App& app) {
    auto a = std::make_shared<PredictArgs>();
    app.footer(
        "Runs a model on inputs and prints the top classes of each sample, and the accuracy when labels are known.\n"
        "MODEL_FILE: a checkpoint (file or folder), an export (.onnx, .gguf, .safetensors) or a project file (its "
        "checkpoint folder's best checkpoint, refused when it belongs to another project).\n"
        "INPUT: IDX images (gzipped or raw; the first N), a CSV file (header row; the project's label column, when "
        "present, is shown and not fed to the model; text models tokenize the text column), or a PNG, PGM or PPM "
        "image, fitted to the model's input (channels converted, size resized, each said in a line). Text models "
        "also take --text or --text-file: each text, or each line, one sample, tokenized as in training. Raw "
        "values are normalized as in training.");
    app.add_option("model", a->modelPath, "The model: checkpoint, export or project file.")->type_name("MODEL_FILE");
    app.add_option("input", a->inputPath, "The samples: IDX images, a CSV file or an image.")->type_name("INPUT");
    addIntegerOption(app, "--top", a->top, 1, 1000000, "Classes shown per sample (default 3).")->type_name("K");
    addIntegerOption(app, "--count", a->count, 1, 100000000, "Samples read from INPUT (default 5).");
    app.add_option("--labels", a->labelsPath, "IDX images: their labels (an IDX label file), for the accuracy.")
        ->type_name("IDX_LABELS");
    app.add_flag("--quiet", a->quiet, "Print only the accuracy line.");
    addChoiceOption(app, "--runtime", a->runtimeName, {"strata", "opencv", "int8"},
                    "What runs the model (default: Strata; an .onnx file: OpenCV DNN; an int8 .onnx file: Strata's "
                    "int8 engine on a CPU with AVX512-VNNI). strata: float32 on the file's (dequantized) weights.");
    app.add_option("--text", a->texts, "A text model: one sample (give --text again for more).")
        ->type_name("TEXT")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--text-file", a->textFile, "A text model: each line of FILE one sample.")->type_name("FILE");
    app.add_option("--saliency", a->saliencyPath,
                   "Where the model looked: FILE.json gets each sample's Grad-CAM map (image models) or token scores "
                   "(text models) for its predicted class, FILE.png the first sample's Grad-CAM map (grayscale).")
        ->type_name("FILE");
    app.add_option("--saliency-layer", a->saliencyLayer,
                   "--saliency: the Conv2D whose map Grad-CAM weighs (default: "
                   "the last).")
        ->type_name("NODE");
    addIntegerOption(app, "--saliency-class", a->saliencyClass, 0, 1000000,
                     "--saliency: the class explained (default: each sample's predicted class).")
        ->type_name("K");
    app.add_flag("--allow-non-finite", a->loadOptions.allowNonFinite,
                 "Load weights that hold NaN or inf (refused otherwise, naming the tensor).");
    return [a](std::ostream& out, std::ostream&) { return predictCommand(*a, out); };
}

}  // namespace strata
