// Profile: see Profile.h.
#include "core/train/Profile.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/graph/Model.h"
#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
#include "core/layers/LayerRegistry.h"
#include "core/train/BatchLoss.h"
#include "core/train/BatchStager.h"
#include "core/train/DataParallel.h"
#include "core/train/LrSchedule.h"
#include "core/train/Optimizer.h"
#include "core/train/Precision.h"
#include "core/train/Trainer.h"
#include "core/train/TrainingStep.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string deviceName(const Backend& backend) {
    for (const DeviceInfo& d : backendRegistry().devices())
        if (d.device == backend.device()) return d.name;
    return backend.device().toString();
}

Json readCache(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Json::object();
    try {
        Json j = parseJson<Json>(readFileText(path, kMaxProjectFileBytes, "a roofline cache"), path);
        return j.is_object() ? j : Json::object();
    } catch (const std::exception&) {
        return Json::object();  // a damaged cache is measured again and rewritten
    }
}

}  // namespace

std::string defaultRooflineCachePath() {
    std::string base;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
        base = xdg;
    else if (const char* home = std::getenv("HOME"); home && home[0])
        base = std::string(home) + "/.cache";
    else
        base = ".";
    return base + "/strata/roofline.json";
}

Roofline deviceRoofline(Backend& backend, const std::string& cachePathIn, bool refresh) {
    const std::string cachePath = cachePathIn.empty() ? defaultRooflineCachePath() : cachePathIn;
    Roofline r;
    r.device = backend.name() + " " + backend.device().toString() + " " + deviceName(backend);
    Json cache = readCache(cachePath);
    if (!refresh && cache.contains(r.device)) {
        const Json& e = cache[r.device];
        if (e.contains("gflops") && e.contains("gbps") && e["gflops"].is_number() && e["gbps"].is_number()) {
            r.peakGflops = e["gflops"].get<double>();
            r.peakGBps = e["gbps"].get<double>();
            r.fromCache = true;
            return r;
        }
    }
    const bool cpu = backend.device().type == DeviceType::Cpu;
    // GEMM: square fp32, big enough to reach the library's peak (best of several runs).
    {
        const int n = cpu ? 1024 : 8192;
        Tensor a = backend.empty(Shape{n, n}), b = backend.empty(Shape{n, n}), c = backend.empty(Shape{n, n});
        backend.fill(a.f32(), 0.5f, int64_t(n) * n);
        backend.fill(b.f32(), 0.25f, int64_t(n) * n);
        double best = 1e30;
        for (int i = 0; i < (cpu ? 4 : 8); ++i) {
            backend.synchronize();
            const auto t = Clock::now();
            backend.gemm(false, false, n, n, n, 1.0f, a.f32(), n, b.f32(), n, 0.0f, c.f32(), n);
            backend.synchronize();
            if (i > 0) best = std::min(best, msSince(t));  // the first run warms caches and picks kernels
        }
        r.peakGflops = 2.0 * n * double(n) * n / (best * 1e-3) / 1e9;
    }
    // Copy: read and write of a buffer far larger than the caches.
    {
        const size_t bytes = cpu ? (size_t(128) << 20) : (size_t(1) << 30);
        void* src = backend.allocate(bytes);
        void* dst = backend.allocate(bytes);
        backend.zero(src, bytes);
        backend.zero(dst, bytes);
        double best = 1e30;
        for (int i = 0; i < 6; ++i) {
            backend.synchronize();
            const auto t = Clock::now();
            backend.copy(dst, src, bytes);
            backend.synchronize();
            if (i > 0) best = std::min(best, msSince(t));
        }
        backend.deallocate(src, bytes);
        backend.deallocate(dst, bytes);
        r.peakGBps = 2.0 * double(bytes) / (best * 1e-3) / 1e9;
    }
    cache[r.device] = Json{{"gflops", r.peakGflops}, {"gbps", r.peakGBps}};
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cachePath).parent_path(), ec);
    std::ofstream out(cachePath, std::ios::trunc);
    if (out) out << cache.dump(2) << "\n";  // an unwritable cache only means measuring again next time
    return r;
}

