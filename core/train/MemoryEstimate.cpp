// MemoryEstimate: see MemoryEstimate.h. Every count here follows an allocation in Model.cpp (compile,
// packParameters, allocateFor), Optimizer.cpp, BatchStager.cpp or BatchLoss.cpp; change them together.
#include "core/train/MemoryEstimate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "core/layers/Layer.h"
#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

constexpr uint64_t kFloat = 4;

// Packed blocks start each tensor on a 64-element boundary (Model.cpp alignUp).
int64_t alignUp(int64_t elements) { return (elements + 63) / 64 * 64; }

// CpuMemoryBackend rounds an allocation up to 64 bytes.
uint64_t cpuAllocation(uint64_t bytes) { return (std::max<uint64_t>(bytes, 4) + 63) / 64 * 64; }

bool isCudaDevice(const std::string& device) { return device.rfind("cuda", 0) == 0; }

struct StepInfo {
    const LayerType* type = nullptr;
    LayerCost cost;
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;  // indices into the steps
    Shape out;
    bool isInput = false, needsGrad = false, fused = false, reluAbsorbed = false;
    bool doesReLUBackward = false;    // does its fused ReLU's backward: no output gradient of its own
    bool backwardInProducer = false;  // a fused ReLU whose backward its producer does
    bool gradOverwritten = false;     // written by its first writer in backward: allocated apart, not zeroed
};

}  // namespace

