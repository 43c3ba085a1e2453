#include "core/infer/Compression.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>

#include <zlib.h>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/FoldBatchNorm.h"
#include "core/export/Onnx.h"
#include "core/graph/Model.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/Int8Engine.h"
#include "core/io/FileIo.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/PruneRun.h"
#include "core/train/Trainer.h"

namespace strata {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Weights = std::map<std::string, std::vector<float>>;

std::string percentText(double fraction) { return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%"; }

uint64_t deflatedSize(const std::string& path) {
    const std::vector<uint8_t> bytes = readWholeFile(path);
    uLongf size = compressBound(static_cast<uLong>(bytes.size()));
    std::vector<unsigned char> out(size);
    if (compress2(out.data(), &size, bytes.data(), static_cast<uLong>(bytes.size()), 9) != Z_OK)
        throw std::runtime_error(path + ": zlib could not compress the file to measure it");
    return size;
}

// Forwards the fine-tuning's events and turns its steps into the study's progress.
class FineTuneEvents : public TrainingObserver {
public:
    FineTuneEvents(TrainingObserver* next, std::function<void(double)> stepFraction)
        : m_next(next), m_fraction(std::move(stepFraction)) {}
    void onStep(const StepEvent& e) override {
        if (m_next) m_next->onStep(e);
        if (e.stepsPerEpoch > 0 && m_epochs > 0)
            m_fraction((static_cast<double>(e.epoch - 1) + static_cast<double>(e.stepInEpoch) / e.stepsPerEpoch) /
                       m_epochs);
    }
    void onEpoch(const EpochEvent& e) override {
        if (m_next) m_next->onEpoch(e);
    }
    void onCheckpoint(const CheckpointEvent& e) override {
        if (m_next) m_next->onCheckpoint(e);
    }
    void onFinished(const FinishedEvent& e) override {
        if (m_next) m_next->onFinished(e);
    }
    void onError(const std::string& m) override {
        m_error = m;
        if (m_next) m_next->onError(m);
    }
    void onLog(const std::string& m) override {
        if (m_next) m_next->onLog(m);
    }
    void setEpochs(int epochs) { m_epochs = epochs; }
    const std::string& error() const { return m_error; }

private:
    TrainingObserver* m_next;
    std::function<void(double)> m_fraction;
    int m_epochs = 1;
    std::string m_error;
};

}  // namespace

const char* compressionKindName(CompressionVariant::Kind kind) {
    switch (kind) {
        case CompressionVariant::Kind::Original: return "original";
        case CompressionVariant::Kind::Sparse: return "sparse";
        case CompressionVariant::Kind::Structured: return "structured";
        case CompressionVariant::Kind::Int8: return "int8";
    }
    return "?";
}

namespace {

// The median of a pass's milliseconds (`once` times one), after 3 warm-up passes, repeated for about a quarter
// of a second (at least 5): the median resists a busy machine's outliers.
double medianMs(const std::function<double()>& once) {
    for (int i = 0; i < 3; ++i) once();
    std::vector<double> times;
    const auto start = Clock::now();
    while (times.size() < 5 ||
           (std::chrono::duration<double>(Clock::now() - start).count() < 0.25 && times.size() < 2000))
        times.push_back(once());
    std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
    return times[times.size() / 2];
}

}  // namespace

// What the timings feed a model: values in [0, 1); for a model whose input carries word ids (it feeds an Embedding:
// LayerType::inputDifferentiable), ids spread over 1 .. vocab - 1 instead, since those values would all round to
// id 0 (padding), and a batch of nothing but padding times masked-out work.
std::vector<float> timingInputs(const Project& project, const Shape& sample, int64_t batch) {
    std::vector<float> host(static_cast<size_t>(batch * sample.numel()));
    int64_t vocab = 0;
    const GraphAnalysis analysis = analyzeGraph(project.graph);
    for (const Edge& e : project.graph.edges()) {
        const LayerType* from = project.graph.layerType(e.from.node);
        if (from && from->isGraphInput() && readsIds(project.graph, e) && analysis.params.count(e.to.node))
            vocab = std::max<int64_t>(vocab, analysis.params.at(e.to.node).value("vocab", int64_t{0}));
    }
    for (size_t i = 0; i < host.size(); ++i) {
        const uint64_t mixed = (i * 2654435761u) % 1000;
        host[i] = vocab > 1 ? static_cast<float>(1 + mixed % static_cast<uint64_t>(vocab - 1))
                            : static_cast<float>(mixed) / 1000.0f;
    }
    return host;
}

double timeForwardMs(const Project& project, const Weights& weights, int64_t batch, int threads, bool fold) {
    BackendOptions options;
    options.threads = threads;
    auto backend = backendRegistry().create(Device::cpu(), options);
    // As Predict runs it: BatchNorm folded into the layer before it.
    ExportModel inference;
    inference.project = project;
    inference.weights = weights;
    auto model = compileExportModel(fold ? foldBatchNorm(inference) : inference, *backend);
    const std::vector<float> host = timingInputs(project, model->inputShape(), batch);
    const Tensor x = backend->fromHost(model->inputShape().withBatch(batch), host.data());
    auto once = [&] {
        const auto t0 = Clock::now();
        model->forward(x, false);
        backend->synchronize();
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    return medianMs(once);
}

double timeInt8Ms(Int8Engine& engine, const Project& project, int64_t batch) {
    const std::vector<float> host = timingInputs(project, engine.inputShape(), batch);
    return medianMs([&] {
        const auto t0 = Clock::now();
        engine.run(host.data(), batch, static_cast<int>(batch));
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    });
}

struct CompressionStudy::Impl {
    CompressionStudy& s;
    const CompressionRequest& r;
    Checkpoint source;
    DatasetBundle data;
    int64_t samples = 0;
    int stages = 1, stage = 0;

    void progress(const std::string& text, double within = 0.0) {
        if (s.m_progress) s.m_progress(text, std::min(1.0, (stage + within) / stages));
    }

    double accuracyOf(const std::vector<float>& outputs, int classes) const {
        const std::vector<int32_t> predicted = argmaxRows(outputs.data(), samples, classes);
        int64_t correct = 0;
        for (int64_t i = 0; i < samples; ++i)
            correct += predicted[static_cast<size_t>(i)] == data.validation.labels[static_cast<size_t>(i)];
        return static_cast<double>(correct) / static_cast<double>(samples);
    }

    // Accuracy, parameters, sparsity, ONNX sizes and timings of a float model.
    CompressionVariant measureFloat(CompressionVariant v, const Checkpoint& c, const std::string& dir) {
        const ExportModel m = exportModelFromCheckpoint(c);
        BackendOptions options;
        options.threads = r.threads;
        auto backend = backendRegistry().create(Device::cpu(), options);
        auto model = compileExportModel(m, *backend);
        const Predictions p = predictSamples(*model, data.validation.inputs.data(), samples);
        v.samples = samples;
        v.accuracy = accuracyOf(p.outputs, p.classes);
        for (const auto& [name, values] : m.weights) {
            v.parameters += static_cast<int64_t>(values.size());
            v.nonZero += static_cast<int64_t>(values.size()) - std::count(values.begin(), values.end(), 0.0f);
        }
        v.layers = weightSparsity(m.project.graph, m.weights);
        fs::create_directories(dir);
        v.onnxFile = (fs::path(dir) / "model.onnx").string();
        writeOnnx(v.onnxFile, m);
        v.fileBytes = fs::file_size(v.onnxFile);
        v.compressedBytes = deflatedSize(v.onnxFile);
        v.timed = true;
        v.msPerBatch1 = timeForwardMs(m.project, m.weights, 1, r.threads);
        v.msPerBatch256 = timeForwardMs(m.project, m.weights, 256, r.threads);
        return v;
    }

    // The int8 QDQ file of a float variant, measured through the file.
    CompressionVariant measureInt8(const CompressionVariant& from, const Checkpoint& c, const std::string& dir) {
        CompressionVariant v;
        v.kind = CompressionVariant::Kind::Int8;
        v.name = from.kind == CompressionVariant::Kind::Original ? "int8" : from.name + " + int8";
        v.checkpoint = from.checkpoint;
        const ExportModel m = exportModelFromCheckpoint(c);
        ExportRequest request;
        request.precision = ExportPrecision::Int8;
        fs::create_directories(dir);
        v.onnxFile = (fs::path(dir) / "model-int8.onnx").string();
        writeExport(v.onnxFile, m, request, &data.train, r.quantization);
        const ExportModel file = loadModelFile(v.onnxFile);
        const std::vector<float> out = simulateInt8(file, file.int8Activations, data.validation.inputs.data(), samples);
        v.samples = samples;
        v.accuracy = accuracyOf(out, static_cast<int>(out.size() / static_cast<size_t>(samples)));
        v.parameters = from.parameters;
        v.nonZero = from.nonZero;
        v.layers = from.layers;
        v.fileBytes = fs::file_size(v.onnxFile);
        v.compressedBytes = deflatedSize(v.onnxFile);
        // Timed in the int8 engine (the file's integer arithmetic on VNNI kernels, oneDNN's and Strata's), where it
        // runs.
        try {
            Int8Engine engine(file, file.int8Activations, r.threads);
            v.msPerBatch1 = timeInt8Ms(engine, file.project, 1);
            v.msPerBatch256 = timeInt8Ms(engine, file.project, 256);
            v.timed = true;
            v.note =
                "accuracy of the file's int8 arithmetic simulated in Strata; timed in Strata's int8 engine "
                "(VNNI kernels, oneDNN's and Strata's)";
        } catch (const std::exception& e) {
            v.note = std::string("accuracy of the file's int8 arithmetic simulated in Strata; not timed: ") + e.what() +
                     " (bench/compression_bench.py times the file in onnxruntime)";
        }
        return v;
    }

    // Plans, fine-tunes and loads one pruned variant; false when a stop request ended the fine-tuning.
    bool fineTune(const PruneOptions& o, const std::string& dir, const std::string& text, Checkpoint& result,
                  std::string& projectFile) {
        PrunePlan plan = planPruning(source, r.projectPath, o, dir);
        if (r.threads > 0) plan.project.training.threads = r.threads;
        plan.project.training.device = "cpu";
        writePrunePlan(plan);
        projectFile = plan.projectFile;
        FineTuneEvents events(s.m_training, [&](double f) { progress(text, 0.9 * f); });
        events.setEpochs(o.fineTuneEpochs);
        auto backend = backendRegistry().create(Device::cpu(), backendOptionsFor(plan.project.training));
        TrainerOptions options = plan.trainer;
        options.projectPath = plan.projectFile;
        options.telemetryIntervalMs = 0;
        bool ok = false;
        {
            Trainer trainer(plan.project, *backend, &events, std::move(options));
            {
                std::lock_guard lock(s.m_trainerMutex);
                s.m_trainer = &trainer;
            }
            if (s.m_stop) trainer.requestStop();
            ok = trainer.run();
            std::lock_guard lock(s.m_trainerMutex);
            s.m_trainer = nullptr;
        }
        if (!ok) throw std::runtime_error(text + ": " + events.error());
        if (s.m_stop) return false;
        result = loadCheckpoint(plan.project.training.checkpointDir);
        return true;
    }

    std::vector<CompressionVariant> run() {
        if (r.outputDir.empty()) throw std::invalid_argument("no output folder for the compressed variants");
        for (double sp : r.sparsities)
            if (!(sp > 0.0 && sp < 1.0))
                throw std::invalid_argument("a sparsity target must be above 0 and below 1, got " + std::to_string(sp));
        const std::string file = resolveCheckpointPath(r.checkpoint);
        source = loadCheckpoint(file);
        const size_t pruned = r.sparsities.size() + (r.structuredFraction > 0 ? 1 : 0);
        stages = 1 + static_cast<int>(pruned) * 2 + (r.int8 ? static_cast<int>(pruned) + 1 : 0);
        progress("loading the data");
        data = loadDataset(source.project.dataset, r.projectPath);
        if (data.validation.count == 0)
            throw std::invalid_argument("the project has no validation split to measure the variants on");
        samples =
            r.evaluationSamples > 0 ? std::min(r.evaluationSamples, data.validation.count) : data.validation.count;

        std::vector<CompressionVariant> out;
        auto emit = [&](const CompressionVariant& v) {
            out.push_back(v);
            if (s.m_variant) s.m_variant(v);
        };
        std::vector<std::pair<CompressionVariant, Checkpoint>> floats;
        progress("measuring the original");
        CompressionVariant original;
        original.name = "original";
        original.checkpoint = file;
        original = measureFloat(original, source, (fs::path(r.outputDir) / "original").string());
        emit(original);
        floats.emplace_back(original, source);
        ++stage;

        std::vector<std::pair<PruneOptions, std::string>> runs;
        for (double sp : r.sparsities) {
            PruneOptions o;
            o.sparsity = sp;
            o.scope = r.scope;
            o.fineTuneEpochs = r.fineTuneEpochs;
            runs.emplace_back(o, percentText(sp) + " sparse");
        }
        if (r.structuredFraction > 0) {
            PruneOptions o;
            o.sparsity = r.structuredFraction;
            o.structured = true;
            o.fineTuneEpochs = r.fineTuneEpochs;
            runs.emplace_back(o, "structured " + percentText(r.structuredFraction));
        }
        for (const auto& [o, name] : runs) {
            if (s.m_stop) return out;
            const std::string dir = (fs::path(r.outputDir) / (o.structured ? "structured-" : "sparse-")).string() +
                                    std::to_string(static_cast<int>(std::lround(o.sparsity * 100)));
            Checkpoint result;
            std::string projectFile;
            if (!fineTune(o, dir, "fine-tuning " + name, result, projectFile)) return out;
            ++stage;
            progress("measuring " + name);
            CompressionVariant v;
            v.name = name;
            v.kind = o.structured ? CompressionVariant::Kind::Structured : CompressionVariant::Kind::Sparse;
            v.checkpoint = resolveCheckpointPath(dir);
            v.projectFile = projectFile;
            v = measureFloat(v, result, dir);
            if (!o.structured)
                v.note =
                    "zeros stored as float32: the ONNX file is as large as the original's until compressed, and "
                    "Strata's dense kernels take as long";
            emit(v);
            floats.emplace_back(v, result);
            ++stage;
        }
        if (r.int8) {
            for (const auto& [v, c] : floats) {
                if (s.m_stop) return out;
                progress("int8 of " + v.name);
                emit(measureInt8(v, c, fs::path(v.onnxFile).parent_path().string()));
                ++stage;
            }
        }
        progress("done", 0);
        return out;
    }
};

CompressionStudy::CompressionStudy(CompressionRequest request, Progress progress, VariantReady variant,
                                   TrainingObserver* training)
    : m_request(std::move(request)),
      m_progress(std::move(progress)),
      m_variant(std::move(variant)),
      m_training(training) {}

CompressionStudy::~CompressionStudy() = default;

std::vector<CompressionVariant> CompressionStudy::run() {
    Impl impl{*this, m_request, {}, {}, 0, 1, 0};
    return impl.run();
}

void CompressionStudy::requestStop() {
    m_stop = true;
    std::lock_guard lock(m_trainerMutex);
    if (m_trainer) m_trainer->requestStop();
}

}  // namespace strata
