// Layer types: the registry's contents, parameter validation and its error
// texts, shape rules (good shapes and the errors for bad ones), parameter
// specs, and forward values on tiny hand-computed inputs (reference CPU
// backend). Gradients are checked in test_gradcheck.cpp.
#include <QtTest>
#include <cmath>
#include <random>
#include <set>

#include "core/backend/CpuReferenceBackend.h"
#include "core/layers/LayerRegistry.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

const LayerType& type(const std::string& name) {
    const LayerType* t = layerRegistry().find(name);
    if (!t) throw std::runtime_error("layer type " + name + " is not registered");
    return *t;
}

Shape infer(const std::string& name, const Json& params, const std::vector<Shape>& inputs) {
    const LayerType& t = type(name);
    return t.inferShape(t.normalizeParams(params), inputs);
}

// The ParamError message of normalizeParams + inferShape, or "" when they pass.
std::string paramError(const std::string& name, const Json& params, const std::vector<Shape>& inputs = {},
                       std::string* param = nullptr) {
    try {
        const LayerType& t = type(name);
        const Json p = t.normalizeParams(params);
        if (!inputs.empty() || t.inputPorts(p).empty()) t.inferShape(p, inputs);
    } catch (const ParamError& e) {
        if (param) *param = e.param();
        return e.what();
    }
    return {};
}

// The ShapeError of inferShape, or "" when it passes; `port` gets the port it names.
std::string shapeError(const std::string& name, const Json& params, const std::vector<Shape>& inputs,
                       std::string* port = nullptr) {
    try {
        infer(name, params, inputs);
    } catch (const ShapeError& e) {
        if (port) *port = e.port();
        return e.what();
    }
    return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs one forward pass of a layer on host data and returns the output.
struct Run {
    std::vector<float> out;
    Shape outShape;
    std::vector<std::vector<float>> params;  // values after the forward (running statistics)
};

Run forward(Backend& b, const std::string& name, const Json& rawParams, const std::vector<Shape>& inShapes, int batch,
            const std::vector<std::vector<float>>& inputs, const std::vector<std::vector<float>>& paramValues,
            bool training = false, uint64_t seed = 0) {
    const LayerType& t = type(name);
    const Json params = t.normalizeParams(rawParams);
    const Shape outShape = t.inferShape(params, inShapes);
    auto layer = t.create(params, inShapes, outShape);
    const auto specs = t.parameterSpecs(params, inShapes);
    if (specs.size() != paramValues.size()) throw std::runtime_error("wrong number of parameter values");
    for (size_t i = 0; i < specs.size(); ++i) {
        if (static_cast<int64_t>(paramValues[i].size()) != specs[i].shape.numel())
            throw std::runtime_error("wrong size for parameter " + specs[i].name);
        Parameter p;
        p.name = specs[i].name;
        p.trainable = specs[i].trainable;
        p.value = b.fromHost(specs[i].shape, paramValues[i].data());
        if (p.trainable) p.grad = b.zeros(specs[i].shape);
        layer->parameters().push_back(std::move(p));
    }
    std::vector<Tensor> in;
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < inShapes.size(); ++i)
        in.push_back(b.fromHost(inShapes[i].withBatch(batch), inputs[i].data()));
    for (auto& x : in) ptrs.push_back(&x);
    Tensor out = b.empty(outShape.withBatch(batch));
    LayerContext ctx{b, training, seed};
    layer->forward(ctx, ptrs, out);
    Run r;
    r.outShape = outShape;
    r.out.resize(static_cast<size_t>(out.numel()));
    b.toHost(out, r.out.data());
    for (auto& p : layer->parameters()) {
        std::vector<float> v(static_cast<size_t>(p.value.numel()));
        b.toHost(p.value, v.data());
        r.params.push_back(std::move(v));
    }
    return r;
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
    QCOMPARE(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        QVERIFY2(
            std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i])),
            ("index " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]))
                .c_str());
}

// A layer's forward and backward on one backend: the output, the input gradient added to a random one and
// written over NaN (LayerContext::overwriteInputGrads), and every parameter gradient.
std::vector<std::vector<float>> forwardBackward(Backend& b, const std::string& name, const Json& rawParams,
                                                const Shape& inShape, int batch, uint64_t seed) {
    const LayerType& t = type(name);
    const Json params = t.normalizeParams(rawParams);
    const Shape outShape = t.inferShape(params, {inShape});
    auto layer = t.create(params, {inShape}, outShape);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    auto random = [&](int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v) x = u(rng);
        return v;
    };
    for (const ParameterSpec& spec : t.parameterSpecs(params, {inShape})) {
        Parameter p;
        p.name = spec.name;
        p.value = b.fromHost(spec.shape, random(spec.shape.numel()).data());
        p.grad = b.zeros(spec.shape);
        layer->parameters().push_back(std::move(p));
    }
    const Shape inBatched = inShape.withBatch(batch), outBatched = outShape.withBatch(batch);
    Tensor x = b.fromHost(inBatched, random(inBatched.numel()).data());
    Tensor y = b.empty(outBatched), dy = b.fromHost(outBatched, random(outBatched.numel()).data());
    Tensor dxAdd = b.fromHost(inBatched, random(inBatched.numel()).data());
    Tensor dxWrite =
        b.fromHost(inBatched, std::vector<float>(static_cast<size_t>(inBatched.numel()), std::nanf("")).data());
    LayerContext ctx{b, true, 0};
    layer->forward(ctx, {&x}, y);
    layer->backward(ctx, {&x}, y, dy, {&dxAdd});
    ctx.overwriteInputGrads = 1;
    layer->backward(ctx, {&x}, y, dy, {&dxWrite});
    auto down = [&](const Tensor& t) {
        std::vector<float> v(static_cast<size_t>(t.numel()));
        b.synchronize();
        b.toHost(t, v.data());
        return v;
    };
    std::vector<std::vector<float>> out{down(y), down(dxAdd), down(dxWrite)};
    for (const Parameter& p : layer->parameters()) out.push_back(down(p.grad));  // two backward passes' worth
    return out;
}

}  // namespace

class TestLayers : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<Backend> m_backend;

