// Conv2D: 2-D convolution over per-sample [C, H, W] with grouped and dilated
// kernels. Weight [filters, C/groups, kh, kw] (PyTorch's layout), bias [filters].

#include "core/layers/BuiltinLayers.h"

namespace strata::layers {
namespace {

struct ConvGeometry : ConvSettings {
    int srcBlock = 0, dstBlock = 0;  // the input's and output's layouts (Layer::setLayouts)
    ConvDesc desc(int n) const {
        ConvDesc d = descFor(n, c, h, w, k);
        d.srcBlock = srcBlock;
        d.dstBlock = dstBlock;
        return d;
    }
};

ConvGeometry geometry(const Json& params, const Shape& in) { return ConvGeometry{convSettings(params, in)}; }

class Conv2DLayer : public Layer {
public:
    Conv2DLayer(ConvGeometry g, bool useBias) : m_g(g), m_useBias(useBias) {}

    void forward(LayerContext& ctx, const std::vector<const Tensor*>& in, Tensor& out) override {
        ConvDesc d = m_g.desc(static_cast<int>(batchOf(*in[0])));
        d.weightsVersion = ctx.weightsVersion;
        ctx.backend.conv2dForwardFused(out.f32(), in[0]->f32(), m_params[0].value.f32(),
                                       m_useBias ? m_params[1].value.f32() : nullptr, m_fusedReLU, d);
    }

    // The backward reads the input, the weights and dOut, never the output.
    bool fuseReLU() override {
        m_fusedReLU = true;
        return true;
    }

    void backward(LayerContext& ctx, const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dOut,
                  const std::vector<Tensor*>& dIn) override {
        Backend& b = ctx.backend;
        const ConvDesc d = m_g.desc(static_cast<int>(batchOf(*in[0])));
        b.conv2dBackwardFused(dIn[0] ? dIn[0]->f32() : nullptr, gradOf(m_params[0]),
                              m_useBias ? gradOf(m_params[1]) : nullptr, dOut.f32(), in[0]->f32(),
                              m_params[0].value.f32(), d, ctx.overwritesInputGrad(0));
    }
    bool overwritesInputGradient() override { return true; }
    // The backend reads and writes blocked tensors (ConvDesc::srcBlock, dstBlock).
    LayoutRule layoutRule() const override { return LayoutRule::Any; }
    void setLayouts(const std::vector<int>& inputBlocks, int outputBlock) override {
        m_g.srcBlock = inputBlocks.at(0);
        m_g.dstBlock = outputBlock;
    }

private:
    ConvGeometry m_g;
    bool m_useBias;
    bool m_fusedReLU = false;
};

class Conv2DType : public LayerType {
public:
    std::string name() const override { return "Conv2D"; }
    std::string category() const override { return "Convolution"; }
    std::string description() const override {
        return "2-D convolution over images [channels, height, width]: each filter slides a learnable kernel "
               "over the input.";
    }
    std::vector<ParamSpec> paramSpecs() const override {
        return {intParam("filters", 32, 1, 65536, "number of output channels"),
                intListParam("kernel", {3, 3}, 1, 2, 1, 63, "kernel size [height, width], or one number for both"),
                intListParam("stride", {1, 1}, 1, 2, 1, 64, "step between kernel positions [height, width]"),
                intListParam("padding", {0, 0}, 1, 2, 0, 64, "zeros added on each side [height, width]"),
                intListParam("dilation", {1, 1}, 1, 2, 1, 64, "spacing between kernel taps [height, width]"),
                intParam("groups", 1, 1, 65536, "channel groups; input channels and filters must both divide"),
                boolParam("use_bias", true, "add a learnable bias per filter"),
                weightInitParam()};
    }
    Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const override {
        const ConvGeometry g{checkedConvSettings(name(), params, inputs)};
        const Shape& s = inputs[0];
        const ConvDesc d = g.desc(1);
        if (d.outH() < 1 || d.outW() < 1 || g.h + 2 * g.padH < g.dilH * (g.r - 1) + 1 ||
            g.w + 2 * g.padW < g.dilW * (g.s - 1) + 1)
            throwShapeError("in", name(), s,
                            "an image at least as large as the dilated kernel (" +
                                std::to_string(g.dilH * (g.r - 1) + 1) + " x " +
                                std::to_string(g.dilW * (g.s - 1) + 1) + " after padding " + std::to_string(g.padH) +
                                ", " + std::to_string(g.padW) + ")");
        return Shape{g.k, d.outH(), d.outW()};
    }
    std::vector<ParameterSpec> parameterSpecs(const Json& params, const std::vector<Shape>& inputs) const override {
        const ConvGeometry g = geometry(params, inputs.at(0));
        const int64_t fanIn = int64_t(g.c / g.groups) * g.r * g.s, fanOut = int64_t(g.k / g.groups) * g.r * g.s;
        std::vector<ParameterSpec> specs;
        specs.push_back({"weight", Shape{g.k, g.c / g.groups, g.r, g.s}, weightInit(params), fanIn, fanOut});
        if (params.at("use_bias").get<bool>()) specs.push_back({"bias", Shape{g.k}, Init::Zeros, fanIn, fanOut});
        return specs;
    }
    std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs, const Shape&) const override {
        return std::make_unique<Conv2DLayer>(geometry(params, inputs.at(0)), params.at("use_bias").get<bool>());
    }
    // A dot product over (channels / groups) x kernel area per output value; backward computes the input and
    // weight gradients, twice the forward.
    LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const override {
        const ConvGeometry g = geometry(params, inputs.at(0));
        const double f = 2.0 * static_cast<double>(output.numel()) * static_cast<double>(g.c / g.groups) * g.r * g.s;
        LayerCost c = streamingCost(inputs, output, f, 2.0 * f);
        c.convolution = true;
        return c;
    }
    CompressibleWeight compressibleWeight() const override { return {"weight", 0, "bias"}; }
    ChannelFacts channelFacts(const Json& params, const std::vector<Shape>&, const Shape&) const override {
        ChannelFacts f;
        f.countParam = f.unitName = "filters";
        f.weight = "weight";
        if (params.at("use_bias").get<bool>()) f.bias = "bias";
        f.takesFoldedNormalization = true;  // grouped or not, filter k is row k of the weight
        const int64_t groups = params.at("groups").get<int64_t>();
        if (groups != 1) {
            f.fixed = "a grouped convolution (groups " + std::to_string(groups) + ")";
            return f;  // and its input channels are mixed within each group
        }
        // [filters, channels, kernel height, kernel width]: each input channel a kernel-sized block of a row.
        f.input = ChannelFacts::Input::Weighs;
        const auto [kh, kw] = pairParam(params, "kernel");
        f.inputBlock = int64_t{kh} * kw;
        return f;
    }
};

}  // namespace

std::unique_ptr<LayerType> makeConv2D() { return std::make_unique<Conv2DType>(); }

}  // namespace strata::layers