ProfileReport profileProject(const Project& projectIn, const std::string& projectPath, Backend& backend,
                             const ProfileOptions& options) {
    Project project = projectIn;
    if (options.batch > 0) project.training.batchSize = options.batch;
    const TrainingSettings& ts = project.training;
    if (options.steps < 1) throw std::invalid_argument("profile needs at least 1 step");

    ProfileReport report;
    report.device = backend.device().toString();
    report.deviceName = deviceName(backend);
    report.batch = ts.batchSize;
    report.steps = options.steps;

    const DatasetBundle data = loadDataset(project.dataset, projectPath);
    std::unique_ptr<Model> model = compile(project.graph, backend, ts.seed);
    const bool classes = data.task == TaskKind::Classification;
    if (!classes && model->outputShape() != data.train.targetShape)
        throw std::invalid_argument("the model's output is " + model->outputShape().toString() +
                                    " but the data's targets are " + data.train.targetShape.toString());
    if (classes && (model->outputShape().rank() != 1 || model->outputShape()[0] != data.numClasses))
        throw std::invalid_argument("the model's output is " + model->outputShape().toString() + " but the data has " +
                                    std::to_string(data.numClasses) + " classes: make it [" +
                                    std::to_string(data.numClasses) + "]");
    Optimizer optimizer(*model, ts);
    BatchStager stager(backend, model->inputShape(), ts.batchSize);
    stager.setUpTraining(data.train, trainingAugmentation(project.dataset, data.normalization), ts.seed,
                         ResidentData::Auto, int64_t(4) << 30, [](const std::string&) {});
    // The Trainer's step, with the run's loss, precision and optimizer; one process.
    BatchLoss batchLoss(backend, ts.loss, model->outputShape(), ts.batchSize, data.numClasses, data.task,
                        static_cast<float>(ts.huberDelta));
    const TrainerOptions defaults;
    Precision precision(backend, defaults.initialLossScale, defaults.lossScaleGrowthInterval);
    DataParallel alone;
    TrainingStep step(*model, optimizer, batchLoss, precision, alone, ts.clipNorm);

    int epoch = 1;
    stager.startTrainEpoch(epoch);
    Batch batch;
    auto nextBatch = [&]() -> BatchStager::Staged {
        if (!stager.nextTrainBatch(batch)) {
            stager.startTrainEpoch(++epoch);
            if (!stager.nextTrainBatch(batch)) throw std::invalid_argument("the training split is empty");
        }
        BatchStager::Staged s = stager.stageTrain(batch);
        backend.synchronize();
        return s;
    };
    // Layer times of the current timed step, by node, and their products' part.
    std::map<int, double> fwd, bwd, products;
    Clock::time_point layerStart;
    double productMs = 0, productsAtLayerStart = 0;  // the products' clock, running on timed steps
    auto hook = [&](int node, bool backward, bool begin) {
        backend.synchronize();
        if (begin) {
            layerStart = Clock::now();
            productsAtLayerStart = productMs;
            return;
        }
        (backward ? bwd : fwd)[node] += msSince(layerStart);
        products[node] += productMs - productsAtLayerStart;
    };
    // The clock is this function's: stopped however it ends.
    struct ClockOff {
        Backend& backend;
        ~ClockOff() { backend.setProductClock(nullptr); }
    } clockOff{backend};

    // Milliseconds from the step's start to the end of each of its phases; on a timed step, once the device has
    // done the phase's work.
    bool timed = false;
    Clock::time_point stepStart;
    std::array<double, kStepPhases> phaseEnd{};
    step.setPhaseHook([&](StepPhase p) {
        if (timed) backend.synchronize();
        phaseEnd[static_cast<size_t>(p)] = msSince(stepStart);
    });
    auto phaseMs = [&](StepPhase p) {
        const size_t i = static_cast<size_t>(p);
        return phaseEnd[i] - (i > 0 ? phaseEnd[i - 1] : 0.0);
    };

    std::vector<double> stepMs, dataMs, plainComputeMs, lossMs, optMs, computeMs, betweenMs, layersMs, productSteps;
    std::map<int, std::vector<double>> fwdSteps, bwdSteps, productLayerSteps;
    // Warm-up steps (plain), then timed and plain steps in turn so both see the same machine load.
    for (int i = 0; i < options.warmupSteps + 2 * options.steps; ++i) {
        timed = i >= options.warmupSteps && (i - options.warmupSteps) % 2 == 0;
        const bool measured = i >= options.warmupSteps;
        model->setLayerHook(timed ? Model::LayerHook(hook) : Model::LayerHook());
        fwd.clear();
        bwd.clear();
        products.clear();
        productMs = 0;
        backend.synchronize();
        const auto t0 = Clock::now();
        const BatchStager::Staged s = nextBatch();
        const double data = msSince(t0);
        backend.setProductClock(timed ? &productMs : nullptr);
        stepStart = Clock::now();
        const StepOutcome out = step.run(StepInput{.batch = batch,
                                                   .input = s.input,
                                                   .labels = s.labels,
                                                   .index = i,
                                                   .epoch = epoch,
                                                   .learningRate = learningRateAt(ts, i, stager.trainBatchesPerEpoch()),
                                                   .seed = stepSeed(ts.seed, i)});
        backend.synchronize();
        const double compute = msSince(stepStart);
        backend.setProductClock(nullptr);
        report.losses.push_back(out.loss);
        const double forwardTotal = phaseMs(StepPhase::Forward);
        const double backwardTotal = phaseMs(StepPhase::Backward);
        // The loss row: its forward and gradient, and the read-back of the step's loss sum and accuracy.
        const double lossTime = phaseMs(StepPhase::Loss) + phaseMs(StepPhase::Metrics);
        // The optimizer row: zeroing the gradients, and the update (with fp16's unscaling, and clipping, where
        // the run has them).
        const double optTime = phaseMs(StepPhase::ZeroGrad) + phaseMs(StepPhase::Update);
        if (!measured) continue;
        if (timed) {
            // What forward and backward did besides their layers' calls (Model's zeroing of the activation
            // gradients, the loop, the hook's own cost) is its own row, so the rows add up to the step.
            double layerFwd = 0, layerBwd = 0;
            for (const auto& [node, ms] : fwd) {
                fwdSteps[node].push_back(ms);
                layerFwd += ms;
            }
            for (const auto& [node, ms] : bwd) {
                bwdSteps[node].push_back(ms);
                layerBwd += ms;
            }
            for (const auto& [node, ms] : products) productLayerSteps[node].push_back(ms);
            productSteps.push_back(productMs);
            const double between = std::max(0.0, forwardTotal - layerFwd) + std::max(0.0, backwardTotal - layerBwd);
            lossMs.push_back(lossTime);
            optMs.push_back(optTime);
            betweenMs.push_back(between);
            layersMs.push_back(layerFwd + layerBwd);
            computeMs.push_back(layerFwd + layerBwd + between + lossTime + optTime);
        } else {
            stepMs.push_back(data + compute);
            dataMs.push_back(data);
            plainComputeMs.push_back(compute);
        }
    }
    model->setLayerHook({});

    report.lossMs = median(lossMs);
    report.optimizerMs = median(optMs);
    report.computeMs = median(computeMs);
    report.betweenLayersMs = median(betweenMs);
    report.layersMs = median(layersMs);
    report.stepMs = median(stepMs);
    report.dataWaitMs = median(dataMs);
    report.plainComputeMs = median(plainComputeMs);
    report.fastestComputeMs = *std::min_element(computeMs.begin(), computeMs.end());
    report.fastestPlainComputeMs = *std::min_element(plainComputeMs.begin(), plainComputeMs.end());
    report.overheadMs = std::max(0.0, report.stepMs - report.dataWaitMs - report.computeMs);
    report.productMs = median(productSteps);

    // Parameter values by node (read once forward; read and their gradients written backward).
    std::map<int, int64_t> paramNumel;
    for (const Model::NamedParameter& p : model->namedParameters()) paramNumel[p.node] += p.param->value.numel();
    const Graph& g = model->graph();
    for (int id : model->order()) {
        const Node* node = g.node(id);
        const LayerType* type = node ? layerRegistry().find(node->type) : nullptr;
        if (!type || type->isGraphInput()) continue;
        LayerProfile lp;
        lp.node = id;
        lp.name = node->name;
        lp.type = node->type;
        const Tensor* out = model->nodeOutput(id);
        const Shape outShape = out ? out->shape().dropFirst() : Shape();
        lp.outputShape = out ? out->shape().dropFirst().toString() : "?";
        lp.fused = !fwdSteps.count(id);
        lp.outputBlock = model->outputBlock(id);
        std::vector<Shape> inShapes;
        for (const std::string& port : g.inputPorts(id))
            if (const auto e = g.edgeInto({id, port}))
                if (const Tensor* t = model->nodeOutput(e->from.node)) inShapes.push_back(t->shape().dropFirst());
        // The layer's own estimate per sample, times the batch; its parameters once per call.
        const LayerCost cost = type->cost(type->normalizeParams(node->params), inShapes, outShape);
        const double n = static_cast<double>(ts.batchSize), param = 4.0 * static_cast<double>(paramNumel[id]);
        lp.absorbed = !bwdSteps.count(id);
        lp.forwardMs = median(fwdSteps[id]);
        lp.backwardMs = median(bwdSteps[id]);
        // Work done inside another layer's call is counted there.
        lp.forwardGflop = lp.fused ? 0 : n * cost.forwardFlops / 1e9;
        lp.backwardGflop = lp.absorbed ? 0 : n * cost.backwardFlops / 1e9;
        lp.bytesMoved =
            (lp.fused ? 0 : n * cost.forwardBytes + param) + (lp.absorbed ? 0 : n * cost.backwardBytes + 2 * param);
        const double s = (lp.forwardMs + lp.backwardMs) * 1e-3;
        if (s > 0) {
            lp.gflops = (lp.forwardGflop + lp.backwardGflop) / s;
            lp.gbps = lp.bytesMoved / s / 1e9;
        }
        lp.share = report.computeMs > 0 ? (lp.forwardMs + lp.backwardMs) / report.computeMs : 0;
        lp.productMs = median(productLayerSteps[id]);
        report.layers.push_back(lp);
    }
    if (options.measureRoofline) report.roofline = deviceRoofline(backend, options.rooflineCache);
    return report;
}