private slots:
    void initTestCase() { m_backend = test::makeReferenceBackend(); }

    // ---- registry -------------------------------------------------------------------
    void registryListsEveryType() {
        const std::map<std::string, std::string> expected = {
            {"Input", "Input"},
            {"Dense", "Core"},
            {"Flatten", "Core"},
            {"Reshape", "Core"},
            {"Add", "Core"},
            {"Concat", "Core"},
            {"Conv2D", "Convolution"},
            {"ConvTranspose2D", "Convolution"},
            {"Upsample2D", "Convolution"},
            {"MaxPool2D", "Convolution"},
            {"AvgPool2D", "Convolution"},
            {"GlobalAvgPool", "Convolution"},
            {"ReLU", "Activation"},
            {"LeakyReLU", "Activation"},
            {"GELU", "Activation"},
            {"Sigmoid", "Activation"},
            {"Tanh", "Activation"},
            {"Clip", "Activation"},
            {"HardSwish", "Activation"},
            {"Softmax", "Activation"},
            {"BatchNorm", "Normalization"},
            {"LayerNorm", "Normalization"},
            {"Dropout", "Normalization"},
            {"Embedding", "Text"},
            {"SequenceMeanPool", "Text"},
            {"PositionalEmbedding", "Text"},
            {"Conv1D", "Text"},
            {"SequenceMaxPool", "Text"},
            {"MultiHeadSelfAttention", "Text"},
        };
        const auto names = layerRegistry().names();
        QCOMPARE(names.size(), expected.size());
        for (const auto& [name, category] : expected) {
            const LayerType* t = layerRegistry().find(name);
            QVERIFY2(t, name.c_str());
            QCOMPARE(t->name(), name);
            QCOMPARE(t->category(), category);
            QVERIFY(!t->description().empty());
        }
        QVERIFY(layerRegistry().find("Dense2") == nullptr);
        QVERIFY(layerRegistry().find("dense") == nullptr);
    }

    void defaultsAreValid() {
        for (const auto& t : layerRegistry().all()) {
            const Json p = t->normalizeParams(Json::object());
            std::set<std::string> seen;
            for (const ParamSpec& s : t->paramSpecs()) {
                QVERIFY2(seen.insert(s.name).second, (t->name() + " repeats " + s.name).c_str());
                QVERIFY2(p.contains(s.name), (t->name() + "." + s.name).c_str());
                QVERIFY(!s.help.empty());
                QVERIFY(!s.allowedText().empty());
            }
            // Normalizing is idempotent, and null means "no params".
            QCOMPARE(t->normalizeParams(p), p);
            QCOMPARE(t->normalizeParams(Json()), p);
        }
    }

    void duplicateRegistrationFails() {
        LayerRegistry r;
        struct Dummy : LayerType {
            std::string name() const override { return "Dummy"; }
            std::string category() const override { return "Core"; }
            std::string description() const override { return "x"; }
            std::vector<ParamSpec> paramSpecs() const override { return {}; }
            Shape inferShape(const Json&, const std::vector<Shape>& in) const override { return in.at(0); }
            std::unique_ptr<Layer> create(const Json&, const std::vector<Shape>&, const Shape&) const override {
                return nullptr;
            }
            LayerCost cost(const Json&, const std::vector<Shape>&, const Shape&) const override { return {}; }
            CompressibleWeight compressibleWeight() const override { return {}; }
            ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
                return {};
            }
        };
        r.add(std::make_unique<Dummy>());
        QVERIFY_THROWS_EXCEPTION(std::logic_error, r.add(std::make_unique<Dummy>()));
        QCOMPARE(r.names(), std::vector<std::string>{"Dummy"});
    }

    // ---- parameter validation -----------------------------------------------------------
    void paramErrors() {
        std::string param;
        QCOMPARE(paramError("Dense", {{"units", 0}}, {Shape{4}}, &param),
                 std::string("units: 0 is out of range (1 to 1048576)"));
        QCOMPARE(param, std::string("units"));
        QCOMPARE(paramError("Dense", {{"units", "ten"}}, {Shape{4}}, &param),
                 std::string("units: \"ten\" is not an integer (allowed: 1 to 1048576)"));
        QCOMPARE(paramError("Dense", {{"units", 2.5}}, {Shape{4}}), std::string("units: 2.5 is not an integer "
                                                                                "(allowed: 1 to 1048576)"));
        QCOMPARE(paramError("Dense", {{"use_bias", 1}}, {Shape{4}}, &param),
                 std::string("use_bias: 1 is not a boolean (allowed: true or false)"));
        QCOMPARE(param, std::string("use_bias"));
        QCOMPARE(paramError("Dense", {{"init", "glorot"}}, {Shape{4}}),
                 std::string("init: \"glorot\" is not allowed (one of: he, xavier)"));
        QCOMPARE(paramError("Dense", {{"unit", 3}}, {Shape{4}}, &param),
                 std::string("unit: unknown parameter of Dense (known: units, use_bias, init)"));
        QCOMPARE(param, std::string("unit"));
        QCOMPARE(paramError("ReLU", {{"alpha", 0.1}}, {Shape{4}}),
                 std::string("alpha: unknown parameter of ReLU (it takes none)"));
        QCOMPARE(paramError("Dropout", {{"rate", 0.96}}, {Shape{4}}, &param),
                 std::string("rate: 0.96 is out of range (0 to 0.95)"));
        QCOMPARE(paramError("LeakyReLU", {{"alpha", -0.1}}, {Shape{4}}),
                 std::string("alpha: -0.1 is out of range (0 to 1)"));
        QCOMPARE(paramError("Conv2D", {{"kernel", {3, 3, 3}}}, {Shape{1, 8, 8}}, &param),
                 std::string("kernel: [3,3,3] has 3 items (allowed: a list of 1 to 2 integers, each 1 to 63)"));
        QCOMPARE(param, std::string("kernel"));
        QCOMPARE(paramError("Conv2D", {{"stride", {1, 0}}}, {Shape{1, 8, 8}}),
                 std::string("stride: item 1 of [1,0] is 0, out of range (1 to 64)"));
        QCOMPARE(paramError("Conv2D", {{"padding", "same"}}, {Shape{1, 8, 8}}),
                 std::string("padding: \"same\" is not a list of integers (allowed: a list of 1 to 2 integers, "
                             "each 0 to 64)"));
        QCOMPARE(paramError("Input", {{"shape", Json::array()}}),
                 std::string("shape: [] has 0 items (allowed: a list of 1 to 4 integers, each 1 to 16777216)"));
        QCOMPARE(paramError("Add", {{"inputs", 9}}, {Shape{4}}), std::string("inputs: 9 is out of range (2 to 8)"));
        QCOMPARE(paramError("Embedding", {{"vocab", 0}}, {Shape{4}}),
                 std::string("vocab: 0 is out of range (1 to 16777216)"));
        // Rules across parameters and shapes, from inferShape.
        QCOMPARE(paramError("Reshape", {{"shape", {-1, -1}}}, {Shape{4}}, &param),
                 std::string("shape: [-1, -1] has more than one -1 (at most one dimension can be inferred)"));
        QCOMPARE(param, std::string("shape"));
        QCOMPARE(paramError("Reshape", {{"shape", {0, 4}}}, {Shape{4}}),
                 std::string("shape: [0, 4] has a 0 dimension (each item must be at least 1, or -1 to infer it)"));
        QCOMPARE(paramError("Conv2D", {{"filters", 3}, {"groups", 2}}, {Shape{4, 8, 8}}, &param),
                 std::string("filters: 3 is not divisible by groups = 2"));
        QCOMPARE(param, std::string("filters"));
        QCOMPARE(paramError("MaxPool2D", {{"kernel", 2}, {"padding", 2}}, {Shape{1, 8, 8}}, &param),
                 std::string("padding: [2] is more than half the kernel [2]"));
        QCOMPARE(paramError("Concat", {{"axis", 3}}, {Shape{2, 4, 4}, Shape{2, 4, 4}}, &param),
                 std::string("axis: 3 is out of range for in0 of shape [2, 4, 4] (0 to 2)"));
        QCOMPARE(param, std::string("axis"));
        QVERIFY(contains(paramError("Dense", "not an object"), "parameters must be a JSON object"));
    }

    void paramNormalization() {
        // Integral floats become integers, a bare integer becomes a one-item list, defaults are filled in order.
        const Json p = type("Conv2D").normalizeParams({{"filters", 8.0}, {"kernel", 5}});
        QCOMPARE(p.dump(), std::string(R"({"filters":8,"kernel":[5],"stride":[1,1],"padding":[0,0],)"
                                       R"("dilation":[1,1],"groups":1,"use_bias":true,"init":"he"})"));
        QCOMPARE(infer("Conv2D", p, {Shape{1, 9, 9}}), (Shape{8, 5, 5}));
        const Json pool = type("MaxPool2D").normalizeParams(Json::object());
        QCOMPARE(pool["stride"], Json::array());
        QCOMPARE(type("Dropout").normalizeParams({{"rate", 0}})["rate"].get<double>(), 0.0);
    }

    void allowedText() {
        ParamSpec s;
        s.name = "x";
        s.kind = ParamSpec::Kind::Float;
        s.min = 1e-12;
        s.max = 1;
        QCOMPARE(s.allowedText(), std::string("1e-12 to 1"));
        s.kind = ParamSpec::Kind::IntList;
        s.minItems = s.maxItems = 2;
        s.min = 1;
        s.max = 64;
        QCOMPARE(s.allowedText(), std::string("a list of 2 integers, each 1 to 64"));
        s.kind = ParamSpec::Kind::Choice;
        s.choices = {"a", "b"};
        QCOMPARE(s.allowedText(), std::string("one of: a, b"));
    }

    // ---- shape rules ------------------------------------------------------------------
    void shapesGood() {
        QCOMPARE(infer("Input", {{"shape", {1, 28, 28}}}, {}), (Shape{1, 28, 28}));
        QCOMPARE(infer("Dense", {{"units", 10}}, {Shape{784}}), (Shape{10}));
        QCOMPARE(infer("Conv2D", {{"filters", 8}}, {Shape{1, 28, 28}}), (Shape{8, 26, 26}));
        QCOMPARE(infer("Conv2D", {{"filters", 8}, {"padding", 1}}, {Shape{1, 28, 28}}), (Shape{8, 28, 28}));
        QCOMPARE(infer("Conv2D", {{"filters", 8}, {"stride", 2}, {"padding", 1}}, {Shape{1, 28, 28}}),
                 (Shape{8, 14, 14}));
        QCOMPARE(infer("Conv2D", {{"filters", 4}, {"dilation", 2}}, {Shape{1, 28, 28}}), (Shape{4, 24, 24}));
        QCOMPARE(infer("Conv2D", {{"filters", 4}, {"kernel", {1, 3}}, {"groups", 2}}, {Shape{2, 5, 5}}),
                 (Shape{4, 5, 3}));
        QCOMPARE(infer("MaxPool2D", {}, {Shape{8, 28, 28}}), (Shape{8, 14, 14}));
        QCOMPARE(infer("MaxPool2D", {{"kernel", 3}, {"stride", 2}, {"padding", 1}}, {Shape{8, 28, 28}}),
                 (Shape{8, 14, 14}));
        QCOMPARE(infer("AvgPool2D", {{"kernel", {2, 3}}, {"stride", 1}}, {Shape{3, 5, 5}}), (Shape{3, 4, 3}));
        QCOMPARE(infer("MaxPool2D", {}, {Shape{1, 7, 7}}), (Shape{1, 3, 3}));  // floor, as PyTorch
        QCOMPARE(infer("GlobalAvgPool", {}, {Shape{64, 7, 7}}), (Shape{64}));
        QCOMPARE(infer("Flatten", {}, {Shape{64, 7, 7}}), (Shape{3136}));
        QCOMPARE(infer("Reshape", {{"shape", {1, 28, 28}}}, {Shape{784}}), (Shape{1, 28, 28}));
        QCOMPARE(infer("Reshape", {{"shape", {-1, 7}}}, {Shape{7, 7}}), (Shape{7, 7}));
        for (const char* act :
             {"ReLU", "LeakyReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "Dropout", "LayerNorm", "BatchNorm"})
            QCOMPARE(infer(act, {}, {Shape{3, 4, 5}}), (Shape{3, 4, 5}));
        QCOMPARE(infer("BatchNorm", {}, {Shape{16}}), (Shape{16}));
        QCOMPARE(infer("Add", {{"inputs", 3}}, {Shape{4, 2}, Shape{4, 2}, Shape{4, 2}}), (Shape{4, 2}));
        QCOMPARE(infer("Concat", {}, {Shape{3, 4, 4}, Shape{5, 4, 4}}), (Shape{8, 4, 4}));
        QCOMPARE(infer("Concat", {{"inputs", 3}, {"axis", 1}}, {Shape{2, 1}, Shape{2, 3}, Shape{2, 2}}), (Shape{2, 6}));
        QCOMPARE(infer("Embedding", {{"dim", 16}}, {Shape{12}}), (Shape{12, 16}));
        QCOMPARE(infer("SequenceMeanPool", {}, {Shape{12, 16}}), (Shape{16}));
        QCOMPARE(infer("SequenceMaxPool", {{"masked", true}}, {Shape{12, 16}, Shape{12}}), (Shape{16}));
        QCOMPARE(infer("MultiHeadSelfAttention", {{"heads", 4}}, {Shape{10, 32}}), (Shape{10, 32}));
        QCOMPARE(infer("MultiHeadSelfAttention", {{"masked", true}}, {Shape{10, 32}, Shape{10}}), (Shape{10, 32}));
    }

    void shapesBad() {
        std::string port;
        std::string e = shapeError("Dense", {}, {Shape{1, 28, 28}}, &port);
        QCOMPARE(port, std::string("in"));
        QCOMPARE(e, std::string("in: Dense expects a per-sample shape [features] or [length, features], got "
                                "[1, 28, 28]; add a Flatten before it"));
        e = shapeError("Conv2D", {}, {Shape{784}}, &port);
        QCOMPARE(port, std::string("in"));
        QVERIFY2(contains(e, "rank 3 [channels, height, width], got [784]") && contains(e, "Reshape"), e.c_str());
        e = shapeError("Conv2D", {{"groups", 2}, {"filters", 4}}, {Shape{3, 8, 8}}, &port);
        QVERIFY2(contains(e, "in: Conv2D expects a channel count divisible by groups = 2, got [3, 8, 8]"), e.c_str());
        QVERIFY_THROWS_EXCEPTION(
            ParamError,
            layerRegistry()
                .find("ConvTranspose2D")
                ->inferShape(
                    layerRegistry().find("ConvTranspose2D")->normalizeParams({{"stride", 2}, {"output_padding", 2}}),
                    {Shape{1, 4, 4}}));
        QVERIFY_THROWS_EXCEPTION(
            ParamError, layerRegistry().find("Clip")->inferShape(
                            layerRegistry().find("Clip")->normalizeParams({{"min", 1}, {"max", 0}}), {Shape{4}}));
        e = shapeError("Conv2D", {{"kernel", 5}}, {Shape{1, 4, 4}});
        QVERIFY2(contains(e, "got [1, 4, 4]") && contains(e, "5 x 5"), e.c_str());
        e = shapeError("Conv2D", {{"kernel", 3}, {"dilation", 3}}, {Shape{1, 6, 6}});
        QVERIFY2(contains(e, "7 x 7"), e.c_str());
        e = shapeError("MaxPool2D", {{"kernel", 4}}, {Shape{2, 3, 8}}, &port);
        QVERIFY2(port == "in" && contains(e, "got [2, 3, 8]") && contains(e, "4 x 4"), e.c_str());
        e = shapeError("AvgPool2D", {}, {Shape{10}});
        QVERIFY2(contains(e, "got [10]"), e.c_str());
        e = shapeError("GlobalAvgPool", {}, {Shape{8}}, &port);
        QVERIFY2(port == "in" && contains(e, "rank 3") && contains(e, "got [8]"), e.c_str());
        e = shapeError("Reshape", {{"shape", {3, 5}}}, {Shape{4, 4}}, &port);
        QCOMPARE(e, std::string("in: Reshape expects 15 elements per sample to fill [3, 5], got [4, 4] "
                                "(16 elements)"));
        e = shapeError("Reshape", {{"shape", {-1, 3}}}, {Shape{10}});
        QVERIFY2(contains(e, "divisible by 3") && contains(e, "got [10]"), e.c_str());
        e = shapeError("BatchNorm", {}, {Shape{1, 2, 3, 4}});
        QVERIFY2(contains(e, "got [1, 2, 3, 4]"), e.c_str());
        e = shapeError("Add", {{"inputs", 3}}, {Shape{4}, Shape{4}, Shape{5}}, &port);
        QCOMPARE(port, std::string("in2"));
        QCOMPARE(e, std::string("in2: Add expects [4] (the shape of in0), got [5]"));
        e = shapeError("Add", {}, {Shape{4}}, &port);
        QCOMPARE(port, std::string("in1"));
        QVERIFY2(contains(e, "takes 2 inputs, got 1"), e.c_str());
        e = shapeError("Concat", {}, {Shape{3, 4, 4}, Shape{3, 5, 4}}, &port);
        QCOMPARE(port, std::string("in1"));
        QCOMPARE(e, std::string("in1: Concat expects [*, 4, 4] (the shape of in0 except along axis 0), got [3, 5, 4]"));
        e = shapeError("Concat", {{"axis", 1}}, {Shape{3, 4}, Shape{3, 4, 1}}, &port);
        QVERIFY2(port == "in1" && contains(e, "[3, *]"), e.c_str());
        e = shapeError("Embedding", {}, {Shape{3, 4}});
        QVERIFY2(contains(e, "[length] (token ids), got [3, 4]"), e.c_str());
        e = shapeError("SequenceMeanPool", {}, {Shape{12}});
        QVERIFY2(contains(e, "got [12]") && contains(e, "Embedding"), e.c_str());
        e = shapeError("SequenceMeanPool", {{"masked", true}}, {Shape{12, 4}, Shape{11}}, &port);
        QVERIFY2(port == "mask" && contains(e, "[12], one value per position") && contains(e, "got [11]"), e.c_str());
        e = shapeError("MultiHeadSelfAttention", {{"masked", true}}, {Shape{12, 8}}, &port);
        QVERIFY2(port == "mask" && contains(e, "takes 2 inputs, got 1"), e.c_str());
        std::string param;
        e = paramError("MultiHeadSelfAttention", {{"heads", 3}}, {Shape{5, 8}}, &param);
        QVERIFY2(param == "heads" && contains(e, "width 8") && contains(e, "3 heads"), e.c_str());
        e = shapeError("Input", {}, {Shape{4}});
        QVERIFY2(contains(e, "takes 0 inputs, got 1"), e.c_str());
    }

    void portsAndDifferentiability() {
        QCOMPARE(type("Dense").inputPorts(type("Dense").normalizeParams({})), std::vector<std::string>{"in"});
        QVERIFY(type("Input").inputPorts(type("Input").normalizeParams({})).empty());
        QCOMPARE(type("Add").inputPorts(type("Add").normalizeParams({{"inputs", 3}})),
                 (std::vector<std::string>{"in0", "in1", "in2"}));
        QCOMPARE(type("Concat").inputPorts(type("Concat").normalizeParams({})),
                 (std::vector<std::string>{"in0", "in1"}));
        QVERIFY(!type("Embedding").inputDifferentiable(0));
        const LayerType& att = type("MultiHeadSelfAttention");
        QCOMPARE(att.inputPorts(att.normalizeParams({})), std::vector<std::string>{"in"});
        QCOMPARE(att.inputPorts(att.normalizeParams({{"masked", true}})), (std::vector<std::string>{"in", "mask"}));
        QCOMPARE(att.inputPorts(Json{{"masked", "yes"}}), std::vector<std::string>{"in"});  // raw params: no mask
        QVERIFY(att.inputDifferentiable(0) && !att.inputDifferentiable(1));
        QVERIFY(!type("SequenceMaxPool").inputDifferentiable(1));
        QVERIFY(type("Dense").inputDifferentiable(0));
    }

    void parameterSpecs() {
        const LayerType& dense = type("Dense");
        auto specs = dense.parameterSpecs(dense.normalizeParams({{"units", 10}}), {Shape{784}});
        QCOMPARE(specs.size(), size_t(2));
        QCOMPARE(specs[0].name, std::string("weight"));
        QCOMPARE(specs[0].shape, (Shape{10, 784}));
        QVERIFY(specs[0].init == Init::HeUniform);
        QCOMPARE(specs[0].fanIn, int64_t(784));
        QCOMPARE(specs[0].fanOut, int64_t(10));
        QCOMPARE(specs[1].name, std::string("bias"));
        QVERIFY(specs[1].init == Init::Zeros);
        specs = dense.parameterSpecs(dense.normalizeParams({{"units", 10}, {"use_bias", false}, {"init", "xavier"}}),
                                     {Shape{784}});
        QCOMPARE(specs.size(), size_t(1));
        QVERIFY(specs[0].init == Init::XavierUniform);

        const LayerType& conv = type("Conv2D");
        specs = conv.parameterSpecs(conv.normalizeParams({{"filters", 8}, {"kernel", {3, 5}}, {"groups", 2}}),
                                    {Shape{4, 9, 9}});
        QCOMPARE(specs[0].shape, (Shape{8, 2, 3, 5}));
        QCOMPARE(specs[0].fanIn, int64_t(2 * 15));
        QCOMPARE(specs[0].fanOut, int64_t(4 * 15));
        QCOMPARE(specs[1].shape, (Shape{8}));

        const LayerType& bn = type("BatchNorm");
        specs = bn.parameterSpecs(bn.normalizeParams({}), {Shape{6, 4, 4}});
        QCOMPARE(specs.size(), size_t(4));
        const char* names[] = {"gamma", "beta", "running_mean", "running_var"};
        const Init inits[] = {Init::Ones, Init::Zeros, Init::Zeros, Init::Ones};
        for (int i = 0; i < 4; ++i) {
            QCOMPARE(specs[size_t(i)].name, std::string(names[i]));
            QCOMPARE(specs[size_t(i)].shape, (Shape{6}));
            QVERIFY(specs[size_t(i)].init == inits[i]);
            QCOMPARE(specs[size_t(i)].trainable, i < 2);
        }
        const LayerType& ln = type("LayerNorm");
        specs = ln.parameterSpecs(ln.normalizeParams({}), {Shape{5, 16}});
        QCOMPARE(specs.size(), size_t(2));
        QCOMPARE(specs[0].shape, (Shape{16}));
        const LayerType& emb = type("Embedding");
        specs = emb.parameterSpecs(emb.normalizeParams({{"vocab", 100}, {"dim", 8}}), {Shape{12}});
        QCOMPARE(specs.size(), size_t(1));
        QCOMPARE(specs[0].shape, (Shape{100, 8}));
        for (const char* none : {"Input", "ReLU", "MaxPool2D", "Flatten", "Add", "Concat", "Dropout"}) {
            const LayerType& t = type(none);
            const Json p = t.normalizeParams({});
            std::vector<Shape> in(t.inputPorts(p).size(), Shape{2, 4, 4});
            QVERIFY2(t.parameterSpecs(p, in).empty(), none);
        }
    }

    // ---- forward values on tiny hand-computed inputs ------------------------------------
    void denseForward() {
        // x = [1, 2, 3], [0, 1, 0]; W = [[1, 0, -1], [2, 1, 0]]; b = [0.5, -1]
        const Run r = forward(*m_backend, "Dense", {{"units", 2}}, {Shape{3}}, 2, {{1, 2, 3, 0, 1, 0}},
                              {{1, 0, -1, 2, 1, 0}, {0.5f, -1}});
        expectNear(r.out, {-1.5f, 3, 0.5f, 0});
    }

    void conv2dForward() {
        // 3x3 image 1..9, 2x2 kernel [[1, 2], [3, 4]], bias 1.
        Run r = forward(*m_backend, "Conv2D", {{"filters", 1}, {"kernel", 2}}, {Shape{1, 3, 3}}, 1,
                        {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, {{1, 2, 3, 4}, {1}});
        QCOMPARE(r.outShape, (Shape{1, 2, 2}));
        expectNear(r.out, {38, 48, 68, 78});
        // Padding 1, stride 2, no bias, two filters (the second the identity tap at the bottom-right).
        r = forward(*m_backend, "Conv2D",
                    {{"filters", 2}, {"kernel", 2}, {"padding", 1}, {"stride", 2}, {"use_bias", false}},
                    {Shape{1, 3, 3}}, 1, {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, {{1, 2, 3, 4, 0, 0, 0, 1}});
        QCOMPARE(r.outShape, (Shape{2, 2, 2}));
        // Filter 0 windows (top-left corner at -1,-1 / -1,1 / 1,-1 / 1,1): 4*1; 3*2+4*3; 7*2+8*4... computed:
        // (-1,-1): x00*4 = 4; (-1,1): x01*3 + x02*4 = 6 + 12 = 18; (1,-1): x10*2 + x20*4 = 8 + 28 = 36;
        // (1,1): x11*1 + x12*2 + x21*3 + x22*4 = 5 + 12 + 24 + 36 = 77. Filter 1 picks the bottom-right tap.
        expectNear(r.out, {4, 18, 36, 77, 1, 3, 7, 9});
    }

    void convTranspose2dForward() {
        // 2x2 image [[1, 2], [3, 4]], 2x2 kernel [[1, 2], [3, 4]], stride 1: every input value adds its scaled
        // kernel at its position (y[i + a][j + b] += x[i][j] w[a][b]), plus the bias 0.5.
        Run r = forward(*m_backend, "ConvTranspose2D", {{"filters", 1}, {"kernel", 2}}, {Shape{1, 2, 2}}, 1,
                        {{1, 2, 3, 4}}, {{1, 2, 3, 4}, {0.5f}});
        QCOMPARE(r.outShape, (Shape{1, 3, 3}));
        expectNear(r.out, {1.5f, 4.5f, 4.5f, 6.5f, 20.5f, 16.5f, 9.5f, 24.5f, 16.5f});
        // Stride 2 with a 2x2 kernel of ones: each value becomes a 2x2 block.
        r = forward(*m_backend, "ConvTranspose2D", {{"filters", 1}, {"kernel", 2}, {"stride", 2}, {"use_bias", false}},
                    {Shape{1, 2, 2}}, 1, {{1, 2, 3, 4}}, {{1, 1, 1, 1}});
        QCOMPARE(r.outShape, (Shape{1, 4, 4}));
        expectNear(r.out, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
        // Padding 1 crops the blocks' first row and column; output padding 1 keeps a last row and column
        // (PyTorch: [[1, 2, 2], [3, 4, 4], [3, 4, 4]]).
        r = forward(
            *m_backend, "ConvTranspose2D",
            {{"filters", 1}, {"kernel", 2}, {"stride", 2}, {"padding", 1}, {"output_padding", 1}, {"use_bias", false}},
            {Shape{1, 2, 2}}, 1, {{1, 2, 3, 4}}, {{1, 1, 1, 1}});
        QCOMPARE(r.outShape, (Shape{1, 3, 3}));
        expectNear(r.out, {1, 2, 2, 3, 4, 4, 3, 4, 4});
        // A 1x1 kernel at stride 2 leaves gaps; output padding adds a row and a column that no tap reaches.
        r = forward(*m_backend, "ConvTranspose2D",
                    {{"filters", 1}, {"kernel", 1}, {"stride", 2}, {"output_padding", 1}, {"use_bias", false}},
                    {Shape{1, 2, 2}}, 1, {{1, 2, 3, 4}}, {{1}});
        QCOMPARE(r.outShape, (Shape{1, 4, 4}));
        expectNear(r.out, {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0});
        // Two groups of one channel each, two filters a group: weight [2, 2, 1, 1].
        r = forward(*m_backend, "ConvTranspose2D", {{"filters", 4}, {"kernel", 1}, {"groups", 2}, {"use_bias", false}},
                    {Shape{2, 1, 1}}, 1, {{2, 3}}, {{1, 10, 100, 1000}});
        expectNear(r.out, {2, 20, 300, 3000});
    }

    void upsampleClipHardSwishForward() {
        expectNear(forward(*m_backend, "Upsample2D", {{"scale", {1, 3}}}, {Shape{1, 1, 2}}, 1, {{1, 2}}, {}).out,
                   {1, 1, 1, 2, 2, 2});
        // Bilinear doubling of [1, 3] along the width: PyTorch gives 1, 1.5, 2.5, 3.
        expectNear(forward(*m_backend, "Upsample2D", {{"scale", {1, 2}}, {"mode", "bilinear"}}, {Shape{1, 1, 2}}, 1,
                           {{1, 3}}, {})
                       .out,
                   {1, 1.5f, 2.5f, 3});
        expectNear(forward(*m_backend, "Clip", {}, {Shape{4}}, 1, {{-1, 2, 6, 9}}, {}).out, {0, 2, 6, 6});
        expectNear(forward(*m_backend, "Clip", {{"min", -0.5}, {"max", 0.5}}, {Shape{3}}, 1, {{-1, 0.25f, 9}}, {}).out,
                   {-0.5f, 0.25f, 0.5f});
        expectNear(forward(*m_backend, "HardSwish", {}, {Shape{4}}, 1, {{-4, -1, 1, 4}}, {}).out,
                   {0, -1.0f / 3, 2.0f / 3, 4});
    }

    // The image layers of issue 37 run on the fast CPU path (and each GPU) as on the reference: output, both
    // ways of giving the input gradient, parameter gradients. ConvTranspose2D reaches the backends' convolutions
    // in another order (backward-data forward, with no input tensor x), where a path could read what it need not.
    void newImageLayersOnEveryBackend_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("params");
        QTest::addColumn<QString>("shape");
        auto row = [](const char* tag, const char* name, const char* params, const char* shape) {
            QTest::newRow(tag) << QString(name) << QString(params) << QString(shape);
        };
        row("convT 4x4 s2", "ConvTranspose2D", R"({"filters": 5, "kernel": 4, "stride": 2, "padding": 1})",
            "[3, 7, 6]");
        row("convT 3x3 s1 (Winograd-sized)", "ConvTranspose2D", R"({"filters": 16, "kernel": 3, "padding": 1})",
            "[16, 9, 9]");
        row("convT grouped dilated", "ConvTranspose2D",
            R"({"filters": 6, "kernel": [3, 2], "stride": [2, 3], "padding": [1, 0], "output_padding": [1, 2],
                "dilation": [1, 2], "groups": 2, "use_bias": false})",
            "[4, 5, 6]");
        row("convT depthwise", "ConvTranspose2D", R"({"filters": 32, "kernel": 3, "stride": 2, "groups": 32})",
            "[32, 4, 4]");
        row("upsample nearest", "Upsample2D", R"({"scale": [2, 3]})", "[3, 5, 4]");
        row("upsample bilinear", "Upsample2D", R"({"mode": "bilinear"})", "[3, 5, 4]");
        row("upsample bilinear corners", "Upsample2D", R"({"mode": "bilinear", "align_corners": true, "scale": 3})",
            "[2, 4, 5]");
        row("clip", "Clip", R"({"min": -1, "max": 2.5})", "[3, 5, 4]");
        row("hardswish", "HardSwish", "{}", "[3, 5, 4]");
        row("depthwise conv 32", "Conv2D", R"({"filters": 32, "kernel": 3, "padding": 1, "groups": 32})", "[32, 6, 6]");
        row("grouped conv 4", "Conv2D", R"({"filters": 12, "kernel": 3, "groups": 4})", "[8, 6, 6]");
    }
    void newImageLayersOnEveryBackend() {
        QFETCH(QString, name);
        QFETCH(QString, params);
        QFETCH(QString, shape);
        const Shape in(Json::parse(shape.toStdString()).get<std::vector<int64_t>>());
        const Json p = Json::parse(params.toStdString());
        const auto want = forwardBackward(*m_backend, name.toStdString(), p, in, 3, 7);
        for (test::NamedBackend& nb : test::fastBackends()) {
            const auto got = forwardBackward(*nb.backend, name.toStdString(), p, in, 3, 7);
            QCOMPARE(got.size(), want.size());
            for (size_t k = 0; k < want.size(); ++k) {
                double scale = 1;
                for (float v : want[k]) scale = std::max(scale, static_cast<double>(std::fabs(v)));
                for (size_t i = 0; i < want[k].size(); ++i)
                    QVERIFY2(std::fabs(got[k][i] - want[k][i]) <= 1e-4 * scale,
                             (nb.name + " output " + std::to_string(k) + " element " + std::to_string(i) + ": got " +
                              std::to_string(got[k][i]) + ", reference " + std::to_string(want[k][i]))
                                 .c_str());
            }
        }
        if (const std::string why = test::gpuUnavailableReason(); !why.empty())
            qInfo("checked on the CPU fast path only; no GPU: %s", why.c_str());
    }

    void maxPoolForward() {
        const Run r = forward(*m_backend, "MaxPool2D", {}, {Shape{1, 4, 4}}, 1,
                              {{1, 5, 2, 0, 3, 4, 8, 1, -1, -2, -3, -4, 0, -5, 6, 2}}, {});
        QCOMPARE(r.outShape, (Shape{1, 2, 2}));
        expectNear(r.out, {5, 8, 0, 6});
        const Run a = forward(*m_backend, "AvgPool2D", {}, {Shape{1, 2, 2}}, 1, {{1, 2, 3, 6}}, {});
        expectNear(a.out, {3});
    }

    void softmaxForward() {
        const float l2 = std::log(2.0f), l3 = std::log(3.0f);
        const Run r = forward(*m_backend, "Softmax", {}, {Shape{3}}, 2, {{0, l2, l3, 100, 100, 100}}, {});
        expectNear(r.out, {1 / 6.0f, 2 / 6.0f, 3 / 6.0f, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f});
    }

    void batchNormForward() {
        // Eval: y = (x - mean) / sqrt(var + eps) * gamma + beta with the running statistics.
        // gamma [2, 1], beta [0, 1], running_mean [1, 2], running_var [4, 1].
        Run r = forward(*m_backend, "BatchNorm", {{"eps", 1e-12}}, {Shape{2}}, 2, {{1, 2, 3, 4}},
                        {{2, 1}, {0, 1}, {1, 2}, {4, 1}});
        expectNear(r.out, {0, 1, 2, 3});
        // Training: batch statistics (channel 0: {1, 3}, mean 2, biased var 1; channel 1: {2, 6}, mean 4,
        // var 4), and running stats move by momentum 0.5 towards mean and UNBIASED variance (2 and 8).
        r = forward(*m_backend, "BatchNorm", {{"eps", 1e-12}, {"momentum", 0.5}}, {Shape{2}}, 2, {{1, 2, 3, 6}},
                    {{1, 1}, {0, 0}, {0, 0}, {1, 1}}, true);
        expectNear(r.out, {-1, -1, 1, 1});
        expectNear(r.params[2], {1, 2});
        expectNear(r.params[3], {1.5f, 4.5f});
    }

    void concatForward() {
        // Per sample [1, 2] ++ [2, 2] along axis 0, batch 2: samples must not mix.
        Run r = forward(*m_backend, "Concat", {}, {Shape{1, 2}, Shape{2, 2}}, 2,
                        {{1, 2, 3, 4}, {10, 11, 12, 13, 20, 21, 22, 23}}, {});
        QCOMPARE(r.outShape, (Shape{3, 2}));
        expectNear(r.out, {1, 2, 10, 11, 12, 13, 3, 4, 20, 21, 22, 23});
        // Along the last axis.
        r = forward(*m_backend, "Concat", {{"axis", 1}}, {Shape{2, 1}, Shape{2, 2}}, 1, {{1, 2}, {10, 11, 20, 21}}, {});
        expectNear(r.out, {1, 10, 11, 2, 20, 21});
    }

    void embeddingForward() {
        const Run r = forward(*m_backend, "Embedding", {{"vocab", 3}, {"dim", 2}}, {Shape{3}}, 1, {{2, 0, 2}},
                              {{0, 1, 10, 11, 20, 21}});
        QCOMPARE(r.outShape, (Shape{3, 2}));
        expectNear(r.out, {20, 21, 0, 1, 20, 21});
        const Run pooled = forward(*m_backend, "SequenceMeanPool", {}, {Shape{3, 2}}, 1, {r.out}, {});
        expectNear(pooled.out, {40 / 3.0f, 43 / 3.0f});
    }

    // Masked pooling leaves padding (id 0) out; a sample of padding only gives 0.
    void maskedSequencePools() {
        const std::vector<float> x{1, 2, 10, -20, 3, 4, /* second sample */ 7, 8, 9, 10, 11, 12};
        const std::vector<float> ids{5, 0, 1, 0, 0, 0};
        const Run mean =
            forward(*m_backend, "SequenceMeanPool", {{"masked", true}}, {Shape{3, 2}, Shape{3}}, 2, {x, ids}, {});
        expectNear(mean.out, {2, 3, 0, 0});
        const Run max =
            forward(*m_backend, "SequenceMaxPool", {{"masked", true}}, {Shape{3, 2}, Shape{3}}, 2, {x, ids}, {});
        expectNear(max.out, {3, 4, 0, 0});
        const Run unmasked = forward(*m_backend, "SequenceMaxPool", {}, {Shape{3, 2}}, 2, {x}, {});
        expectNear(unmasked.out, {10, 4, 11, 12});
    }

    // Attention against its formula written out in double precision: 2 heads over width 4, 3 positions, batch 2,
    // the last position of the second sample padding (never attended to).
    void attentionMatchesTheFormula() {
        const int T = 3, D = 4, H = 2, dh = 2, N = 2;
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        auto random = [&](size_t n) {
            std::vector<float> v(n);
            for (float& e : v) e = u(rng);
            return v;
        };
        const std::vector<float> x = random(N * T * D), win = random(3 * D * D), bin = random(3 * D),
                                 wout = random(D * D), bout = random(D);
        const std::vector<float> ids{5, 2, 7, 3, 1, 0};
        const Run r = forward(*m_backend, "MultiHeadSelfAttention", {{"heads", H}, {"masked", true}},
                              {Shape{T, D}, Shape{T}}, N, {x, ids}, {win, bin, wout, bout});
        std::vector<float> want;
        for (int n = 0; n < N; ++n) {
            std::vector<double> qkv(T * 3 * D), ctx(T * D, 0.0);
            for (int t = 0; t < T; ++t)
                for (int o = 0; o < 3 * D; ++o) {
                    double a = bin[o];
                    for (int i = 0; i < D; ++i) a += double(x[(n * T + t) * D + i]) * win[o * D + i];
                    qkv[t * 3 * D + o] = a;
                }
            for (int h = 0; h < H; ++h)
                for (int i = 0; i < T; ++i) {
                    std::vector<double> w(T, 0.0);
                    double total = 0;
                    for (int j = 0; j < T; ++j) {
                        if (ids[n * T + j] == 0) continue;
                        double dot = 0;
                        for (int c = 0; c < dh; ++c)
                            dot += qkv[i * 3 * D + h * dh + c] * qkv[j * 3 * D + D + h * dh + c];
                        w[j] = std::exp(dot / std::sqrt(double(dh)));
                        total += w[j];
                    }
                    for (int j = 0; j < T; ++j)
                        for (int c = 0; c < dh; ++c)
                            ctx[i * D + h * dh + c] += w[j] / total * qkv[j * 3 * D + 2 * D + h * dh + c];
                }
            for (int t = 0; t < T; ++t)
                for (int o = 0; o < D; ++o) {
                    double a = bout[o];
                    for (int i = 0; i < D; ++i) a += ctx[t * D + i] * wout[o * D + i];
                    want.push_back(static_cast<float>(a));
                }
        }
        expectNear(r.out, want, 1e-5f);
        // Unmasked, the padding position is attended to and the second sample's outputs change.
        const Run open = forward(*m_backend, "MultiHeadSelfAttention", {{"heads", H}}, {Shape{T, D}}, N, {x},
                                 {win, bin, wout, bout});
        expectNear({open.out.begin(), open.out.begin() + T * D}, {want.begin(), want.begin() + T * D}, 1e-5f);
        double moved = 0;
        for (size_t i = T * D; i < want.size(); ++i) moved = std::max(moved, double(std::fabs(open.out[i] - want[i])));
        QVERIFY(moved > 1e-4);
    }

    void otherForwards() {
        expectNear(forward(*m_backend, "GlobalAvgPool", {}, {Shape{2, 1, 2}}, 1, {{1, 3, 5, 9}}, {}).out, {2, 7});
        expectNear(forward(*m_backend, "LeakyReLU", {{"alpha", 0.5}}, {Shape{3}}, 1, {{-2, 0, 3}}, {}).out, {-1, 0, 3});
        expectNear(forward(*m_backend, "Add", {{"inputs", 3}}, {Shape{2}, Shape{2}, Shape{2}}, 1,
                           {{1, 2}, {10, 20}, {100, 200}}, {})
                       .out,
                   {111, 222});
        expectNear(forward(*m_backend, "LayerNorm", {{"eps", 1e-12}}, {Shape{2}}, 1, {{1, 3}}, {{2, 1}, {0, 5}}).out,
                   {-2, 6});
        expectNear(forward(*m_backend, "Reshape", {{"shape", {2, -1}}}, {Shape{4}}, 1, {{1, 2, 3, 4}}, {}).out,
                   {1, 2, 3, 4});
    }

    void dropoutForward() {
        std::vector<float> x(1000, 1.0f);
        const Run eval = forward(*m_backend, "Dropout", {{"rate", 0.4}}, {Shape{1000}}, 1, {x}, {}, false, 7);
        expectNear(eval.out, x);
        const Run a = forward(*m_backend, "Dropout", {{"rate", 0.4}}, {Shape{1000}}, 1, {x}, {}, true, 7);
        const Run again = forward(*m_backend, "Dropout", {{"rate", 0.4}}, {Shape{1000}}, 1, {x}, {}, true, 7);
        const Run other = forward(*m_backend, "Dropout", {{"rate", 0.4}}, {Shape{1000}}, 1, {x}, {}, true, 8);
        QCOMPARE(a.out, again.out);
        QVERIFY(a.out != other.out);
        int dropped = 0;
        for (float v : a.out) {
            QVERIFY(v == 0.0f || std::fabs(v - 1 / 0.6f) < 1e-6f);
            dropped += v == 0.0f;
        }
        QVERIFY2(dropped > 330 && dropped < 470, std::to_string(dropped).c_str());
    }

    // Scratch buffers (normalization statistics, gradient routing) are allocated once per batch
    // size, not on every step.
    void noAllocationPerStep() {
        // The reference CPU backend, counting allocate() calls.
        struct CountingBackend : CpuReferenceBackend {
            void* allocate(size_t bytes) override {
                ++allocations;
                return CpuReferenceBackend::allocate(bytes);
            }
            int allocations = 0;
        } b;
        for (const char* name : {"BatchNorm", "LayerNorm", "Dropout", "Conv2D", "Dense"}) {
            for (bool training : {true, false}) {
                const LayerType& t = type(name);
                const Shape inShape = std::string(name) == "Dense" ? Shape{8} : Shape{2, 3, 3};
                const Json p = t.normalizeParams({});
                const Shape outShape = t.inferShape(p, {inShape});
                auto layer = t.create(p, {inShape}, outShape);
                for (const auto& s : t.parameterSpecs(p, {inShape})) {
                    Parameter par;
                    par.name = s.name;
                    par.trainable = s.trainable;
                    par.value = b.zeros(s.shape);
                    if (s.init == Init::Ones) b.fill(par.value.f32(), 1.0f, par.value.numel());
                    if (s.trainable) par.grad = b.zeros(s.shape);
                    layer->parameters().push_back(std::move(par));
                }
                struct Batch {
                    Tensor x, dx, y, dy;
                };
                auto makeBatch = [&](int n) {
                    Batch bt{b.zeros(inShape.withBatch(n)), b.zeros(inShape.withBatch(n)),
                             b.zeros(outShape.withBatch(n)), b.zeros(outShape.withBatch(n))};
                    b.fill(bt.x.f32(), 0.5f, bt.x.numel());
                    b.fill(bt.dy.f32(), 1.0f, bt.dy.numel());
                    return bt;
                };
                Batch full = makeBatch(4), last = makeBatch(2);
                LayerContext ctx{b, training, 3};
                auto step = [&](Batch& bt) {
                    layer->forward(ctx, {&bt.x}, bt.y);
                    layer->backward(ctx, {&bt.x}, bt.y, bt.dy, {&bt.dx});
                };
                step(full);
                const int after1 = b.allocations;
                // More steps, and a smaller last batch of an epoch, then full batches again.
                for (int i = 0; i < 3; ++i) step(full);
                step(last);
                step(full);
                QVERIFY2(b.allocations == after1,
                         (std::string(name) + (training ? " training" : " eval") + " allocates every step").c_str());
                // Gradients nobody wants (no input gradient, frozen parameters) are skipped or routed to scratch.
                for (auto& par : layer->parameters()) par.grad = Tensor();
                layer->forward(ctx, {&full.x}, full.y);
                layer->backward(ctx, {&full.x}, full.y, full.dy, {nullptr});
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestLayers)
#include "test_layers.moc"
