// strata-train predict: options parsed and results printed here; reading the inputs and running the model is
// core/infer/Predict's.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <numeric>
#include <optional>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/graph/Project.h"
#include "core/infer/Predict.h"
#include "core/io/InputLimits.h"
#include "core/train/ProjectFingerprint.h"

namespace strata {

namespace {

using cli::looksLikeProjectFile;
using cli::UsageError;

const char* kPredictUsage =
    "usage: strata-train predict MODEL_FILE INPUT [--top K] [--count N] [--labels IDX_LABELS] [--quiet]\n"
    "                            [--runtime strata|opencv] [--allow-non-finite]\n"
    "       strata-train predict MODEL_FILE --text \"TEXT\" [--text \"TEXT\" ...] | --text-file FILE [options]\n"
    "       (text models: each --text, or each line of FILE, is one sample, tokenized as in training)\n"
    "  MODEL_FILE: a checkpoint (file or folder), an export (.onnx, .gguf, .safetensors) or a project file (its\n"
    "  checkpoint folder's best checkpoint, refused when it belongs to another project)\n"
    "  --allow-non-finite   load weights that hold NaN or inf (refused otherwise, naming the tensor)\n";

// Samples per forward pass: bounds the activations (a CNN on 10,000 images at once would need gigabytes).
constexpr int kPredictBatch = 256;

int predictCommand(const std::vector<std::string>& args, std::ostream& out) {
    std::string modelPath, inputPath, labelsPath, runtimeName, textFile;
    std::vector<std::string> texts;
    int top = 3, count = 5;
    bool quiet = false;
    WeightLoadOptions loadOptions;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--top")
            top = cli::parseInt(a, value(), 1, 1000000);
        else if (a == "--count")
            count = cli::parseInt(a, value(), 1, 100000000);
        else if (a == "--labels")
            labelsPath = value();
        else if (a == "--quiet")
            quiet = true;
        else if (a == "--allow-non-finite")
            loadOptions.allowNonFinite = true;
        else if (a == "--runtime")
            runtimeName = value();
        else if (a == "--text")
            texts.push_back(value());
        else if (a == "--text-file")
            textFile = value();
        else if (!a.empty() && a[0] == '-')
            throw UsageError("unknown option " + a);
        else if (modelPath.empty())
            modelPath = a;
        else if (inputPath.empty())
            inputPath = a;
        else
            throw UsageError("unexpected argument '" + a + "'");
    }
    const bool textInput = !texts.empty() || !textFile.empty();
    if (textInput && (!inputPath.empty() || (!texts.empty() && !textFile.empty())))
        throw UsageError("give one input: INPUT, --text or --text-file");
    if (textInput && !labelsPath.empty()) throw UsageError("--labels goes with IDX images, not with text");
    if (modelPath.empty() || (inputPath.empty() && !textInput))
        throw UsageError("predict needs MODEL_FILE and INPUT (or --text / --text-file)");
    if (textInput) inputPath = textFile.empty() ? std::string("--text") : textFile;
    PredictRuntime runtime = PredictRuntime::Auto;
    if (runtimeName == "strata")
        runtime = PredictRuntime::Strata;
    else if (runtimeName == "opencv")
        runtime = PredictRuntime::OpenCv;
    else if (!runtimeName.empty())
        throw UsageError("--runtime: '" + runtimeName + "' is not strata or opencv");
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

    const Predictions p = predictor->run(std::move(in.values), in.count, kPredictBatch);
    out << "model " << modelPath << " (" << predictor->model().project.name << "), input " << inputPath << ": "
        << in.count << " sample(s)\n";
    out << predictor->runtimeDescription() << "\n";
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
    return 0;
}

}  // namespace

int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return predictCommand(args, out);
    } catch (const UsageError& e) {
        err << "strata-train predict: " << e.what() << "\n" << kPredictUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train predict: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
