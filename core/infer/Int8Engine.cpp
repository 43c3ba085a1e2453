#include "core/infer/Int8Engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/backend/BackendChecks.h"
#include "core/backend/BackendRegistry.h"
#include "core/backend/CpuInt8.h"

namespace strata {

namespace {

// A node's output as the engine holds it: uint8 on its grid or float32, for `batch` samples, NHWC when `nhwc`
// (a [C, H, W] value, or the Flatten of one: `flatFrom` is then that [C, H, W]).
struct Value {
    int buffer = -1;  // index into Impl::buffers
    Shape shape;      // per sample, in the graph's (NCHW) terms
    bool quantized = false;
    ActivationQuant q;
    bool nhwc = false;
    Shape flatFrom;
};

struct Buffer {
    std::vector<uint8_t> u8;
    std::vector<float> f32;
};

cpu::Grid gridOf(const ActivationQuant& q) { return {q.scale, q.zeroPoint}; }
uint8_t quantize(float x, const ActivationQuant& q) { return cpu::onGrid(x, gridOf(q)); }
float dequantize(uint8_t v, const ActivationQuant& q) { return float(int(v) - q.zeroPoint) * q.scale; }

std::pair<int, int> pairOf(const Json& params, const char* key, std::pair<int, int> fallback) {
    if (!params.contains(key)) return fallback;
    const Json& v = params.at(key);
    if (v.is_number()) return {v.get<int>(), v.get<int>()};
    if (!v.is_array() || v.empty()) return fallback;
    if (v.size() == 1) return {v[0].get<int>(), v[0].get<int>()};
    return {v[0].get<int>(), v[1].get<int>()};
}

// Whether idle OpenMP workers spin before they sleep (libgomp: GOMP_SPINCOUNT, else OMP_WAIT_POLICY, else its
// default, which spins). strata-train and the benchmarks spin briefly (app/OpenMpWaitPolicy.h); the GUI does not.
bool openMpWorkersSpin() {
    if (const char* spin = std::getenv("GOMP_SPINCOUNT")) {
        const std::string text = spin;
        return text.rfind("inf", 0) == 0 || std::atoll(spin) >= 1000;
    }
    if (const char* policy = std::getenv("OMP_WAIT_POLICY"))
        return std::string(policy) != "passive" && std::string(policy) != "PASSIVE";
    return true;
}

// The smallest step (multiply-adds of a convolution or matmul; values of an element-wise step or a pooling) worth a
// second thread; smaller ones run on one. Measured (bench_int8, quiet 2-core VM, batch 1, 2 threads): with workers
// that spin, threads everywhere took fashion_cnn_bn from 0.064 to 0.043 ms a pass and the residual template from
// 0.041 to 0.031; with workers that sleep (GOMP_SPINCOUNT=0), every wake costs tens of microseconds: 0.35 and 0.38
// ms against 0.064 and 0.041 with one thread below 8 M multiply-adds (the largest convolution at batch 1 is 7.2 M)
// and 256 K values.
struct SmallSteps {
    double macs, values;
};
SmallSteps smallSteps() {
    static const SmallSteps s = openMpWorkersSpin() ? SmallSteps{1 << 16, 1 << 12} : SmallSteps{1 << 23, 1 << 18};
    return s;
}
int threadsFor(int threads, double work, double small) { return work < small ? 1 : threads; }

}  // namespace

// A node with no integer path, run by its own Layer in float32 (see Int8Engine.h): its inputs as tensors of the
// CPU backend (host memory) for the batch size last run, and its output.
struct FloatIsland {
    std::unique_ptr<Layer> layer;
    std::vector<Value> ins;
    std::vector<Tensor> inTensors;
    Tensor out;
    int64_t batch = -1;
    // Set when the layer's first product runs in int8 (ProjectingLayer): its kernel, rows per sample, multiply-adds
    // per sample, and the weight's name.
    ProjectingLayer* projecting = nullptr;
    std::unique_ptr<cpu::Int8Kernel> projection;
    int64_t projectionRows = 0;
    double projectionMacs = 0;
    std::string cwName;
    // Set when the file quantizes its inner tensor too (LayerType::int8InnerTensors, the heads' context): that
    // tensor's value (rounded onto its grid) and the int8 product that follows it (the output projection) in place
    // of the layer's float32 one, its rows per sample and multiply-adds per sample.
    std::optional<Value> inner;
    // Every inner tensor the file quantizes, by name, and the hook that rounds them where the layer computes
    // them in float32 (a float32 weight in the file: the simulation rounds them all the same).
    std::map<std::string, ActivationQuant> innerGrids;
    InnerTensorHook roundInner;
    std::unique_ptr<cpu::Int8Kernel> innerProduct;
    // Set with `inner` when the whole attention core runs in integers (cpu::int8AttentionCore): its shapes and
    // grids, and the Q, K, V projection's uint8 value.
    std::optional<cpu::Int8AttentionSpec> core;
    std::optional<Value> qkv;
    std::string innerName, innerWeight;
    int64_t innerRows = 0;
    double innerMacs = 0;
};

struct Int8Engine::Impl {
    int threads = 0;
    // The float islands' and the activation tables' (made at the first use); before the islands: destroyed after.
    std::unique_ptr<Backend> floatBackend;
    SmallSteps small = smallSteps();
    std::vector<Buffer> buffers;
    std::map<int, Value> values;  // by node id
    std::vector<std::function<void(int64_t batch)>> steps;
    std::vector<std::pair<std::string, std::function<std::string()>>> plan;
    std::vector<std::unique_ptr<cpu::Int8Kernel>> kernels;
    int inputNode = -1, outputNode = -1;
    int64_t lastBatch = 0;
    std::map<std::string, int> ids;
    // uint8 -> uint8 table steps by their output buffer: a max pooling after one may take the table over.
    struct TableStep {
        std::shared_ptr<bool> deferred;  // set: the step does nothing, the pooling applies the table
        Value input;
        std::vector<uint8_t> table;  // channels x 256
        bool nonDecreasing = false;
        int node = -1;
    };
    std::map<int, TableStep> tableSteps;
    std::set<int> deferredNodes;
    std::vector<std::unique_ptr<FloatIsland>> islands;
    std::vector<std::string> islandNodes;
    Shape inputShape;
    const float* input = nullptr;  // the batch being run (normalized, NCHW)