Json profileToJson(const ProfileReport& r) {
    Json layers = Json::array();
    for (const LayerProfile& l : r.layers)
        layers.push_back({{"node", l.node},
                          {"name", l.name},
                          {"type", l.type},
                          {"output_shape", l.outputShape},
                          {"fused", l.fused},
                          {"output_block", l.outputBlock},
                          {"absorbed", l.absorbed},
                          {"forward_ms", l.forwardMs},
                          {"backward_ms", l.backwardMs},
                          {"forward_gflop", l.forwardGflop},
                          {"backward_gflop", l.backwardGflop},
                          {"bytes", l.bytesMoved},
                          {"gflops", l.gflops},
                          {"gbps", l.gbps},
                          {"share", l.share},
                          {"product_ms", l.productMs}});
    return Json{{"device", r.device},
                {"device_name", r.deviceName},
                {"batch", r.batch},
                {"steps", r.steps},
                {"layers", layers},
                {"loss_ms", r.lossMs},
                {"optimizer_ms", r.optimizerMs},
                {"between_layers_ms", r.betweenLayersMs},
                {"layers_ms", r.layersMs},
                {"compute_ms", r.computeMs},
                {"step_ms", r.stepMs},
                {"data_wait_ms", r.dataWaitMs},
                {"overhead_ms", r.overheadMs},
                {"plain_compute_ms", r.plainComputeMs},
                {"fastest_compute_ms", r.fastestComputeMs},
                {"fastest_plain_compute_ms", r.fastestPlainComputeMs},
                {"product_ms", r.productMs},
                {"roofline",
                 {{"device", r.roofline.device},
                  {"peak_gflops", r.roofline.peakGflops},
                  {"peak_gbps", r.roofline.peakGBps},
                  {"cached", r.roofline.fromCache}}}};
}

