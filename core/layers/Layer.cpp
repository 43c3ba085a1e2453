// LayerType's shared behaviour (parameter checking, default ports) and the
// helpers every built-in layer file uses (declared in BuiltinLayers.h).
#include "core/layers/Layer.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

#include "core/layers/BuiltinLayers.h"

namespace strata {

namespace {

// Integers without a decimal point, other numbers in the shortest round-trip-ish form.
std::string formatNumber(double v) {
    if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e15) {
        return std::to_string(static_cast<long long>(v));
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string rangeText(double min, double max) { return formatNumber(min) + " to " + formatNumber(max); }

// A compact rendering of a JSON value for error messages.
std::string valueText(const Json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

// True for a JSON number holding an integer (3 or 3.0); sets `out`. An unsigned value above 2^63 - 1 is
// saturated there, so the range check refuses it (get<int64_t>() would wrap 2^63 to a negative number, and
// the message would show that number).
bool asInteger(const Json& v, int64_t& out) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        out = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
        return true;
    }
    if (v.is_number_integer()) {
        out = v.get<int64_t>();
        return true;
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9e15) {
            out = static_cast<int64_t>(d);
            return true;
        }
    }
    return false;
}

[[noreturn]] void fail(const ParamSpec& spec, const std::string& what) {
    throw ParamError(spec.name, spec.name + ": " + what);
}

Json checkValue(const ParamSpec& spec, const Json& v) {
    switch (spec.kind) {
        case ParamSpec::Kind::Int: {
            int64_t i = 0;
            if (!asInteger(v, i)) fail(spec, valueText(v) + " is not an integer (allowed: " + spec.allowedText() + ")");
            if (static_cast<double>(i) < spec.min || static_cast<double>(i) > spec.max)
                fail(spec, valueText(v) + " is out of range (" + spec.allowedText() + ")");
            return Json(i);
        }
        case ParamSpec::Kind::Float: {
            if (!v.is_number()) fail(spec, valueText(v) + " is not a number (allowed: " + spec.allowedText() + ")");
            const double d = v.get<double>();
            if (!std::isfinite(d) || d < spec.min || d > spec.max)
                fail(spec, valueText(v) + " is out of range (" + spec.allowedText() + ")");
            return Json(d);
        }
        case ParamSpec::Kind::Bool:
            if (!v.is_boolean()) fail(spec, valueText(v) + " is not a boolean (allowed: true or false)");
            return v;
        case ParamSpec::Kind::Choice: {
            if (v.is_string()) {
                const std::string s = v.get<std::string>();
                for (const auto& c : spec.choices)
                    if (c == s) return v;
            }
            fail(spec, valueText(v) + " is not allowed (" + spec.allowedText() + ")");
        }
        case ParamSpec::Kind::IntList: {
            Json list = v;
            int64_t single = 0;
            // A bare integer stands for a one-element list ("kernel": 3 means [3]).
            if (asInteger(v, single)) list = Json::array({single});
            if (!list.is_array())
                fail(spec, valueText(v) + " is not a list of integers (allowed: " + spec.allowedText() + ")");
            const int n = static_cast<int>(list.size());
            if (n < spec.minItems || n > spec.maxItems)
                fail(spec, valueText(v) + " has " + std::to_string(n) + " item" + (n == 1 ? "" : "s") +
                               " (allowed: " + spec.allowedText() + ")");
            Json out = Json::array();
            for (int k = 0; k < n; ++k) {
                int64_t e = 0;
                if (!asInteger(list[static_cast<size_t>(k)], e))
                    fail(spec, "item " + std::to_string(k) + " of " + valueText(v) +
                                   " is not an integer (allowed: " + spec.allowedText() + ")");
                if (static_cast<double>(e) < spec.min || static_cast<double>(e) > spec.max) {
                    const Json& item = list[static_cast<size_t>(k)];
                    fail(spec, "item " + std::to_string(k) + " of " + valueText(v) + " is " +
                                   (item.is_number_unsigned() ? item.dump() : std::to_string(e)) + ", out of range (" +
                                   rangeText(spec.min, spec.max) + ")");
                }
                out.push_back(e);
            }
            return out;
        }
    }
    fail(spec, "unknown parameter kind");
}

}  // namespace