    int newBuffer() {
        buffers.emplace_back();
        return static_cast<int>(buffers.size()) - 1;
    }
    std::vector<uint8_t>& u8(const Value& v, int64_t batch) {
        auto& b = buffers[static_cast<size_t>(v.buffer)].u8;
        b.resize(static_cast<size_t>(batch * v.shape.numel()));
        return b;
    }
    std::vector<float>& f32(const Value& v, int64_t batch) {
        auto& b = buffers[static_cast<size_t>(v.buffer)].f32;
        b.resize(static_cast<size_t>(batch * v.shape.numel()));
        return b;
    }
    // `v` for `batch` samples as float32 in the graph's order (NCHW; a flattened NHWC value in [C, H, W] order).
    void toNchw(const Value& v, int64_t batch, float* dst) {
        const int64_t per = v.shape.numel();
        const Shape& chw = v.nhwc ? v.shape : v.flatFrom;
        const int64_t c = chw.rank() == 3 ? chw[0] : 1, hw = per / c;
        const uint8_t* q = v.quantized ? u8(v, batch).data() : nullptr;
        const float* f = v.quantized ? nullptr : f32(v, batch).data();
        if (c == 1) {  // the same order in both layouts
            if (q)
                cpu::dequantizeFromGrid(threadsFor(threads, double(batch * per), small.values), q, dst, batch * per,
                                        gridOf(v.q));
            else
                std::copy_n(f, batch * per, dst);
            return;
        }
        for (int64_t s = 0; s < batch; ++s)
            for (int64_t ch = 0; ch < c; ++ch)
                for (int64_t i = 0; i < hw; ++i) {
                    const auto from = static_cast<size_t>(s * per + i * c + ch);
                    dst[s * per + ch * hw + i] = q ? dequantize(q[from], v.q) : f[from];
                }
    }
    // `src` (`batch` samples in the graph's NCHW order) into `v`: NHWC where `v` is, on its grid where quantized.
    void fromNchw(const float* src, const Value& v, int64_t batch) {
        const int64_t per = v.shape.numel();
        const int64_t c = v.nhwc ? v.shape[0] : 1, hw = per / c;
        if (c == 1) {  // the same order in both layouts
            if (v.quantized)
                cpu::quantizeToGrid(threadsFor(threads, double(batch * per), small.values), src, u8(v, batch).data(),
                                    batch * per, gridOf(v.q));
            else
                std::copy_n(src, batch * per, f32(v, batch).data());
            return;
        }
        auto put = [&](auto* dst, auto convert) {
            for (int64_t s = 0; s < batch; ++s)
                for (int64_t ch = 0; ch < c; ++ch)
                    for (int64_t i = 0; i < hw; ++i) dst[s * per + i * c + ch] = convert(src[s * per + ch * hw + i]);
        };
        if (v.quantized)
            put(u8(v, batch).data(), [&v](float x) { return quantize(x, v.q); });
        else
            put(f32(v, batch).data(), [](float x) { return x; });
    }
    // The channel count and the stride between a channel's values in the stored layout: [C, H, W] NHWC:
    // C and 1 (channel = i % C); [C, L] or [C]: C and L.
    static std::pair<int64_t, int64_t> channelsOf(const Value& v) {
        if (v.nhwc && v.shape.rank() == 3) return {v.shape[0], 1};
        return {v.shape[0], v.shape.rank() >= 2 ? v.shape.product(1, v.shape.rank()) : 1};
    }
};

namespace {

[[noreturn]] void refuse(const Node& n, const std::string& why) {
    throw std::runtime_error("int8 engine: node '" + n.name + "' (" + n.type + ") " + why +
                             "; run this file with `strata-train predict --runtime strata` (float32 on its dequantized "
                             "weights) or onnxruntime");
}

}  // namespace

Int8Engine::Int8Engine(const ExportModel& model, const std::map<std::string, ActivationQuant>& activations, int threads)
    : m_impl(std::make_unique<Impl>()) {
    if (const std::string why = cpu::int8Unavailable(); !why.empty())
        throw std::runtime_error(
            "int8 engine refused: " + why +
            ". Run the file with `strata-train predict --runtime strata` (float32 on its dequantized "
            "weights) or onnxruntime instead");
    Impl& im = *m_impl;
    im.threads = threads;
    const Graph& graph = model.project.graph;
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) throw std::runtime_error("int8 engine: " + analysis.problems.front().message);
    std::set<int> consumed;
    for (const Edge& e : graph.edges()) consumed.insert(e.from.node);

    auto weight = [&](const Node& n, const std::string& param) -> const std::vector<float>* {
        auto it = model.weights.find(n.name + "." + param);
        return it == model.weights.end() ? nullptr : &it->second;
    };
    auto inputOf = [&](const Node& n, size_t port) -> Value {
        const std::vector<std::string> ports = graph.inputPorts(n.id);
        const auto e = graph.edgeInto({n.id, ports.at(port)});
        if (!e) refuse(n, "has no input on port " + ports.at(port));
        return im.values.at(e->from.node);
    };
    // The quantization of a node's output, if the file quantizes it.
    auto outQuant = [&](const Node& n) -> const ActivationQuant* {
        auto it = activations.find(n.name);
        return it == activations.end() ? nullptr : &it->second;
    };
    auto describe = [&](const Node& n, const std::string& text) {
        im.plan.emplace_back(n.name, [text] { return text; });
    };
    // A step that puts `from`'s values onto `q`'s grid (float or another grid), as a new value.
    auto requantized = [&](const Value& from, const ActivationQuant& q) {
        Value out = from;
        out.buffer = im.newBuffer();
        out.quantized = true;
        out.q = q;
        im.steps.push_back([&im, from, out](int64_t batch) {
            auto& dst = im.u8(out, batch);
            if (from.quantized) {
                std::array<uint8_t, 256> table{};
                for (int v = 0; v < 256; ++v) table[size_t(v)] = quantize(dequantize(uint8_t(v), from.q), out.q);
                const auto& src = im.u8(from, batch);
                for (size_t i = 0; i < dst.size(); ++i) dst[i] = table[src[i]];
            } else {
                const auto& src = im.f32(from, batch);
                for (size_t i = 0; i < dst.size(); ++i) dst[i] = quantize(src[i], out.q);
            }
        });
        return out;
    };

    // The CPU backend of the float islands and the activation tables, made at the first use.
    auto floatBackend = [&]() -> Backend& {
        if (!im.floatBackend) {
            BackendOptions o;
            o.threads = threads;
            im.floatBackend = backendRegistry().create(Device::cpu(), o);
        }
        return *im.floatBackend;
    };

    // A product's int8 weights (one scale per output channel), int32 bias and requantization scales (input scale x
    // weight scale / output scale; float32 output without `oq`), from the file's weights as loadModelFile
    // dequantizes them: they requantize exactly to the file's int8 values. None when the file holds the weight in
    // float32 (its values are not int8 x one scale per channel): the layer then runs in float32, as the file does.
    struct ProductWeights {
        std::vector<int8_t> values;
        std::vector<int32_t> bias;
        std::vector<float> scales;
    };
    // `weightShape`: the weight's shape with its output channels on axis cw.axis (a [channels, rest] view will do
    // for axis 0).
    auto productWeights = [&](const Node& n, const CompressibleWeight& cw, const Shape& weightShape, const Value& in,
                              const ActivationQuant* oq) -> std::optional<ProductWeights> {
        const std::vector<float>* w = weight(n, cw.weight);
        if (!w) refuse(n, "has no '" + cw.weight + "' in the file");
        if (weightShape.numel() != static_cast<int64_t>(w->size()))
            refuse(n, "has " + std::to_string(w->size()) + " values of '" + cw.weight + "', not " +
                          weightShape.toString());
        ChannelQuantized qw = quantizeWeightAlongAxis(*w, weightShape, cw.axis);
        const int64_t channels = weightShape[cw.axis];
        const auto inner = static_cast<size_t>(weightShape.product(cw.axis + 1, weightShape.rank()));
        for (size_t i = 0; i < w->size(); ++i)
            if (float(qw.values[i]) * qw.scales[(i / inner) % static_cast<size_t>(channels)] != (*w)[i])
                return std::nullopt;
        ProductWeights p;
        if (const std::vector<float>* b = cw.bias.empty() ? nullptr : weight(n, cw.bias))
            p.bias = quantizeBias(*b, in.q.scale, qw.scales);
        p.scales.resize(qw.scales.size());
        for (size_t k = 0; k < p.scales.size(); ++k) p.scales[k] = in.q.scale * qw.scales[k] / (oq ? oq->scale : 1.0f);
        p.values = std::move(qw.values);
        return p;
    };

