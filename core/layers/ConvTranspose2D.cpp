// ConvTranspose2D: the transposed 2-D convolution (a learned upsampling) over per-sample [C, H, W], grouped and
// dilated. Weight [C, filters/groups, kh, kw] (PyTorch's and ONNX's layout), bias [filters]. It is the backward
// of the convolution from its output to its input: forward runs the backend's convolution backward-data, and
// its backward the convolution's forward and backward-filter, so every backend's convolutions serve it.
#include <tuple>

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

struct Geometry : ConvSettings {
    int outPadH = 0, outPadW = 0;
    int outH() const { return (h - 1) * strideH - 2 * padH + dilH * (r - 1) + outPadH + 1; }
    int outW() const { return (w - 1) * strideW - 2 * padW + dilW * (s - 1) + outPadW + 1; }
    // The convolution this one transposes: from our output [k, outH, outW] to our input [c, h, w], weight
    // [c, k / groups, r, s]: exactly our weight.
    ConvDesc desc(int n) const { return descFor(n, k, outH(), outW(), c); }
};

Geometry geometry(const Json& params, const Shape& in) {
    Geometry g{convSettings(params, in)};
    std::tie(g.outPadH, g.outPadW) = pairParam(params, "output_padding", {0, 0});
    return g;
}

class ConvTranspose2DLayer : public Layer {
public:
    ConvTranspose2DLayer(Geometry g, bool useBias) : m_g(g), m_useBias(useBias) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        Backend& b = ctx.backend;
        const int n = static_cast<int>(batchOf(*in[0]));
        const ConvDesc d = m_g.desc(n);
        b.conv2dBackwardFused(out.f32(), nullptr, nullptr, in[0]->f32(), nullptr, m_params[0].value.f32(), d, true);
        if (m_useBias) b.addBiasChannels(out.f32(), m_params[1].value.f32(), n, m_g.k, m_g.outH() * m_g.outW());
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const int n = static_cast<int>(batchOf(*in[0]));
        const ConvDesc d = m_g.desc(n);
        const float* w = m_params[0].value.f32();
        if (dIn[0]) {
            // The convolution's forward writes: straight into dIn when it may be overwritten, else through scratch.
            if (ctx.overwritesInputGrad(0)) {
                b.conv2dForward(dIn[0]->f32(), dOut.f32(), w, d);
            } else {
                ensureBuffer(b, m_scratch, dIn[0]->shape());
                b.conv2dForward(m_scratch.f32(), dOut.f32(), w, d);
                b.axpy(dIn[0]->f32(), 1.0f, m_scratch.f32(), dIn[0]->numel());
            }
        }
        if (float* dw = gradOf(m_params[0])) b.conv2dBackwardFilter(dw, in[0]->f32(), dOut.f32(), d);
        if (m_useBias)
            if (float* db = gradOf(m_params[1])) b.sumChannels(db, dOut.f32(), n, m_g.k, m_g.outH() * m_g.outW());
    }
    bool overwritesInputGradient() override { return true; }

private:
    Geometry m_g;
    bool m_useBias;
    Tensor m_scratch;
};

class ConvTranspose2DType : public LayerType {
public:
    std::string name() const override { return "ConvTranspose2D"; }
    std::string category() const override { return "Convolution"; }
    std::string description() const override {
        return "Transposed 2-D convolution (learned upsampling) over images [channels, height, width]: each input "
               "value spreads a learnable kernel over the output; stride 2 doubles the size.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("filters", 32, 1, 65536, "number of output channels"),
                intListParam("kernel", {3, 3}, 1, 2, 1, 63, "kernel size [height, width], or one number for both"),
                intListParam("stride", {1, 1}, 1, 2, 1, 64, "step between kernel positions in the output"),
                intListParam("padding", {0, 0}, 1, 2, 0, 64, "rows and columns cropped from each side of the output"),
                intListParam("output_padding", {0, 0}, 1, 2, 0, 63,
                             "rows and columns added at the bottom and right of the output (less than stride)"),
                intListParam("dilation", {1, 1}, 1, 2, 1, 64, "spacing between kernel taps [height, width]"),
                intParam("groups", 1, 1, 65536, "channel groups; input channels and filters must both divide"),
                boolParam("use_bias", true, "add a learnable bias per filter"),
                weightInitParam()};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        checkedConvSettings(name(), params, inputs);
        const Shape& s = inputs[0];
        const Geometry g = geometry(params, s);
        if (g.outPadH >= g.strideH || g.outPadW >= g.strideW)
            throw ParamError("output_padding", "output_padding: [" + std::to_string(g.outPadH) + ", " +
                                                   std::to_string(g.outPadW) + "] must be less than stride [" +
                                                   std::to_string(g.strideH) + ", " + std::to_string(g.strideW) +
                                                   "] on each axis; lower it or raise the stride");
        const int64_t oh = (int64_t(g.h) - 1) * g.strideH - 2 * g.padH + int64_t(g.dilH) * (g.r - 1) + g.outPadH + 1;
        const int64_t ow = (int64_t(g.w) - 1) * g.strideW - 2 * g.padW + int64_t(g.dilW) * (g.s - 1) + g.outPadW + 1;
        if (oh < 1 || ow < 1)
            throwShapeError("in", name(), s,
                            "an image whose output stays at least 1 x 1 after cropping padding " +
                                std::to_string(g.padH) + ", " + std::to_string(g.padW) + " (it would be " +
                                std::to_string(oh) + " x " + std::to_string(ow) + "); lower the padding");
        return Shape{g.k, toInt(oh, "in", "output height"), toInt(ow, "in", "output width")};
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>& inputs) const override {
        const Geometry g = geometry(params, inputs.at(0));
        // Fans as PyTorch counts them for its default init: weight.size(1) * kernel area is the fan-in.
        const int64_t fanIn = int64_t(g.k / g.groups) * g.r * g.s, fanOut = int64_t(g.c / g.groups) * g.r * g.s;
        std::vector<ParameterSpec> specs;
        specs.push_back({"weight", Shape{g.c, g.k / g.groups, g.r, g.s}, weightInit(params), fanIn, fanOut});
        if (params.at("use_bias").get<bool>()) specs.push_back({"bias", Shape{g.k}, Init::Zeros, fanIn, fanOut});
        return specs;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<ConvTranspose2DLayer>(geometry(params, inputs.at(0)),
                                                      params.at("use_bias").get<bool>());
    }
    // Each input value meets (filters / groups) x kernel area weights; backward computes the input and weight
    // gradients, twice the forward. Its input gradient may go through a scratch buffer of the input's size.
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const Geometry g = geometry(params, inputs.at(0));
        const double f =
            2.0 * static_cast<double>(inputs.at(0).numel()) * static_cast<double>(g.k / g.groups) * g.r * g.s;
        LayerCost c = streamingCost(inputs, output, f, 2.0 * f);
        c.convolution = true;
        c.inputGradientScratchFloats = {inputs.at(0).numel()};
        return c;
    }
    // None: int8 export and pruning take a weight whose rows are the output channels (axis 0), and here they
    // are the input channels; the parameters stay float32 and whole.
    CompressibleWeight compressibleWeight() const override { return {}; }
    // The weight's rows are input channels, not filters: structured pruning leaves it whole.
    ChannelFacts channelFacts(const Json&, const std::vector<Shape>&, const Shape&) const override {
        return mixingFacts();
    }
};

}  // namespace

std::unique_ptr<LayerType> makeConvTranspose2D() { return std::make_unique<ConvTranspose2DType>(); }

}  // namespace strata::layers