std::string formatProfile(const ProfileReport& r) {
    std::ostringstream s;
    char line[512];
    s << "profile on " << r.device << " (" << r.deviceName << "), batch " << r.batch << ", median of " << r.steps
      << " timed and " << r.steps << " plain steps\n";
    if (r.roofline.peakGflops > 0) {
        std::snprintf(line, sizeof line, "roofline: %.1f GFLOP/s (GEMM), %.1f GB/s (copy)%s; ridge %.1f FLOP/byte\n",
                      r.roofline.peakGflops, r.roofline.peakGBps, r.roofline.fromCache ? ", cached" : "",
                      r.roofline.peakGflops / std::max(1e-9, r.roofline.peakGBps));
        s << line;
    }
    std::snprintf(line, sizeof line, "%-16s %-14s %-14s %9s %9s %6s %6s %9s %9s %8s %8s\n", "LAYER", "TYPE", "OUTPUT",
                  "FWD ms", "BWD ms", "SHARE", "PROD", "GFLOP", "MB", "GFLOP/s", "GB/s");
    s << line;
    for (const LayerProfile& l : r.layers) {
        char fwdText[32];
        if (l.fused)
            std::snprintf(fwdText, sizeof fwdText, "%s", "fused");  // its forward's time is its producer's
        else
            std::snprintf(fwdText, sizeof fwdText, "%.3f", l.forwardMs);
        char bwdText[32];
        if (l.absorbed)  // done by the pooling after it or the layer before
            std::snprintf(bwdText, sizeof bwdText, "%s", "absorbed");
        else
            std::snprintf(bwdText, sizeof bwdText, "%.3f", l.backwardMs);
        // PROD: the part of the layer's time in matrix products and convolutions.
        const double layerMs = l.forwardMs + l.backwardMs;
        std::snprintf(line, sizeof line, "%-16s %-14s %-14s %9s %9s %5.1f%% %5.0f%% %9.4f %9.2f %8.1f %8.1f\n",
                      l.name.substr(0, 16).c_str(), l.type.substr(0, 14).c_str(), l.outputShape.substr(0, 14).c_str(),
                      fwdText, bwdText, 100 * l.share, layerMs > 0 ? 100 * std::min(1.0, l.productMs / layerMs) : 0.0,
                      l.forwardGflop + l.backwardGflop, l.bytesMoved / 1e6, l.gflops, l.gbps);
        s << line;
    }
    std::snprintf(line, sizeof line, "%-46s %9.3f %9s %5.1f%%\n", "(between layers: activation-gradient zeroing)",
                  r.betweenLayersMs, "", r.computeMs > 0 ? 100 * r.betweenLayersMs / r.computeMs : 0.0);
    s << line;
    std::snprintf(line, sizeof line, "%-46s %9.3f %9s %5.1f%%\n", "(loss)", r.lossMs, "",
                  r.computeMs > 0 ? 100 * r.lossMs / r.computeMs : 0.0);
    s << line;
    std::snprintf(line, sizeof line, "%-46s %9.3f %9s %5.1f%%\n", "(optimizer: zero grad + update)", r.optimizerMs, "",
                  r.computeMs > 0 ? 100 * r.optimizerMs / r.computeMs : 0.0);
    s << line;
    std::snprintf(line, sizeof line,
                  "step %.3f ms = compute %.3f ms (%.1f%%) + data wait %.3f ms (%.1f%%) + framework overhead %.3f ms "
                  "(%.1f%%)\n",
                  r.stepMs, r.computeMs, 100 * r.computeMs / std::max(1e-9, r.stepMs), r.dataWaitMs,
                  100 * r.dataWaitMs / std::max(1e-9, r.stepMs), r.overheadMs,
                  100 * r.overheadMs / std::max(1e-9, r.stepMs));
    s << line;
    // Amdahl's bound for a product precision: the rest of the step runs the same in any.
    if (r.computeMs > 0) {
        const double products = std::min(r.productMs, r.computeMs), rest = r.computeMs - products;
        if (rest > 0) {
            std::snprintf(line, sizeof line,
                          "products (matrix products and convolutions): %.3f of %.3f ms (%.1f%%); the other %.3f ms "
                          "are the same in any compute precision: the step at most %.2fx faster with products twice "
                          "as fast, %.2fx with free products\n",
                          products, r.computeMs, 100 * products / r.computeMs, rest,
                          r.computeMs / (rest + products / 2), r.computeMs / rest);
            s << line;
        }
    }
    // Which layers' outputs the convolutions read and write without reordering (compile's layout pass).
    int blocked = 0, block = 0;
    for (const LayerProfile& l : r.layers)
        if (l.outputBlock > 0) ++blocked, block = l.outputBlock;
    if (blocked > 0)
        s << "layout: " << blocked << " of " << r.layers.size() << " layers' outputs kept blocked by " << block
          << " channels (nChw" << block << "c) between layers; the others NCHW\n";
    return s.str();
}

}  // namespace strata