    // An int8 matmul of `inputs` -> `outputs` values a row on these weights, from uint8 values with `srcZeroPoint`,
    // onto `grid` (float32 output without one); oneDNN's refusal is the node's.
    auto matmulKernel = [&](const Node& n, ProductWeights&& pw, int64_t inputs, int64_t outputs, int srcZeroPoint,
                            const ActivationQuant* grid) {
        cpu::Int8MatmulSpec spec;
        spec.inputs = int(inputs);
        spec.outputs = int(outputs);
        spec.weights = std::move(pw.values);
        spec.bias = std::move(pw.bias);
        spec.scales = std::move(pw.scales);
        spec.srcZeroPoint = srcZeroPoint;
        spec.dstZeroPoint = grid ? grid->zeroPoint : 0;
        spec.f32Output = !grid;
        try {
            return cpu::makeInt8Matmul(spec);
        } catch (const std::runtime_error& e) {
            refuse(n, e.what());
        }
    };

    // A node with no integer path (or a float32 input where its integer path needs uint8): its own Layer
    // (LayerType::create) in float32 on a CPU backend, on its inputs dequantized, with the file's weights (as
    // loadModelFile dequantizes them), its output rounded onto its grid where the file quantizes it: what the
    // QDQ graph has between its DequantizeLinears and its QuantizeLinear, and what the simulation runs.
    auto island = [&](const Node& n, int id, const LayerType& type, const Json& params, const Shape& shape,
                      const ActivationQuant* oq) -> Value {
        auto isl = std::make_unique<FloatIsland>();
        std::vector<Shape> inShapes;
        for (size_t p = 0; p < graph.inputPorts(id).size(); ++p) {
            isl->ins.push_back(inputOf(n, p));
            inShapes.push_back(isl->ins.back().shape);
        }
        Backend& backend = floatBackend();
        isl->layer = type.create(params, inShapes, shape);
        for (const ParameterSpec& spec : type.parameterSpecs(params, inShapes)) {
            const std::vector<float>* w = weight(n, spec.name);
            if (!w) refuse(n, "has no '" + spec.name + "' in the file");
            if (static_cast<int64_t>(w->size()) != spec.shape.numel())
                refuse(n, "has " + std::to_string(w->size()) + " values of '" + spec.name + "' where its layer takes " +
                              spec.shape.toString());
            Parameter p;
            p.name = spec.name;
            p.value = backend.fromHost(spec.shape, w->data());
            p.trainable = false;
            isl->layer->parameters().push_back(std::move(p));
        }
        Value out;
        out.shape = shape;
        out.buffer = im.newBuffer();
        out.quantized = oq != nullptr;
        if (oq) out.q = *oq;
        out.nhwc = shape.rank() == 3;  // like every value of that rank
        // A layer that starts with a projection by its int8 weight (the attention's Q, K, V), which the file holds
        // in int8 after a quantized input: that product in integers, the rest of the layer in float32.
        const CompressibleWeight cw = type.int8Weight();
        auto* projecting = dynamic_cast<ProjectingLayer*>(isl->layer.get());
        // Its output float32, or uint8 on `grid` (the attention's Q, K, V grid, for the integer core).
        auto projectInInt8 = [&](const ActivationQuant* grid) -> bool {
            const Value& x = isl->ins[0];
            const std::vector<float>* w = weight(n, cw.weight);
            const int64_t width = x.shape[x.shape.rank() - 1];
            if (!w || int64_t(w->size()) % width != 0) refuse(n, "has no '" + cw.weight + "' of its input's width");
            const int64_t outputs = int64_t(w->size()) / width;
            std::optional<ProductWeights> int8 = productWeights(n, cw, Shape{outputs, width}, x, grid);
            if (!int8) return false;  // the file holds it in float32
            isl->projection = matmulKernel(n, std::move(*int8), width, outputs, x.q.zeroPoint, grid);
            isl->projecting = projecting;
            isl->cwName = cw.weight;
            isl->projectionRows = x.shape.numel() / width;
            isl->projectionMacs = double(isl->projectionRows) * double(w->size());
            return true;
        };
        // The layer's inner tensor on its grid and the product after it in int8 (the attention's context and output
        // projection), where the file quantizes both; an older file, or a float32 weight there: float32 as before.
        auto innerInInt8 = [&](const LayerType::InnerInt8Tensor& t) {
            auto q = activations.find(innerTensorKey(n.name, t.name));
            const std::vector<float>* w = weight(n, t.weight.weight);
            const int64_t outputs = shape[shape.rank() - 1];
            if (q == activations.end() || !w || shape.rank() != 2 || int64_t(w->size()) % outputs != 0) return;
            const int64_t width = int64_t(w->size()) / outputs;
            Value v;
            v.shape = Shape{shape.numel() / outputs, width};
            v.buffer = im.newBuffer();
            v.quantized = true;
            v.q = q->second;
            std::optional<ProductWeights> int8 = productWeights(n, t.weight, Shape{outputs, width}, v, oq);
            if (!int8) return;
            isl->innerProduct = matmulKernel(n, std::move(*int8), width, outputs, v.q.zeroPoint, oq);
            isl->inner = v;
            isl->innerName = t.name;
            isl->innerWeight = t.weight.weight;
            isl->innerRows = v.shape[0];
            isl->innerMacs = double(v.shape[0]) * double(w->size());
        };
        // An inner tensor's values, for nodeValues("<node>/<tensor>") (the tests compare them with the simulation's).
        auto registerInner = [&](const std::string& tensor, const Value& v) {
            const int innerId = -2 - static_cast<int>(im.values.size());
            im.ids[innerTensorKey(n.name, tensor)] = innerId;
            im.values[innerId] = v;
        };
        for (const LayerType::InnerInt8Tensor& t : type.int8InnerTensors())
            if (auto q = activations.find(innerTensorKey(n.name, t.name)); q != activations.end())
                isl->innerGrids[t.name] = q->second;
        if (projecting && !cw.weight.empty() && isl->ins[0].quantized && !isl->ins[0].nhwc) {
            // The tensor before the inner product (ProjectingLayer::innerFromProjection gives one: the context).
            for (const LayerType::InnerInt8Tensor& t : type.int8InnerTensors())
                if (!t.weight.weight.empty()) {
                    innerInInt8(t);
                    break;
                }
            // The whole attention core in integers where the file also rounds Q, K, V (about 128) and the softmax
            // weights (from 0) and the products around them are int8: Q K^T and P V as u8 x s8 sums.
            const auto qkv = isl->innerGrids.find("qkv"), probs = isl->innerGrids.find("probs");
            const bool core = isl->inner && n.type == "MultiHeadSelfAttention" && qkv != isl->innerGrids.end() &&
                              qkv->second.zeroPoint == 128 && probs != isl->innerGrids.end() &&
                              probs->second.zeroPoint == 0 && shape.rank() == 2;
            if (!projectInInt8(core ? &qkv->second : nullptr)) {
                isl->inner.reset();
                isl->innerProduct.reset();
            } else if (isl->inner) {
                registerInner(isl->innerName, *isl->inner);
                if (core) {
                    cpu::Int8AttentionSpec c;
                    c.length = int(shape[0]);
                    c.width = int(shape[1]);
                    c.heads = params.at("heads").get<int>();
                    c.scale = 1.0f / std::sqrt(static_cast<float>(c.width / c.heads));
                    c.qkvScale = qkv->second.scale;
                    c.probsScale = probs->second.scale;
                    c.contextScale = isl->inner->q.scale;
                    c.contextZeroPoint = isl->inner->q.zeroPoint;
                    isl->core = c;
                    Value v;
                    v.shape = Shape{shape[0], 3 * shape[1]};
                    v.buffer = im.newBuffer();
                    v.quantized = true;
                    v.q = qkv->second;
                    isl->qkv = v;
                    registerInner("qkv", v);
                }
            }
        }
        // The inner tensors the layer itself computes in float32 are rounded in place as it goes (not the one an
        // int8 product reads, which the step quantizes itself).
        std::map<std::string, ActivationQuant> roundedInner = isl->innerGrids;
        if (isl->inner) roundedInner.erase(isl->innerName);
        if (!isl->core && !roundedInner.empty())
            isl->roundInner = [roundedInner](int, const std::string& tensor, Tensor& values) {
                if (auto q = roundedInner.find(tensor); q != roundedInner.end())
                    fakeQuantize(values.f32(), values.numel(), q->second);
            };
        FloatIsland* f = isl.get();
        im.islands.push_back(std::move(isl));
        if (!f->core) im.islandNodes.push_back(n.name);  // an integer attention core is no float32 layer
        im.steps.push_back([&im, f, out](int64_t batch) {
            Backend& b = *im.floatBackend;
            if (f->batch != batch) {
                f->inTensors.clear();
                for (const Value& v : f->ins) f->inTensors.push_back(b.empty(v.shape.withBatch(batch)));
                f->out = b.empty(out.shape.withBatch(batch));
                f->batch = batch;
            }
            // A CPU backend's tensors are host memory: the values go in and come out without another copy.
            std::vector<const Tensor*> inputs;
            for (size_t i = 0; i < f->ins.size(); ++i) {
                // The projected input is read in integers, not as floats.
                if (i > 0 || !f->projecting) im.toNchw(f->ins[i], batch, static_cast<float*>(f->inTensors[i].raw()));
                inputs.push_back(&f->inTensors[i]);
            }
            LayerContext ctx{b};
            if (f->roundInner) ctx.innerHook = &f->roundInner;
            if (f->core) {
                uint8_t* qkv = im.u8(*f->qkv, batch).data();
                f->projection->run(threadsFor(im.threads, f->projectionMacs * double(batch), im.small.macs),
                                   batch * f->projectionRows, im.u8(f->ins[0], batch).data(), qkv);
                uint8_t* context = im.u8(*f->inner, batch).data();
                const double coreMacs = 2.0 * double(f->core->length) * double(f->core->length) * f->core->width;
                cpu::int8AttentionCore(threadsFor(im.threads, coreMacs * double(batch), im.small.macs), *f->core, batch,
                                       qkv, f->ins.size() > 1 ? f->inTensors[1].f32() : nullptr, context);
                void* dst = out.quantized ? static_cast<void*>(im.u8(out, batch).data())
                                          : static_cast<void*>(im.f32(out, batch).data());
                f->innerProduct->run(threadsFor(im.threads, f->innerMacs * double(batch), im.small.macs),
                                     batch * f->innerRows, context, dst);
                return;
            }
            if (f->projecting) {
                f->projection->run(threadsFor(im.threads, f->projectionMacs * double(batch), im.small.macs),
                                   batch * f->projectionRows, im.u8(f->ins[0], batch).data(),
                                   f->projecting->projection(b, batch));
                if (f->inner) {
                    const Tensor& t = f->projecting->innerFromProjection(ctx, inputs);
                    const int64_t count = batch * f->inner->shape.numel();
                    uint8_t* q = im.u8(*f->inner, batch).data();
                    cpu::quantizeToGrid(threadsFor(im.threads, double(count), im.small.values), t.f32(), q, count,
                                        gridOf(f->inner->q));
                    void* dst = out.quantized ? static_cast<void*>(im.u8(out, batch).data())
                                              : static_cast<void*>(im.f32(out, batch).data());
                    f->innerProduct->run(threadsFor(im.threads, f->innerMacs * double(batch), im.small.macs),
                                         batch * f->innerRows, q, dst);
                    return;
                }
                f->projecting->forwardFromProjection(ctx, inputs, f->out);
            } else {
                f->layer->forward(ctx, inputs, f->out);
            }
            im.fromNchw(static_cast<const float*>(f->out.raw()), out, batch);
        });
        const std::string rounded = oq ? ", rounded onto its uint8 grid" : "";
        if (f->core)
            im.plan.emplace_back(n.name, [f] {
                return "int8 matmul (" + f->projection->implementation() + ") for its '" + f->cwName +
                       "' projection onto its Q, K, V grid, then its scores and weighted values as u8 x s8 sums per "
                       "head (softmax float32, its weights rounded onto their uint8 grid), its context rounded onto "
                       "its grid, then int8 matmul (" +
                       f->innerProduct->implementation() + ") for its '" + f->innerWeight + "' projection";
            });
        else if (f->inner)
            im.plan.emplace_back(n.name, [f] {
                return "int8 matmul (" + f->projection->implementation() + ") for its '" + f->cwName +
                       "' projection, then float32 (its own layer on the CPU backend) to its " + f->innerName +
                       ", rounded onto its uint8 grid, then int8 matmul (" + f->innerProduct->implementation() +
                       ") for its '" + f->innerWeight + "' projection";
            });
        else if (f->projecting)
            im.plan.emplace_back(n.name, [f, rounded] {
                return "int8 matmul (" + f->projection->implementation() + ") for its '" + f->cwName +
                       "' projection, then float32 (its own layer on the CPU backend)" + rounded;
            });
        else
            describe(n, "float32 (its own layer on the CPU backend, on dequantized inputs)" + rounded);
        return out;
    };