MemoryEstimate estimateTrainingMemory(const Graph& graph, const TrainingSettings& training, int64_t batch) {
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) {
        const Problem& p = analysis.problems.front();
        throw GraphError(p.node, p.port, p.message);
    }
    batch = std::max<int64_t>(batch, 1);
    MemoryEstimate e;
    e.batch = batch;
    // Each allocation as the device's allocator sizes it.
    const bool cuda = isCudaDevice(training.device);
    const auto allocation = [cuda](uint64_t bytes) { return cuda ? cudaAllocationClass(bytes) : cpuAllocation(bytes); };
    bool convolution = false;

    // The steps as compile builds them.
    const std::vector<int> order = graph.topologicalOrder();
    std::map<int, int> stepOf;
    std::vector<StepInfo> steps(order.size());
    std::vector<int> consumers(order.size(), 0);
    uint64_t individualValues = 0, individualGrads = 0, nonTrainable = 0;
    int64_t packed = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        const int id = order[i];
        StepInfo& s = steps[i];
        s.type = layerRegistry().find(graph.node(id)->type);
        const Json& params = analysis.params.at(id);
        std::vector<Shape> inShapes;
        for (const std::string& port : s.type->inputPorts(params)) {
            const auto edge = graph.edgeInto({id, port});
            if (!edge) throw GraphError(id, port, graph.node(id)->name + ": input '" + port + "' is not connected");
            const int producer = stepOf.at(edge->from.node);
            s.inputs.push_back(producer);
            consumers[static_cast<size_t>(producer)]++;
            inShapes.push_back(*analysis.shapeOf(edge->from.node));
        }
        s.out = *analysis.shapeOf(id);
        s.isInput = s.inputs.empty();
        s.layer = s.type->create(params, inShapes, s.out);
        s.cost = s.type->cost(params, inShapes, s.out);
        convolution = convolution || s.cost.convolution;
        bool trainable = false;
        uint64_t layerBytes = 0;
        for (const ParameterSpec& spec : s.type->parameterSpecs(params, inShapes)) {
            const auto n = static_cast<uint64_t>(spec.shape.numel());
            layerBytes += n * kFloat;
            individualValues += allocation(n * kFloat);
            if (spec.trainable && graph.node(id)->trainable) {  // a frozen node's weights: no gradient
                individualGrads += allocation(n * kFloat);
                packed = alignUp(packed) + spec.shape.numel();
                trainable = true;
            } else {
                nonTrainable += allocation(n * kFloat);
            }
        }
        if (layerBytes > e.largestParameterBytes) {
            e.largestParameterBytes = layerBytes;
            e.largestParameterLayer = graph.node(id)->name;
        }
        s.needsGrad = trainable;
        for (int in : s.inputs) s.needsGrad = s.needsGrad || steps[static_cast<size_t>(in)].needsGrad;
        stepOf[id] = static_cast<int>(i);
    }
    // compile's fusion (fuse = true, what the Trainer uses).
    for (StepInfo& s : steps) {
        if (s.isInput || s.inputs.size() != 1 || s.type->activation() != Activation::ReLU) continue;
        StepInfo& from = steps[static_cast<size_t>(s.inputs[0])];
        if (!from.isInput && consumers[static_cast<size_t>(s.inputs[0])] == 1 && from.layer->fuseReLU()) s.fused = true;
    }
    for (StepInfo& s : steps) {
        if (s.isInput || s.inputs.size() != 1) continue;
        StepInfo& relu = steps[static_cast<size_t>(s.inputs[0])];
        if (relu.isInput || relu.type->activation() != Activation::ReLU ||
            consumers[static_cast<size_t>(s.inputs[0])] != 1)
            continue;
        if (s.layer->absorbReLUBackward()) relu.reluAbsorbed = true;
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
        StepInfo& relu = steps[i];
        if (!relu.fused || relu.reluAbsorbed) continue;
        StepInfo& from = steps[static_cast<size_t>(relu.inputs[0])];
        if (from.needsGrad && from.layer->absorbFusedReLUBackward()) from.doesReLUBackward = true;
        relu.backwardInProducer = from.doesReLUBackward;
    }
    // A gradient its first writer in backward (its last consumer) writes on one port (Model::portsWriting).
    auto portsWriting = [&](const StepInfo& s, size_t target) {
        int ports = 0, first = -1;
        if (s.isInput || !s.needsGrad || s.reluAbsorbed || s.backwardInProducer) return std::pair{0, -1};
        for (size_t k = 0; k < s.inputs.size(); ++k) {
            const StepInfo& in = steps[static_cast<size_t>(s.inputs[k])];
            const size_t written = static_cast<size_t>(in.reluAbsorbed ? in.inputs[0] : s.inputs[k]);
            if (written == target && steps[written].needsGrad && s.type->inputDifferentiable(static_cast<int>(k))) {
                if (ports++ == 0) first = static_cast<int>(k);
            }
        }
        return std::pair{ports, first};
    };
    for (size_t t = 0; t + 1 < steps.size(); ++t) {
        StepInfo& grad = steps[t];
        if (grad.isInput || !grad.needsGrad || grad.reluAbsorbed || grad.doesReLUBackward) continue;
        for (size_t w = steps.size(); w-- > t + 1;) {
            const auto [ports, first] = portsWriting(steps[w], t);
            if (ports == 0) continue;
            grad.gradOverwritten = ports == 1 && first < 32 && steps[w].layer->overwritesInputGradient();
            break;
        }
    }

    const uint64_t packedBytes = packed > 0 ? allocation(static_cast<uint64_t>(packed) * kFloat) : 0;
    const bool sgd = training.optimizer == OptimizerKind::Sgd;
    const int slots = (!sgd || training.momentum != 0.0 ? 1 : 0) + (!sgd ? 1 : 0);
    e.parameters = packedBytes + nonTrainable;
    e.gradients = packedBytes;
    e.optimizerState = static_cast<uint64_t>(slots) * packedBytes;
    // packParameters: the individual values and gradients, then both packed blocks; then the individual
    // trainable ones are released.
    e.compilePeak = individualValues + individualGrads + 2 * packedBytes;

    // Model::allocateFor: outputs per step (a fused ReLU shares its producer's), output gradients in one
    // block (aligned), the last step's gradient apart (it is the loss's dlogits, counted below).
    int64_t gradBlock = 0;
    uint64_t outputs = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        const StepInfo& s = steps[i];
        if (s.isInput) continue;
        const int64_t n = s.out.numel() * batch;
        if (!s.fused) outputs += allocation(static_cast<uint64_t>(n) * kFloat);
        const bool last = i + 1 == steps.size();
        if (s.needsGrad && !s.reluAbsorbed && !s.doesReLUBackward && !last) {
            if (s.gradOverwritten)
                outputs += allocation(static_cast<uint64_t>(n) * kFloat);  // its own buffer, beside the block
            else
                gradBlock = alignUp(gradBlock) + n;
        }
        if (static_cast<uint64_t>(n) * kFloat > e.largestLayerBytes) {
            e.largestLayerBytes = static_cast<uint64_t>(n) * kFloat;
            e.largestLayer = graph.node(order[i])->name;
        }
    }
    e.activations = outputs + (gradBlock > 0 ? allocation(static_cast<uint64_t>(gradBlock) * kFloat) : 0);
    const StepInfo& inputStep = steps.front();
    const int64_t inputNumel = inputStep.out.numel();
    const int64_t outputNumel = steps.back().out.numel();
    // BatchStager: two input and two label buffers; BatchLoss: loss per sample, dlogits, one-hot targets
    // (MSE, BCE).
    uint64_t buffers = 2 * allocation(static_cast<uint64_t>(inputNumel * batch) * kFloat) +
                       2 * allocation(static_cast<uint64_t>(batch) * 4) +
                       allocation(static_cast<uint64_t>(batch) * kFloat) +
                       allocation(static_cast<uint64_t>(outputNumel * batch) * kFloat);
    if (training.loss != LossKind::CrossEntropy)
        buffers += allocation(static_cast<uint64_t>(outputNumel * batch) * kFloat);
    // Scratch a layer allocates itself (LayerCost: attention's scores and probabilities, a Conv1D's padded
    // layout); the other layers' own buffers are per-row statistics, too small to count.
    for (const StepInfo& s : steps) {
        if (s.isInput) continue;
        std::vector<int64_t> floats = s.cost.scratchFloats;
        if (steps[static_cast<size_t>(s.inputs[0])].needsGrad)
            floats.insert(floats.end(), s.cost.inputGradientScratchFloats.begin(),
                          s.cost.inputGradientScratchFloats.end());
        for (int64_t n : floats) buffers += allocation(static_cast<uint64_t>(n * batch) * kFloat);
    }
    e.buffers = buffers;
    // cuDNN's convolution workspace: at most CudaBackend's limit; the algorithm, and so the size, is chosen on
    // the device at the first step, so the bound is counted.
    e.workspace = cuda && convolution ? kCudaConvWorkspaceLimit : 0;
    e.trainingPeak = e.parameters + e.gradients + e.optimizerState + e.activations + e.buffers + e.workspace;
    e.deviceBytes = std::max(e.compilePeak, e.trainingPeak);
    // CPU bf16 (core/backend/CpuBf16.h), host memory beside the Backend's: oneDNN keeps per convolution bf16
    // copies of its input and of its output gradient in two roles each (forward and backward data; backward
    // weights), GEMMs convert op(A) and op(B) into two bf16 buffers as large as the largest operand, and the
    // weights are converted on every use (at most all of them at once).
    if (!cuda && training.precision == ComputePrecision::BF16) {
        constexpr uint64_t kBf16 = 2;
        uint64_t convolutionCopies = 0, largest = 0;
        for (const StepInfo& s : steps) {
            if (s.isInput) continue;
            const auto in = static_cast<uint64_t>(steps[static_cast<size_t>(s.inputs[0])].out.numel() * batch);
            const auto out = static_cast<uint64_t>(s.out.numel() * batch);
            if (s.cost.convolution) convolutionCopies += 2 * kBf16 * (in + out);
            largest = std::max({largest, in, out});
        }
        e.lowPrecisionHostBytes = convolutionCopies + 2 * kBf16 * largest + e.parameters / 2;
    }
    // DataLoader: three batches on its thread and the consumer's (input floats and labels).
    e.loaderHostBytes = 4 * static_cast<uint64_t>(batch) * (static_cast<uint64_t>(inputNumel) * kFloat + 4);

    // The linear model of the training peak, for largestBatch: per-sample bytes from the batch-dependent
    // part (alignment makes it slightly less than exact; largestBatchThatFits checks its answer).
    const uint64_t perSample = (e.activations + e.buffers) / static_cast<uint64_t>(batch);
    e.perSampleBytes = perSample;
    e.fixedBytes = e.parameters + e.gradients + e.optimizerState + e.workspace;
    return e;
}