std::string ParamSpec::allowedText() const {
    switch (kind) {
        case Kind::Int:
        case Kind::Float: return rangeText(min, max);
        case Kind::Bool: return "true or false";
        case Kind::Choice: {
            std::string s = "one of: ";
            for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : "") + choices[i];
            return s;
        }
        case Kind::IntList: {
            const std::string count = minItems == maxItems
                                          ? std::to_string(minItems)
                                          : std::to_string(minItems) + " to " + std::to_string(maxItems);
            return "a list of " + count + " integers, each " + rangeText(min, max);
        }
    }
    return {};
}

std::vector<std::string> LayerType::inputPorts(const Json& /*params*/) const { return {"in"}; }

Json LayerType::normalizeParams(const Json& params) const {
    if (!params.is_null() && !params.is_object())
        throw ParamError("", name() + ": parameters must be a JSON object, got " + valueText(params));
    const std::vector<ParamSpec> specs = paramSpecs();
    if (params.is_object()) {
        for (auto it = params.begin(); it != params.end(); ++it) {
            bool known = false;
            for (const auto& s : specs) known = known || s.name == it.key();
            if (!known) {
                std::string names;
                for (size_t i = 0; i < specs.size(); ++i) names += (i ? ", " : "") + specs[i].name;
                throw ParamError(it.key(), it.key() + ": unknown parameter of " + name() +
                                               (specs.empty() ? " (it takes none)" : " (known: " + names + ")"));
            }
        }
    }
    Json out = Json::object();
    for (const auto& s : specs) {
        const bool given = params.is_object() && params.contains(s.name);
        out[s.name] = checkValue(s, given ? params.at(s.name) : s.defaultValue);
    }
    return out;
}