    for (int id : graph.topologicalOrder()) {
        const Node& n = *graph.node(id);
        const Json& params = analysis.params.at(id);
        const Shape& shape = analysis.outputShapes.at(id);
        const LayerType* type = graph.layerType(id);
        const ActivationQuant* oq = outQuant(n);
        im.ids[n.name] = id;
        if (!consumed.count(id)) im.outputNode = id;
        Value out;
        out.shape = shape;
        if (type && type->isGraphInput()) {
            im.inputNode = id;
            im.inputShape = shape;
            out.buffer = im.newBuffer();
            out.quantized = oq != nullptr;
            if (oq) out.q = *oq;
            out.nhwc = shape.rank() == 3;
            im.steps.push_back([&im, out](int64_t batch) {
                const int64_t per = out.shape.numel();
                if (!out.quantized) {
                    auto& dst = im.f32(out, batch);
                    std::copy_n(im.input, batch * per, dst.begin());
                    // Float [C, H, W] values are NHWC too, like every value of that rank.
                    if (out.nhwc) {
                        const int64_t c = out.shape[0], hw = per / c;
                        for (int64_t s = 0; s < batch; ++s)
                            for (int64_t ch = 0; ch < c; ++ch)
                                for (int64_t i = 0; i < hw; ++i)
                                    dst[size_t(s * per + i * c + ch)] = im.input[s * per + ch * hw + i];
                    }
                    return;
                }
                auto& dst = im.u8(out, batch);
                const int64_t c = out.nhwc ? out.shape[0] : 1, hw = per / c;
                if (c == 1) {  // the order is the same in both layouts
                    cpu::quantizeToGrid(threadsFor(im.threads, double(batch * per), im.small.values), im.input,
                                        dst.data(), batch * per, gridOf(out.q));
                    return;
                }
                for (int64_t s = 0; s < batch; ++s)
                    for (int64_t ch = 0; ch < c; ++ch)
                        for (int64_t i = 0; i < hw; ++i)
                            dst[size_t(s * per + i * c + ch)] = quantize(im.input[s * per + ch * hw + i], out.q);
            });
            describe(n, oq ? "input quantized to uint8" : "input float32");
            im.values[id] = out;
            continue;
        }
        if (!type) refuse(n, "has an unknown layer type");
        if (type->identityAtInference()) {  // Dropout
            im.values[id] = inputOf(n, 0);
            describe(n, "identity at inference");
            continue;
        }
        const Value in = inputOf(n, 0);
        if (n.type == "Flatten" || n.type == "Reshape") {
            out = in;
            out.shape = shape;
            if (in.nhwc && in.shape.rank() == 3 && shape.rank() == 1 && n.type == "Flatten") {
                out.nhwc = false;
                out.flatFrom = in.shape;
            } else if (shape != in.shape && (in.nhwc || !in.flatFrom.empty())) {
                im.values[id] = island(n, id, *type, params, shape, oq);  // moves channel-last values
                continue;
            }
            if (oq && !(in.quantized && in.q == *oq)) out = requantized(out, *oq);
            describe(n, "no data movement");
            im.values[id] = out;
            continue;
        }
        // An Embedding whose output is quantized: its table rounded onto that grid once, each id's row copied (what
        // the file computes: Gather, then QuantizeLinear). Ids are checked as the backend checks them.
        if (n.type == "Embedding" && oq && !in.quantized && in.shape.rank() == 1 && shape.rank() == 2) {
            const std::vector<float>* table = weight(n, "weight");
            const int64_t dim = shape[1];
            if (!table || int64_t(table->size()) % dim != 0)
                refuse(n, "has no 'weight' of [vocab, " + std::to_string(dim) + "]");
            auto rows = std::make_shared<std::vector<uint8_t>>(table->size());
            cpu::quantizeToGrid(1, table->data(), rows->data(), int64_t(table->size()), gridOf(*oq));
            const int vocab = static_cast<int>(int64_t(table->size()) / dim);
            out.buffer = im.newBuffer();
            out.quantized = true;
            out.q = *oq;
            im.steps.push_back([&im, in, out, rows, dim, vocab, name = n.name](int64_t batch) {
                const std::vector<float>& ids = im.f32(in, batch);
                const auto count = static_cast<int64_t>(ids.size());
                try {
                    checkIdsOnHost(BackendOp::EmbeddingForward, "cpu", ids.data(), count, vocab);
                } catch (const std::exception& e) {
                    throw std::runtime_error("int8 engine: node '" + name + "' (Embedding): " + e.what());
                }
                uint8_t* dst = im.u8(out, batch).data();
                for (int64_t i = 0; i < count; ++i)
                    std::copy_n(rows->data() + static_cast<int64_t>(ids[size_t(i)]) * dim, dim, dst + i * dim);
            });
            describe(n, "uint8 rows of its table rounded onto its grid once");
            im.values[id] = out;
            continue;
        }
        // The mean over a sequence's (kept) positions of uint8 values: integer sums per feature, scaled once.
        if (n.type == "SequenceMeanPool" && oq && in.quantized && !in.nhwc && in.shape.rank() == 2) {
            const bool masked = params.value("masked", false);
            const Value ids = masked ? inputOf(n, 1) : Value{};
            if (masked && ids.quantized) refuse(n, "reads a quantized mask");
            out.buffer = im.newBuffer();
            out.quantized = true;
            out.q = *oq;
            im.steps.push_back([&im, in, ids, out, masked](int64_t batch) {
                const int64_t len = in.shape[0], dim = in.shape[1];
                const uint8_t* src = im.u8(in, batch).data();
                uint8_t* dst = im.u8(out, batch).data();
                // Sums of (q - zero point) per sample and feature, 16 at a time (cpu::channelSums): over every
                // position, or over each run of kept positions (padding ids 0 usually end a text: one run).
                std::vector<int64_t> sums(static_cast<size_t>(batch * dim)), part(static_cast<size_t>(dim));
                std::vector<int64_t> counted(size_t(batch), len);
                if (!masked) {
                    cpu::channelSums(threadsFor(im.threads, double(batch * len * dim), im.small.values), src, batch,
                                     len, dim, in.q.zeroPoint, sums.data());
                } else {
                    const float* keep = im.f32(ids, batch).data();
                    for (int64_t b = 0; b < batch; ++b) {
                        counted[size_t(b)] = 0;
                        for (int64_t l = 0; l < len;) {
                            if (keep[b * len + l] == 0.0f) {
                                ++l;
                                continue;
                            }
                            int64_t end = l + 1;
                            while (end < len && keep[b * len + end] != 0.0f) ++end;
                            cpu::channelSums(1, src + (b * len + l) * dim, 1, end - l, dim, in.q.zeroPoint,
                                             part.data());
                            for (int64_t i = 0; i < dim; ++i) sums[size_t(b * dim + i)] += part[size_t(i)];
                            counted[size_t(b)] += end - l;
                            l = end;
                        }
                    }
                }
                for (int64_t b = 0; b < batch; ++b) {
                    const int64_t c = counted[size_t(b)];
                    for (int64_t i = 0; i < dim; ++i)
                        dst[b * dim + i] =
                            c == 0 ? quantize(0.0f, out.q)
                                   : quantize(float(double(sums[size_t(b * dim + i)]) * double(in.q.scale) / double(c)),
                                              out.q);
                }
            });
            describe(n, "integer sums of uint8 values over the " + std::string(masked ? "kept " : "") +
                            "positions, scaled once");
            im.values[id] = out;
            continue;
        }
        // Without a quantized input the file keeps the weights float32 (Quantize.h): a float island.
        // So does a Dense over the last axis of a [C, H, W] value, which the engine holds channels last.
        if ((n.type == "Conv2D" || n.type == "Dense") && (!in.quantized || (n.type == "Dense" && in.nhwc))) {
            im.values[id] = island(n, id, *type, params, shape, oq);
            continue;
        }
        if (n.type == "Conv2D" || n.type == "Dense") {
            const CompressibleWeight cw = type->int8Weight();
            const std::vector<float>* w = weight(n, cw.weight);
            if (!w) refuse(n, "has no weight in the model");
            // Output channels: a convolution's filters, a Dense layer's units (its output's last axis).
            const int64_t filters = n.type == "Conv2D" ? shape[0] : shape[shape.rank() - 1];
            std::optional<ProductWeights> int8 =
                productWeights(n, cw, Shape{filters, int64_t(w->size()) / filters}, in, oq);
            if (!int8) {  // the file holds the weight in float32
                im.values[id] = island(n, id, *type, params, shape, oq);
                continue;
            }
            ProductWeights& qw = *int8;
            std::vector<int32_t>& bias = qw.bias;
            std::vector<float>& scales = qw.scales;
            out.buffer = im.newBuffer();
            out.quantized = oq != nullptr;
            if (oq) out.q = *oq;
            std::unique_ptr<cpu::Int8Kernel> kernel;
            try {
                if (n.type == "Conv2D") {
                    if (in.shape.rank() != 3 || !in.nhwc) refuse(n, "takes an input that is not [C, H, W]");
                    cpu::Int8ConvSpec s;
                    s.channels = int(in.shape[0]);
                    s.height = int(in.shape[1]);
                    s.width = int(in.shape[2]);
                    s.filters = int(filters);
                    std::tie(s.kernelH, s.kernelW) = pairOf(params, "kernel", {1, 1});
                    std::tie(s.strideH, s.strideW) = pairOf(params, "stride", {1, 1});
                    std::tie(s.padH, s.padW) = pairOf(params, "padding", {0, 0});
                    std::tie(s.dilationH, s.dilationW) = pairOf(params, "dilation", {1, 1});
                    s.groups = params.value("groups", 1);
                    s.weights = std::move(qw.values);
                    s.bias = std::move(bias);
                    s.scales = std::move(scales);
                    s.srcZeroPoint = in.q.zeroPoint;
                    s.dstZeroPoint = oq ? oq->zeroPoint : 0;
                    s.f32Output = !oq;
                    kernel = cpu::makeInt8Conv(s);
                    out.nhwc = true;
                } else {
                    // A vector, or the rows of a [T, D] (a sequence): each row one product.
                    const int64_t inputs = in.shape[in.shape.rank() - 1], outputs = shape[shape.rank() - 1];
                    if (!in.flatFrom.empty()) {  // columns from [C, H, W] order to the values' [H, W, C]
                        const int64_t c = in.flatFrom[0], hw = in.flatFrom.numel() / c;
                        std::vector<int8_t> permuted(qw.values.size());
                        for (int64_t o = 0; o < outputs; ++o)
                            for (int64_t ch = 0; ch < c; ++ch)
                                for (int64_t i = 0; i < hw; ++i)
                                    permuted[size_t(o * inputs + i * c + ch)] =
                                        qw.values[size_t(o * inputs + ch * hw + i)];
                        qw.values = std::move(permuted);
                    }
                    kernel = matmulKernel(n, std::move(qw), inputs, outputs, in.q.zeroPoint, oq);
                }
            } catch (const std::runtime_error& e) {
                if (std::string(e.what()).rfind("int8 engine:", 0) == 0) throw;
                refuse(n, e.what());
            }
            cpu::Int8Kernel* k = kernel.get();
            im.kernels.push_back(std::move(kernel));
            // Multiply-adds per sample: each output value sums one weight row.
            const double macs = double(shape.numel()) * double(w->size()) / double(filters);
            // Rows per sample: a Dense over a sequence multiplies each position's.
            const int64_t rows = n.type == "Dense" ? in.shape.numel() / in.shape[in.shape.rank() - 1] : 1;
            im.steps.push_back([&im, in, out, k, macs, rows](int64_t batch) {
                const uint8_t* src = im.u8(in, batch).data();
                void* dst = out.quantized ? static_cast<void*>(im.u8(out, batch).data())
                                          : static_cast<void*>(im.f32(out, batch).data());
                k->run(threadsFor(im.threads, macs * double(batch), im.small.macs), batch * rows, src, dst);
            });
            const std::string what = n.type == "Conv2D" ? "int8 convolution" : "int8 matmul";
            im.plan.emplace_back(n.name, [what, k] { return what + " (" + k->implementation() + ")"; });
            im.values[id] = out;
            continue;
        }
        // Conv1D over a [length, channels] value, which is channels last already: a convolution of height 1, its
        // [kernel, filters, channels] weight (one scale per filter, axis 1) as [filters, channels, 1, kernel].
        if (n.type == "Conv1D" && in.quantized && !in.nhwc && in.shape.rank() == 2 && in.flatFrom.empty()) {
            const CompressibleWeight cw = type->int8Weight();
            const int64_t kernel = params.at("kernel").get<int64_t>(), filters = shape[1], channels = in.shape[1];
            std::optional<ProductWeights> int8 = productWeights(n, cw, Shape{kernel, filters, channels}, in, oq);
            if (int8) {
                cpu::Int8ConvSpec s;
                s.channels = int(channels);
                s.height = 1;
                s.width = int(in.shape[0]);
                s.filters = int(filters);
                s.kernelW = int(kernel);
                s.strideW = params.at("stride").get<int>();
                s.padW = params.at("padding").get<int>();
                s.dilationW = params.at("dilation").get<int>();
                s.weights.resize(int8->values.size());
                for (int64_t k = 0; k < kernel; ++k)
                    for (int64_t f = 0; f < filters; ++f)
                        for (int64_t c = 0; c < channels; ++c)
                            s.weights[size_t((f * channels + c) * kernel + k)] =
                                int8->values[size_t((k * filters + f) * channels + c)];
                s.bias = std::move(int8->bias);
                s.scales = std::move(int8->scales);
                s.srcZeroPoint = in.q.zeroPoint;
                s.dstZeroPoint = oq ? oq->zeroPoint : 0;
                s.f32Output = !oq;
                std::unique_ptr<cpu::Int8Kernel> kernelStep;
                try {
                    kernelStep = cpu::makeInt8Conv(s);
                } catch (const std::runtime_error& e) {
                    refuse(n, e.what());
                }
                cpu::Int8Kernel* k = kernelStep.get();
                im.kernels.push_back(std::move(kernelStep));
                out.buffer = im.newBuffer();
                out.quantized = oq != nullptr;
                if (oq) out.q = *oq;
                const double macs = double(shape.numel()) * double(kernel * channels);
                im.steps.push_back([&im, in, out, k, macs](int64_t batch) {
                    void* dst = out.quantized ? static_cast<void*>(im.u8(out, batch).data())
                                              : static_cast<void*>(im.f32(out, batch).data());
                    k->run(threadsFor(im.threads, macs * double(batch), im.small.macs), batch, im.u8(in, batch).data(),
                           dst);
                });
                im.plan.emplace_back(n.name, [k] { return "int8 convolution (" + k->implementation() + ")"; });
                im.values[id] = out;
                continue;
            }
        }
        if (n.type == "MaxPool2D" && !(in.quantized && in.nhwc)) {
            im.values[id] = island(n, id, *type, params, shape, oq);
            continue;
        }
        if (n.type == "MaxPool2D") {
            cpu::Int8MaxPoolSpec s;
            s.channels = int(in.shape[0]);
            s.height = int(in.shape[1]);
            s.width = int(in.shape[2]);
            std::tie(s.kernelH, s.kernelW) = pairOf(params, "kernel", {2, 2});
            std::tie(s.strideH, s.strideW) = pairOf(params, "stride", {s.kernelH, s.kernelW});
            std::tie(s.padH, s.padW) = pairOf(params, "padding", {0, 0});
            cpu::Int8Kernel* k = nullptr;
            try {
                im.kernels.push_back(cpu::makeInt8MaxPool(s));
                k = im.kernels.back().get();
            } catch (const std::runtime_error& e) {
                refuse(n, e.what());
            }
            out = in;
            out.shape = shape;
            out.buffer = im.newBuffer();
            // A table that never decreases (BatchNorm with gamma >= 0, on to a grid) commutes with the maximum:
            // max T(x) = T(max x), exactly. When the pooling is the only reader of the table's output (through a
            // fused ReLU), it pools the table's input and applies the table to a quarter of the values.
            auto table = im.tableSteps.find(in.buffer);
            const Node* reader = graph.node(graph.edgeInto({id, graph.inputPorts(id).front()})->from.node);
            bool onlyReader = graph.edgesFrom(reader->id).size() == 1;
            if (onlyReader && table != im.tableSteps.end() && reader->id != table->second.node)
                onlyReader = graph.edgesFrom(table->second.node).size() == 1;  // the table, then a fused ReLU
            if (table != im.tableSteps.end() && table->second.nonDecreasing && onlyReader) {
                const Impl::TableStep& t = table->second;
                *t.deferred = true;
                im.deferredNodes.insert(t.node);
                Value pooled = t.input;
                pooled.shape = shape;
                pooled.buffer = im.newBuffer();
                const int64_t channels = shape[0];
                im.steps.push_back([&im, from = t.input, pooled, out, k, channels, lut = t.table](int64_t batch) {
                    const double work = double(batch) * double(from.shape.numel());
                    k->run(threadsFor(im.threads, work, im.small.values), batch, im.u8(from, batch).data(),
                           im.u8(pooled, batch).data());
                    const int64_t total = batch * pooled.shape.numel();
                    cpu::applyChannelTables(threadsFor(im.threads, double(total), im.small.values),
                                            im.u8(pooled, batch).data(), im.u8(out, batch).data(), total / channels,
                                            channels, 1, lut.data());
                });
                const std::string from = graph.node(t.node)->name;
                im.plan.emplace_back(n.name, [k, from] {
                    return "uint8 max pooling (" + k->implementation() + ") before " + from +
                           "'s table, which never decreases";
                });
            } else {
                im.steps.push_back([&im, in, out, k](int64_t batch) {
                    const double work = double(batch) * double(in.shape.numel());
                    k->run(threadsFor(im.threads, work, im.small.values), batch, im.u8(in, batch).data(),
                           im.u8(out, batch).data());
                });
                im.plan.emplace_back(n.name, [k] { return "uint8 max pooling (" + k->implementation() + ")"; });
            }
            if (oq && !(in.q == *oq)) out = requantized(out, *oq);
            im.values[id] = out;
            continue;
        }
        // The rest run per element in float32 between the input's grid and the output's, as the QDQ graph has
        // them between a DequantizeLinear and a QuantizeLinear: tables where the input is uint8. Activations
        // other than ReLU (LeakyReLU, GELU, Sigmoid, Tanh, HardSwish) tabulate the CPU backend's own
        // activationForward over the 256 values of the input's grid: the function the simulation applies.
        const std::optional<Activation> act = type->activation();
        if (act || n.type == "BatchNorm") {
            const bool bn = !act;
            const bool otherActivation = act && *act != Activation::ReLU;
            if (otherActivation && !in.quantized) {  // its table needs the input's uint8 grid
                im.values[id] = island(n, id, *type, params, shape, oq);
                continue;
            }
            // Not a structured binding: clang (clang-tidy) cannot capture one in the lambdas below.
            const std::pair<int64_t, int64_t> layout = Impl::channelsOf(in);
            const int64_t channels = layout.first, inner = layout.second;
            const int64_t tables = bn ? channels : 1;
            std::vector<float> scale(size_t(tables), 1.0f), shift(size_t(tables), 0.0f);
            if (bn) {
                const std::vector<float>*gamma = weight(n, "gamma"), *beta = weight(n, "beta"),
                      *mean = weight(n, "running_mean"), *var = weight(n, "running_var");
                if (!gamma || !beta || !mean || !var) refuse(n, "lacks gamma, beta or its running statistics");
                const double eps = params.value("eps", 1e-5);
                for (int64_t c = 0; c < channels; ++c) {
                    const double inv = 1.0 / std::sqrt(double((*var)[size_t(c)]) + eps);
                    scale[size_t(c)] = float(inv * (*gamma)[size_t(c)]);
                    shift[size_t(c)] = float((*beta)[size_t(c)] - (*mean)[size_t(c)] * inv * (*gamma)[size_t(c)]);
                }
            }
            auto f = [bn](float x, float s, float t) { return bn ? x * s + t : std::max(x, 0.0f); };
            if (act == Activation::ReLU && in.quantized && in.q.zeroPoint == 0 && (!oq || *oq == in.q)) {
                im.values[id] = in;  // the producer's clamp at zero was the ReLU
                describe(n, "fused: the producer's uint8 grid starts at 0");
                continue;
            }
            out = in;
            out.buffer = im.newBuffer();
            out.quantized = oq != nullptr;
            if (oq) out.q = *oq;
            // Tables from the input's grid: channels x 256 output values (uint8 on the output's grid, or float32).
            std::vector<uint8_t> qTable;
            std::vector<float> fTable;
            if (in.quantized) {
                fTable.resize(size_t(tables * 256));
                if (otherActivation) {
                    std::vector<float> grid(256);
                    for (int v = 0; v < 256; ++v) grid[size_t(v)] = dequantize(uint8_t(v), in.q);
                    Backend& backend = floatBackend();
                    const Tensor x = backend.fromHost(Shape{256}, grid.data());
                    Tensor y = backend.fromHost(Shape{256}, grid.data());
                    backend.activationForward(y.f32(), x.f32(), 256, *act,
                                              static_cast<float>(params.value("alpha", 0.0)));
                    backend.copyToHost(fTable.data(), y.f32(), 256 * sizeof(float));
                } else {
                    for (int64_t c = 0; c < tables; ++c)
                        for (int v = 0; v < 256; ++v)
                            fTable[size_t(c * 256 + v)] =
                                f(dequantize(uint8_t(v), in.q), scale[size_t(c)], shift[size_t(c)]);
                }
                if (oq) {
                    qTable.resize(fTable.size());
                    for (size_t i = 0; i < fTable.size(); ++i) qTable[i] = quantize(fTable[i], *oq);
                }
                if (tables == 1 && channels > 1) {  // a ReLU: the one table for every channel
                    auto repeat = [channels](auto& t) {
                        const auto one = t;
                        for (int64_t c = 1; c < channels; ++c) t.insert(t.end(), one.begin(), one.end());
                    };
                    repeat(fTable);
                    repeat(qTable);
                }
            }
            auto deferred = std::make_shared<bool>(false);
            if (in.quantized && oq && inner == 1) {
                Impl::TableStep t{deferred, in, qTable, true, id};
                for (size_t i = 0; i + 1 < qTable.size(); ++i)
                    if (i % 256 != 255 && qTable[i] > qTable[i + 1]) t.nonDecreasing = false;
                im.tableSteps[out.buffer] = std::move(t);
            }
            im.steps.push_back(
                [&im, in, out, qTable, fTable, scale, shift, f, channels, inner, tables, deferred](int64_t batch) {
                    if (*deferred) return;
                    const int64_t total = batch * in.shape.numel(), outer = total / (channels * inner);
                    const int threads = threadsFor(im.threads, double(total), im.small.values);
                    if (in.quantized && out.quantized) {
                        cpu::applyChannelTables(threads, im.u8(in, batch).data(), im.u8(out, batch).data(), outer,
                                                channels, inner, qTable.data());
                    } else if (in.quantized) {
                        cpu::applyChannelTablesF32(threads, im.u8(in, batch).data(), im.f32(out, batch).data(), outer,
                                                   channels, inner, fTable.data());
                    } else {
                        const auto& src = im.f32(in, batch);
                        std::vector<float> y(static_cast<size_t>(total));
                        for (int64_t i = 0; i < total; ++i) {
                            const auto c = static_cast<size_t>(tables == 1 ? 0 : (i / inner) % channels);
                            y[size_t(i)] = f(src[size_t(i)], scale[c], shift[c]);
                        }
                        if (out.quantized) {
                            auto& dst = im.u8(out, batch);
                            for (int64_t i = 0; i < total; ++i) dst[size_t(i)] = quantize(y[size_t(i)], out.q);
                        } else {
                            im.f32(out, batch) = std::move(y);
                        }
                    }
                });
            describe(n, otherActivation ? "float32 " + n.type + " as a table on the uint8 grid"
                        : in.quantized  ? "float32 per channel as a table on the uint8 grid"
                                        : "float32");
            im.values[id] = out;
            continue;
        }
        if (n.type == "Add" || n.type == "GlobalAvgPool" || n.type == "AvgPool2D") {
            std::vector<Value> ins;
            for (size_t p = 0; p < graph.inputPorts(id).size(); ++p) ins.push_back(inputOf(n, p));
            bool onGrids = oq != nullptr && (n.type == "Add" || in.nhwc);
            for (const Value& v : ins) onGrids = onGrids && v.quantized && v.nhwc == ins[0].nhwc;
            if (!onGrids) {  // a float32 input or output, or a pooling of values that are not [C, H, W]
                im.values[id] = island(n, id, *type, params, shape, oq);
                continue;
            }
            out.buffer = im.newBuffer();
            out.quantized = true;
            out.q = *oq;
            out.nhwc = in.nhwc && shape.rank() == 3;
            std::array<int, 6> pool{};  // AvgPool2D: kernel, stride, padding (height, width)
            if (n.type == "AvgPool2D") {
                std::tie(pool[0], pool[1]) = pairOf(params, "kernel", {2, 2});
                std::tie(pool[2], pool[3]) = pairOf(params, "stride", {pool[0], pool[1]});
                std::tie(pool[4], pool[5]) = pairOf(params, "padding", {0, 0});
            }
            const std::string kind = n.type;
            if (kind == "Add" && ins.size() == 2) {
                // The same float expression as below, 16 values at a time (cpu::addOnGrids).
                im.steps.push_back([&im, ins, out](int64_t batch) {
                    auto& dst = im.u8(out, batch);
                    const auto total = static_cast<int64_t>(dst.size());
                    cpu::addOnGrids(threadsFor(im.threads, double(total), im.small.values), im.u8(ins[0], batch).data(),
                                    gridOf(ins[0].q), im.u8(ins[1], batch).data(), gridOf(ins[1].q), dst.data(),
                                    gridOf(out.q), total);
                });
                describe(n, std::string("float32 on dequantized uint8 values") +
                                (cpu::int8SimdInUse() ? ", 16 at a time (AVX-512)" : ""));
                im.values[id] = out;
                continue;
            }
            im.steps.push_back([&im, ins, out, kind, pool](int64_t batch) {
                auto& dst = im.u8(out, batch);
                if (kind == "Add") {
                    std::vector<const uint8_t*> src;
                    for (const Value& v : ins) src.push_back(im.u8(v, batch).data());
                    for (size_t i = 0; i < dst.size(); ++i) {
                        float sum = 0.0f;
                        for (size_t k = 0; k < ins.size(); ++k) sum += dequantize(src[k][i], ins[k].q);
                        dst[i] = quantize(sum, out.q);
                    }
                    return;
                }
                const Value& v = ins[0];
                const uint8_t* src = im.u8(v, batch).data();
                const int64_t c = v.shape[0], h = v.shape[1], w = v.shape[2];
                if (kind == "GlobalAvgPool") {
                    std::vector<int64_t> sums(size_t(batch * c));
                    cpu::channelSums(threadsFor(im.threads, double(batch * c * h * w), im.small.values), src, batch,
                                     h * w, c, v.q.zeroPoint, sums.data());
                    for (int64_t i = 0; i < batch * c; ++i)
                        dst[size_t(i)] = quantize(float(double(sums[size_t(i)]) * v.q.scale / double(h * w)), out.q);
                    return;
                }
                const int64_t oh = out.shape[1], ow = out.shape[2];
                for (int64_t s = 0; s < batch; ++s)
                    for (int64_t y = 0; y < oh; ++y)
                        for (int64_t x = 0; x < ow; ++x)
                            for (int64_t ch = 0; ch < c; ++ch) {
                                int64_t sum = 0, count = 0;
                                for (int64_t r = 0; r < pool[0]; ++r)
                                    for (int64_t q = 0; q < pool[1]; ++q) {
                                        const int64_t iy = y * pool[2] - pool[4] + r, ix = x * pool[3] - pool[5] + q;
                                        if (iy < 0 || ix < 0 || iy >= h || ix >= w) continue;
                                        sum += src[((s * h + iy) * w + ix) * c + ch] - v.q.zeroPoint;
                                        ++count;
                                    }
                                dst[size_t(((s * oh + y) * ow + x) * c + ch)] =
                                    quantize(float(double(sum) * v.q.scale / double(count)), out.q);
                            }
            });
            describe(n, "float32 on dequantized uint8 values, requantized");
            im.values[id] = out;
            continue;
        }
        // No integer path (LayerNorm, attention, embeddings, sequence pooling, Softmax, Concat, ...).
        im.values[id] = island(n, id, *type, params, shape, oq);
    }
    if (im.inputNode < 0 || im.outputNode < 0)
        throw std::runtime_error("int8 engine: the graph has no input or output");
    m_inputShape = im.inputShape;
    m_outputShape = im.values.at(im.outputNode).shape;
}