int64_t largestBatchThatFits(const Graph& graph, const TrainingSettings& training, uint64_t availableBytes, bool cpu,
                             int64_t maxBatch) {
    const MemoryEstimate one = estimateTrainingMemory(graph, training, 1);
    if (one.totalOn(cpu) > availableBytes) return 0;
    // The estimate grows with the batch: bisect.
    int64_t lo = 1, hi = std::max<int64_t>(maxBatch, 1);
    if (estimateTrainingMemory(graph, training, hi).totalOn(cpu) <= availableBytes) return hi;
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (estimateTrainingMemory(graph, training, mid).totalOn(cpu) <= availableBytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

MemoryEstimate checkTrainingFits(const Graph& graph, const TrainingSettings& training, const std::string& device,
                                 uint64_t availableBytes) {
    const bool cpu = device == "cpu";
    MemoryEstimate e = estimateTrainingMemory(graph, training, training.batchSize);
    const uint64_t need = e.totalOn(cpu);
    if (availableBytes == 0 || need <= availableBytes) return e;
    std::string msg =
        "the run does not fit on " + device + ": training with batch " + std::to_string(e.batch) + " needs about " +
        formatBytes(need) + " (parameters " + formatBytes(e.parameters) + ", gradients " + formatBytes(e.gradients) +
        ", optimizer state " + formatBytes(e.optimizerState) + ", activations " + formatBytes(e.activations) +
        ", buffers " + formatBytes(e.buffers) +
        (e.workspace > 0 ? ", cuDNN workspace up to " + formatBytes(e.workspace) : std::string()) +
        (cpu ? ", loader " + formatBytes(e.loaderHostBytes) : std::string()) +
        (cpu && e.lowPrecisionHostBytes > 0 ? ", bf16 copies " + formatBytes(e.lowPrecisionHostBytes) : std::string()) +
        ") and " + formatBytes(availableBytes) + " is available";
    const int64_t fits = largestBatchThatFits(graph, training, availableBytes, cpu, e.batch);
    if (fits > 0)
        msg += "; batch size " + std::to_string(fits) + " fits";
    else
        msg += "; not even a batch of 1 fits: the parameters take " + formatBytes(e.parameters) + ", the most in '" +
               e.largestParameterLayer + "' (" + formatBytes(e.largestParameterBytes) + "): make it smaller";
    throw std::runtime_error(msg);
}

std::string formatBytes(uint64_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
    else
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    return buf;
}

}  // namespace strata