namespace layers {

ParamSpec intParam(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help) {
    ParamSpec s;
    s.name = name;
    s.kind = ParamSpec::Kind::Int;
    s.defaultValue = def;
    s.min = static_cast<double>(min);
    s.max = static_cast<double>(max);
    s.help = help;
    return s;
}

ParamSpec floatParam(const std::string& name, double def, double min, double max, const std::string& help) {
    ParamSpec s;
    s.name = name;
    s.kind = ParamSpec::Kind::Float;
    s.defaultValue = def;
    s.min = min;
    s.max = max;
    s.help = help;
    return s;
}

ParamSpec boolParam(const std::string& name, bool def, const std::string& help) {
    ParamSpec s;
    s.name = name;
    s.kind = ParamSpec::Kind::Bool;
    s.defaultValue = def;
    s.help = help;
    return s;
}

ParamSpec choiceParam(const std::string& name, const std::string& def, std::vector<std::string> choices,
                      const std::string& help) {
    ParamSpec s;
    s.name = name;
    s.kind = ParamSpec::Kind::Choice;
    s.defaultValue = def;
    s.choices = std::move(choices);
    s.help = help;
    return s;
}

ParamSpec intListParam(const std::string& name, const std::vector<int64_t>& def, int minItems, int maxItems,
                       int64_t min, int64_t max, const std::string& help) {
    ParamSpec s;
    s.name = name;
    s.kind = ParamSpec::Kind::IntList;
    s.defaultValue = def;
    s.minItems = minItems;
    s.maxItems = maxItems;
    s.min = static_cast<double>(min);
    s.max = static_cast<double>(max);
    s.help = help;
    return s;
}

ParamSpec weightInitParam() {
    return choiceParam("init", "he", {"he", "xavier"},
                       "weight initialization: he (uniform, for layers followed by ReLU) or xavier (uniform)");
}

Init weightInit(const Json& params) {
    return params.value("init", std::string("he")) == "xavier" ? Init::XavierUniform : Init::HeUniform;
}

std::pair<int, int> pairParam(const Json& params, const char* key, std::pair<int, int> fallback) {
    const Json& v = params.at(key);
    if (v.empty()) return fallback;
    const int a = v[0].get<int>();
    return {a, v.size() > 1 ? v[1].get<int>() : a};
}

ConvDesc ConvSettings::descFor(int n, int inChannels, int inH, int inW, int outChannels) const {
    ConvDesc d;
    d.n = n;
    d.c = inChannels;
    d.h = inH;
    d.w = inW;
    d.k = outChannels;
    d.r = r;
    d.s = s;
    d.strideH = strideH;
    d.strideW = strideW;
    d.padH = padH;
    d.padW = padW;
    d.dilationH = dilH;
    d.dilationW = dilW;
    d.groups = groups;
    return d;
}

ConvSettings convSettings(const Json& params, const Shape& in) {
    ConvSettings g{};
    g.c = toInt(in[0], "in", "channel count");
    g.h = toInt(in[1], "in", "height");
    g.w = toInt(in[2], "in", "width");
    g.k = params.at("filters").get<int>();
    std::tie(g.r, g.s) = pairParam(params, "kernel");
    std::tie(g.strideH, g.strideW) = pairParam(params, "stride");
    std::tie(g.padH, g.padW) = pairParam(params, "padding", {0, 0});
    std::tie(g.dilH, g.dilW) = pairParam(params, "dilation");
    g.groups = params.at("groups").get<int>();
    return g;
}

ConvSettings checkedConvSettings(const std::string& layer, const Json& params, const std::vector<Shape>& inputs) {
    expectInputCount(layer, {"in"}, inputs);
    const Shape& s = inputs[0];
    if (s.rank() != 3)
        throwShapeError("in", layer, s, "a per-sample shape of rank 3 [channels, height, width]",
                        s.rank() == 1 ? "; add a Reshape before it" : "");
    const ConvSettings g = convSettings(params, s);
    if (g.c % g.groups != 0)
        throwShapeError("in", layer, s, "a channel count divisible by groups = " + std::to_string(g.groups));
    if (g.k % g.groups != 0)
        throw ParamError(
            "filters", "filters: " + std::to_string(g.k) + " is not divisible by groups = " + std::to_string(g.groups));
    return g;
}

void throwShapeError(const std::string& port, const std::string& layer, const Shape& got, const std::string& expected,
                     const std::string& hint) {
    throw ShapeError(port, port + ": " + layer + " expects " + expected + ", got " + got.toString() + hint);
}

void expectInputCount(const std::string& layer, const std::vector<std::string>& ports,
                      const std::vector<Shape>& inputs) {
    if (inputs.size() == ports.size()) return;
    const std::string port = inputs.size() < ports.size() ? ports[inputs.size()] : std::string();
    throw ShapeError(port, layer + " takes " + std::to_string(ports.size()) + " input" +
                               (ports.size() == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()));
}

namespace {

const Shape& checkSequence(const std::string& layer, const Shape& s, const std::string& features) {
    if (s.rank() != 2)
        throwShapeError("in", layer, s, "a per-sample shape of rank 2 [length, " + features + "]",
                        s.rank() == 1 ? "; put an Embedding before it" : "");
    toInt(s.numel(), "in", "length x " + features);
    return s;
}

}  // namespace

const Shape& expectSequence(const std::string& layer, const std::vector<Shape>& inputs, const std::string& features) {
    expectInputCount(layer, {"in"}, inputs);
    return checkSequence(layer, inputs[0], features);
}

bool hasMaskPort(const Json& params) {
    const auto it = params.find("masked");
    return it != params.end() && it->is_boolean() && it->get<bool>();
}

std::vector<std::string> maskedSequencePorts(const Json& params) {
    if (hasMaskPort(params)) return {"in", "mask"};
    return {"in"};
}

const Shape& expectMaskedSequence(const std::string& layer, const Json& params, const std::vector<Shape>& inputs,
                                  const std::string& features) {
    expectInputCount(layer, maskedSequencePorts(params), inputs);
    const Shape& s = checkSequence(layer, inputs[0], features);
    if (inputs.size() > 1) {
        const Shape& m = inputs[1];
        if (m.rank() != 1 || m[0] != s[0])
            throwShapeError("mask", layer, m,
                            "[" + std::to_string(s[0]) + "], one value per position of 'in' (0 marks padding)",
                            "; connect the token ids that fed the Embedding");
    }
    return s;
}

ParamSpec maskedParam() {
    return boolParam("masked", false,
                     "adds a 'mask' input: the token ids ([length]); positions whose id is 0 (padding) are ignored");
}

int toInt(int64_t v, const std::string& port, const std::string& what) {
    if (v < 0 || v > INT_MAX)
        throw ShapeError(port, port + ": " + what + " " + std::to_string(v) + " is too large (at most " +
                                   std::to_string(INT_MAX) + ")");
    return static_cast<int>(v);
}

std::vector<std::string> numberedPorts(const Json& params) {
    int n = 2;
    // Also called with raw (unnormalized) params by the graph editor: out-of-range or
    // non-integer counts fall back to the nearest valid port list rather than failing here;
    // normalizeParams reports them.
    int64_t given = 0;
    if (params.is_object() && params.contains("inputs") && asInteger(params["inputs"], given))
        n = static_cast<int>(std::max<int64_t>(2, std::min<int64_t>(8, given)));
    std::vector<std::string> ports;
    for (int i = 0; i < n; ++i) ports.push_back("in" + std::to_string(i));
    return ports;
}

LayerCost streamingCost(const std::vector<Shape>& inputs, const Shape& output, double forwardFlops,
                        double backwardFlops) {
    double in = 0;
    for (const Shape& s : inputs) in += static_cast<double>(s.numel());
    const double out = static_cast<double>(output.numel());
    LayerCost c;
    c.forwardFlops = forwardFlops;
    c.backwardFlops = backwardFlops;
    c.forwardBytes = 4.0 * (in + out);
    c.backwardBytes = 4.0 * (out + 2.0 * in);
    return c;
}

LayerCost elementwiseCost(const std::vector<Shape>& inputs, const Shape& output) {
    const double out = static_cast<double>(output.numel());
    return streamingCost(inputs, output, out, out);
}

ChannelFacts perChannelFacts(std::vector<std::string> perChannelParams) {
    ChannelFacts f;
    f.input = ChannelFacts::Input::PerChannel;
    f.perChannel = std::move(perChannelParams);
    return f;
}

void ensureBuffer(Backend& backend, Tensor& buf, const Shape& shape) {
    // Only grows: a smaller last batch of an epoch reuses the larger buffer.
    if (buf.defined() && buf.numel() >= shape.numel() && buf.backend() == &backend) return;
    buf = backend.empty(shape);
}

float* gradOf(Parameter& p) { return p.trainable && p.grad.defined() ? p.grad.f32() : nullptr; }

namespace {

class ActivationLayer : public Layer {
public:
    ActivationLayer(Activation act, float alpha) : m_act(act), m_alpha(alpha) {}
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.activationForward(out.f32(), in[0]->f32(), out.numel(), m_act, m_alpha);
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0])
            ctx.backend.activationBackward(dIn[0]->f32(), dOut.f32(), in[0]->f32(), out.f32(), out.numel(), m_act,
                                           m_alpha, ctx.overwritesInputGrad(0));
    }
    bool overwritesInputGradient() override { return true; }
    LayoutRule layoutRule() const override { return LayoutRule::Elementwise; }

private:
    Activation m_act;
    float m_alpha;
};

class CopyLayer : public Layer {
public:
    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ctx.backend.copy(out.raw(), in[0]->raw(), out.bytes());
    }
    void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        if (dIn[0]) ctx.backend.axpy(dIn[0]->f32(), 1.0f, dOut.f32(), dOut.numel());
    }
};

}  // namespace

std::unique_ptr<Layer> makeActivationLayer(Activation act, float alpha) {
    return std::make_unique<ActivationLayer>(act, alpha);
}

std::unique_ptr<Layer> makeCopyLayer() { return std::make_unique<CopyLayer>(); }

}  // namespace layers
}  // namespace strata