Int8Engine::~Int8Engine() = default;

std::vector<float> Int8Engine::run(const float* inputs, int64_t count, int batchSize) {
    Impl& im = *m_impl;
    const int64_t per = m_inputShape.numel(), outPer = m_outputShape.numel();
    std::vector<float> outputs(size_t(count * outPer));
    const Value& result = im.values.at(im.outputNode);
    for (int64_t start = 0; start < count; start += batchSize) {
        const int64_t b = std::min<int64_t>(batchSize, count - start);
        im.input = inputs + start * per;
        for (auto& step : im.steps) step(b);
        im.lastBatch = b;
        im.toNchw(result, b, outputs.data() + start * outPer);
    }
    return outputs;
}

std::vector<float> Int8Engine::nodeValues(const std::string& node) const {
    Impl& im = *m_impl;
    auto it = im.ids.find(node);
    if (it == im.ids.end() || !im.values.count(it->second))
        throw std::invalid_argument("int8 engine: no node '" + node + "'");
    if (im.deferredNodes.count(it->second))
        throw std::invalid_argument("int8 engine: node '" + node + "' is applied after the max pooling that reads it");
    const Value& v = im.values.at(it->second);
    std::vector<float> out(static_cast<size_t>(im.lastBatch * v.shape.numel()));
    im.toNchw(v, im.lastBatch, out.data());
    return out;
}

const std::vector<std::string>& Int8Engine::floatIslands() const { return m_impl->islandNodes; }

std::vector<std::string> Int8Engine::plan() const {
    std::vector<std::string> lines;
    for (const auto& [name, text] : m_impl->plan) lines.push_back(name + ": " + text());
    return lines;
}

}  // namespace strata
